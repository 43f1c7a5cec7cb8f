"""Real database servers for the tests: Debian's PostgreSQL and MariaDB, each on 127.0.0.1
and a free port, with its data in a temporary folder of its own.

Each is made by its own tool (initdb, mariadb-install-db), trusts every client on loopback,
and is stopped by a signal and waited for until it has exited; then its folder goes. Neither
runs as root: as root, the folder and the server belong to ``nobody``. Each gives the
variables (or the option file) that point its own client at it, as a user's shell would.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tests.objectstore import free_port

START_TIMEOUT: Final = 60.0
STOP_TIMEOUT: Final = 30.0
POSTGRES_USER: Final = "postgres"  # the cluster's superuser, as on a Debian server
# On loopback only; no Unix socket (its default folder is the system server's); no
# fsync, as the data is thrown away.
POSTGRES_SETTINGS: Final = (
    *("-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="),
    *("-c", "fsync=off"),
)


@dataclass
class Server:
    """A running server: its folder, the command that runs SQL from stdin in a database
    (the database's name last), the variables its client reads, how it is stopped, and the
    database every server of its kind has."""

    folder: Path
    process: subprocess.Popen[bytes]
    client: tuple[str, ...]
    environ: dict[str, str]
    stop_signal: signal.Signals
    first_database: str

    def sql(self, script: str, database: str) -> str:
        """The client's output for ``script`` run in ``database``; AssertionError if it fails."""
        done = subprocess.run(
            [*self.client, database],
            input=script,
            env={**os.environ, **self.environ},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def stop(self) -> None:
        """Stop the server, wait until it and its children have exited; then the folder goes."""
        if self.process.poll() is None:
            self.process.send_signal(self.stop_signal)
        self.process.wait(timeout=STOP_TIMEOUT)
        shutil.rmtree(self.folder, ignore_errors=True)


def start_postgres() -> Server:
    """initdb a cluster in a new folder, start its server, and wait until it answers."""
    folder, owner = _own_folder("postgres")
    data, log = folder / "data", folder / "server.log"
    initdb = [_postgres("initdb"), "-D", str(data), "-U", POSTGRES_USER, "--auth=trust"]
    _setup([*initdb, "--no-sync", "--encoding=UTF8", "--locale=C"], folder, owner)
    port = free_port()
    command = [_postgres("postgres"), "-D", str(data), "-p", str(port), *POSTGRES_SETTINGS]
    client = (_postgres("psql"), "--no-psqlrc", "--quiet", "--set", "ON_ERROR_STOP=1", "-d")
    environ = {"PGHOST": "127.0.0.1", "PGPORT": str(port), "PGUSER": POSTGRES_USER}
    # SIGQUIT: an immediate shutdown, no checkpoint; the data is thrown away.
    process = _launch(command, log, owner)
    server = Server(folder, process, client, environ, signal.SIGQUIT, "postgres")
    ready = [_postgres("pg_isready"), "-h", "127.0.0.1", "-p", str(port), "-U", POSTGRES_USER]
    _wait_ready(server, ready, log)
    return server


def start_mariadb() -> Server:
    """mariadb-install-db a data folder, start mariadbd on it, and wait until it answers.

    Its client finds it through ``~/.my.cnf``, as a user's does: HOME is the server's folder.
    """
    folder, owner = _own_folder("mariadb")
    data, log = folder / "data", folder / "server.log"
    user = [f"--user={owner}"] if owner else []
    install = ["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--skip-test-db"]
    _setup([*install, *user, "--auth-root-authentication-method=normal"], folder, None)
    port = free_port()
    (folder / ".my.cnf").write_text(f"[client]\nhost=127.0.0.1\nport={port}\nuser=root\n")
    command = ["mariadbd", "--no-defaults", f"--datadir={data}", *user]
    command += ["--bind-address=127.0.0.1", f"--port={port}", f"--socket={folder}/socket"]
    command += ["--skip-grant-tables", "--skip-log-bin", f"--pid-file={folder}/pid"]
    client = ("mariadb", "--batch")
    # SIGTERM: mariadbd's own shutdown, quick on a few rows.
    process = _launch(command, log, None)
    server = Server(folder, process, client, {"HOME": str(folder)}, signal.SIGTERM, "mysql")
    ready = ["mariadb-admin", "--no-defaults", "-h", "127.0.0.1", "-P", str(port), "ping"]
    _wait_ready(server, ready, log)
    return server


def _postgres(name: str) -> str:
    """A program of the newest PostgreSQL Debian installed, looked for when needed: the
    tests install it (scripts/install-test-tools) after this module is imported."""
    folders = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
    if not folders:
        raise AssertionError("no /usr/lib/postgresql/*/bin: run scripts/install-test-tools")
    return str(folders[-1] / name)


def _own_folder(kind: str) -> tuple[Path, str | None]:
    """A new folder for a server's data, and the user it runs as (None: this one)."""
    # Not under pytest's tmp folders: those are root's alone, and nobody must own this one.
    # In memory where the machine has it, as the tests' own (conftest.py).
    memory = "/dev/shm" if os.path.isdir("/dev/shm") else None
    folder = Path(tempfile.mkdtemp(prefix=f"ratings-{kind}-", dir=memory))
    owner = "nobody" if os.geteuid() == 0 else None
    if owner is not None:
        shutil.chown(folder, owner)
    return folder, owner


def _setup(command: Sequence[str], folder: Path, owner: str | None) -> None:
    done = subprocess.run(
        command,
        user=owner,
        cwd=folder,  # a folder its owner may enter, whoever runs the tests
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{command[0]} failed:\n{done.stdout}{done.stderr}"


def _launch(command: Sequence[str], log: Path, owner: str | None) -> subprocess.Popen[bytes]:
    with log.open("wb") as output:
        return subprocess.Popen(
            command, user=owner, cwd=log.parent, stdout=output, stderr=subprocess.STDOUT
        )


def _wait_ready(server: Server, ready: Sequence[str], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        done = subprocess.run(ready, capture_output=True, timeout=30, check=False)
        if done.returncode == 0:
            return
        if server.process.poll() is not None or time.monotonic() > deadline:
            said = log.read_text(errors="replace")
            server.stop()
            raise AssertionError(f"{ready[0]}: the server did not start:\n{said}")
        time.sleep(0.1)
