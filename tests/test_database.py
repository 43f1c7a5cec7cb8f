"""docs/database.md's export recipes, run as the page shows them, each with its build:
PostgreSQL against a real server (tests/postgres.py), SQLite on a real file.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.browser import install_test_tools
from tests.postgres import Postgres, start_postgres

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


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    install_test_tools()  # Debian's postgresql; a failure fails, never skips
    server = start_postgres()
    try:
        server.psql("-c", "create database shop")
        server.psql("-c", block("sql") + SAMPLE, database="shop")
        yield server
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


@pytest.mark.parametrize("database", ["PostgreSQL", "SQLite"])
def test_the_export_and_build_run_as_the_page_shows(
    database: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    environ: dict[str, str] = {}
    if database == "PostgreSQL":
        environ = request.getfixturevalue("postgres").environ()
    else:
        install_test_tools()  # Debian's sqlite3
        subprocess.run(
            ["sqlite3", str(tmp_path / "shop.db")],
            input=block("sql") + SAMPLE,
            text=True,
            check=True,
        )

    stdout = run_page(block("sh", database), tmp_path, environ)

    last = stdout.splitlines()[-1]  # after psql's "COPY 3"
    assert last.startswith("built site: 3 articles; files: 12 written, 0 removed, 0 unchanged ")
    assert (tmp_path / "ratings.csv").read_bytes() == EXPORTED
    for article, totals in DOCUMENTS.items():
        document = tmp_path / f"site/away/api/articles/{article}/rating/index.json"
        assert document.read_text() == (
            f'{{"article_url": "https://www.example.com/away/api/articles/{article}/", '
            f'"id": {article}, {totals}\n'
        )
