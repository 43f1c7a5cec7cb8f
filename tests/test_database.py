"""docs/database.md's export recipes, run as the page shows them, each with its build:
PostgreSQL and MariaDB against a real server, SQLite on a real file.

Each server is Debian's, made by its own tool (initdb, mariadb-install-db) in a temporary
folder of its own, listens on 127.0.0.1 and a free port, trusts every client on loopback, and
is stopped by a signal and waited for until it has exited; then its folder goes. Neither runs
as root: as root, the folder and the server belong to ``nobody``. Each gives the variables (or
the option file) that point its own client at it, as a user's shell would.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final, NamedTuple

import pytest

from tests.browser import install_test_tools
from tests.contract import run_ok, wait_until
from tests.objectstore import free_port

pytestmark = pytest.mark.real_world

REPO: Final = Path(__file__).resolve().parent.parent
PAGE: Final = (REPO / "docs" / "database.md").read_text(encoding="utf-8")
# Three articles, one of them never rated: it must come out "Not rated yet", not missing.
SAMPLE: Final = (
    "insert into articles values (7, 'Seven'), (12, 'Twelve'), (31, 'Thirty-one');\n"
    "insert into ratings values (7, 5), (7, 4), (12, 3);\n"
)
EXPORTED: Final = b"article_id,rating_sum,rating_count\n7,9,2\n12,3,1\n31,0,0\n"
DOCUMENTS: Final = {7: (9, 2, "4.5"), 12: (3, 1, "3.0"), 31: (0, 0, "0.0")}


def block(language: str, after: str = "") -> str:
    """The first ```language block of the page after the heading ``after``."""
    text = PAGE.split(f"\n## {after}\n", 1)[1] if after else PAGE
    found = re.search(rf"^```{language}\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    assert found, (language, after)
    return found[1]


# Each command must succeed; a failure shows its output.
run: Final = functools.partial(run_ok, timeout=120)


class Server(NamedTuple):
    """How to run a server made in a folder: the command, the one that answers once it is
    ready, its client (a database's name after it, else the server's own), and the variables
    the client reads. Each stops on SIGQUIT: at once, as the data goes."""

    command: list[str]
    ready: list[str]
    client: list[str]
    environ: dict[str, str]


def postgres(folder: Path, owner: str | None, port: int) -> Server:
    """A cluster initdb made: on loopback only, no Unix socket (its default folder is the
    system server's), no fsync."""
    # The newest PostgreSQL Debian installed, looked for once the tests installed it.
    programs = max(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
    data = str(folder / "data")
    initdb = [str(programs / "initdb"), "-D", data, "-U", "postgres", "--auth=trust"]
    run([*initdb, "--no-sync", "--encoding=UTF8", "--locale=C"], user=owner, cwd=folder)
    settings = ["listen_addresses=127.0.0.1", "unix_socket_directories=", "fsync=off"]
    return Server(
        [str(programs / "postgres"), "-D", data, "-p", str(port)]
        + [part for setting in settings for part in ("-c", setting)],
        [str(programs / "pg_isready"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres"],
        [str(programs / "psql"), "--no-psqlrc", "--quiet", "--set", "ON_ERROR_STOP=1"],
        {"PGHOST": "127.0.0.1", "PGPORT": str(port), "PGUSER": "postgres"},
    )


def mariadb(folder: Path, owner: str | None, port: int) -> Server:
    """A data folder mariadb-install-db made. Its client finds it through ``~/.my.cnf``, as a
    user's does: HOME is the server's folder."""
    options = ["--no-defaults", f"--datadir={folder / 'data'}"]
    install = ["mariadb-install-db", *options, "--skip-test-db"]
    run([*install, "--auth-root-authentication-method=normal"], user=owner, cwd=folder)
    (folder / ".my.cnf").write_text(f"[client]\nhost=127.0.0.1\nport={port}\nuser=root\n")
    listen = ["--bind-address=127.0.0.1", f"--port={port}", f"--socket={folder}/socket"]
    quiet = [f"--pid-file={folder}/pid", "--skip-grant-tables", "--skip-log-bin"]
    return Server(
        ["mariadbd", *options, *listen, *quiet],
        ["mariadb-admin", "--no-defaults", "-h", "127.0.0.1", "-P", str(port), "ping"],
        ["mariadb", "--batch"],
        {"HOME": str(folder)},
    )


# The page's heading of each recipe, and the server it runs against (None: a file).
SERVERS: Final[dict[str, Callable[[Path, str | None, int], Server] | None]] = {
    "PostgreSQL": postgres,
    "SQLite": None,
    "MySQL and MariaDB": mariadb,
}


@pytest.fixture(params=list(SERVERS))
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The page's tables and SAMPLE in a database ``shop``; the variables its client needs."""
    install_test_tools()  # Debian's servers and sqlite3; a failure fails, never skips
    make = SERVERS[request.param]
    if make is None:
        run(["sqlite3", str(tmp_path / "shop.db")], input=block("sql") + SAMPLE)
        yield {}
        return
    # The server's folder: not under pytest's tmp folders, which are root's alone, and nobody
    # must own this one. In memory where the machine has it, as the tests' own (conftest.py).
    memory = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="ratings-database-", dir=memory) as name:
        folder, owner = Path(name), "nobody" if os.geteuid() == 0 else None
        shutil.chown(folder, owner or os.geteuid())
        server = make(folder, owner, free_port())
        log = folder / "server.log"
        with log.open("wb") as output:
            process = subprocess.Popen(
                server.command, user=owner, cwd=folder, stdout=output, stderr=subprocess.STDOUT
            )
        try:
            ready = functools.partial(subprocess.run, server.ready, capture_output=True, timeout=30)
            wait_until(lambda: ready().returncode == 0, process, log)
            environ = {**os.environ, **server.environ}
            run(server.client, input="create database shop;", env=environ)
            run([*server.client, "shop"], input=block("sql") + SAMPLE, env=environ)
            yield server.environ
        finally:
            process.send_signal(signal.SIGQUIT)
            process.wait(timeout=30)


def test_the_export_and_build_run_as_the_page_shows(
    database: dict[str, str], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # The command the package installs runs the same main as the checkout's generate.py.
    command = f'ratings-api() {{ "{sys.executable}" "{REPO}/generate.py" "$@"; }}\n'
    commands = command + block("sh", request.node.callspec.params["database"])
    done = run(["bash", "-eo", "pipefail", "-c", commands], cwd=tmp_path, env=os.environ | database)

    assert done.stderr == ""
    last = done.stdout.splitlines()[-1]  # after psql's "COPY 3"
    assert last.startswith("built site: 3 articles; files: 12 written, 0 removed, 0 unchanged ")
    assert (tmp_path / "ratings.csv").read_bytes() == EXPORTED
    for article, (total, count, value) in DOCUMENTS.items():
        document = tmp_path / f"site/away/api/articles/{article}/rating/index.json"
        assert document.read_text() == (
            f'{{"article_url": "https://www.example.com/away/api/articles/{article}/", '
            f'"id": {article}, "rating_sum": {total}, "rating_count": {count}, '
            f'"rating_value": "{value}"}}\n'
        )
