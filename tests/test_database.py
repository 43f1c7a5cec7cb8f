"""docs/database.md's export recipes, run as the page shows them, each with its build:
PostgreSQL and MariaDB against a real server (tests/databases.py), SQLite on a real file.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.browser import install_test_tools
from tests.databases import Server, start_mariadb, start_postgres

pytestmark = pytest.mark.real_world

REPO: Final = Path(__file__).resolve().parent.parent
PAGE: Final = (REPO / "docs" / "database.md").read_text(encoding="utf-8")
# Three articles, one of them never rated: it must come out "Not rated yet", not missing.
SAMPLE: Final = (
    "insert into articles values (7, 'Seven'), (12, 'Twelve'), (31, 'Thirty-one');\n"
    "insert into ratings values (7, 5), (7, 4), (12, 3);\n"
)
EXPORTED: Final = b"article_id,rating_sum,rating_count\n7,9,2\n12,3,1\n31,0,0\n"
DOCUMENTS: Final = {
    7: '"rating_sum": 9, "rating_count": 2, "rating_value": "4.5"}',
    12: '"rating_sum": 3, "rating_count": 1, "rating_value": "3.0"}',
    31: '"rating_sum": 0, "rating_count": 0, "rating_value": "0.0"}',
}


def block(language: str, after: str = "") -> str:
    """The first ```language block of the page after the heading ``after``."""
    text = PAGE.split(f"\n## {after}\n", 1)[1] if after else PAGE
    found = re.search(rf"^```{language}\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    assert found, (language, after)
    return found[1]


# The page's heading of each recipe, and the server it runs against (None: a file).
SERVERS: Final[dict[str, Callable[[], Server] | None]] = {
    "PostgreSQL": start_postgres,
    "SQLite": None,
    "MySQL and MariaDB": start_mariadb,
}


@pytest.fixture(params=list(SERVERS))
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The page's tables and SAMPLE in a database ``shop``; the variables its client needs."""
    install_test_tools()  # Debian's servers and sqlite3; a failure fails, never skips
    start = SERVERS[request.param]
    if start is None:
        script = block("sql") + SAMPLE
        subprocess.run(["sqlite3", str(tmp_path / "shop.db")], input=script, text=True, check=True)
        yield {}
        return
    server = start()
    try:
        server.sql("create database shop;", server.first_database)
        server.sql(block("sql") + SAMPLE, "shop")
        yield server.environ
    finally:
        server.stop()


def run_page(commands: str, folder: Path, environ: dict[str, str]) -> str:
    """Run the page's ``commands`` in ``folder`` as a shell script; their stdout."""
    shims = folder / "bin"
    shims.mkdir()
    # The command the package installs runs the same main as the checkout's generate.py.
    (shims / "ratings-api").write_text(
        f'#!/bin/sh\nexec "{sys.executable}" "{REPO}/generate.py" "$@"\n'
    )
    (shims / "ratings-api").chmod(0o755)
    path = f"{shims}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", commands],
        cwd=folder,
        env={**os.environ, **environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return done.stdout


def test_the_export_and_build_run_as_the_page_shows(
    database: dict[str, str], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    heading = request.node.callspec.params["database"]
    stdout = run_page(block("sh", heading), tmp_path, database)

    last = stdout.splitlines()[-1]  # after psql's "COPY 3"
    assert last.startswith("built site: 3 articles; files: 12 written, 0 removed, 0 unchanged ")
    assert (tmp_path / "ratings.csv").read_bytes() == EXPORTED
    for article, totals in DOCUMENTS.items():
        document = tmp_path / f"site/away/api/articles/{article}/rating/index.json"
        assert document.read_text() == (
            f'{{"article_url": "https://www.example.com/away/api/articles/{article}/", '
            f'"id": {article}, {totals}\n'
        )
