"""Golden cases: a folder each, with its input and the exact files (``expected/``) or the exact
line on stderr (``error``) it gives.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from ratings_api.cli import main
from ratings_api.rating import ARTICLES_PATH
from tests.trees import built, read_tree, snapshot, tree_diff

CASES = Path(__file__).parent / "cases"
VALID = sorted((CASES / "valid").iterdir())
ERRORS = sorted((CASES / "errors").iterdir())


def test_cases_are_found() -> None:
    assert len(VALID) >= 11, VALID
    assert len(ERRORS) >= 60, ERRORS


def case_args(case: Path) -> list[str]:
    args = case / "args"
    return args.read_text(encoding="utf-8").splitlines() if args.exists() else []


@pytest.mark.parametrize("case", VALID, ids=lambda case: case.name)
def test_valid_case_builds_the_expected_files(
    case: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(case)
    output = tmp_path / "site"

    assert main(["--output", str(output), "--quiet", *case_args(case)]) == 0

    expected, tree = read_tree(case / "expected"), read_tree(output)
    # Every document, and the other files the case is about.
    actual = {
        path: tree[path] for path in tree if path in expected or path.startswith(ARTICLES_PATH)
    }
    assert actual == expected, tree_diff(actual, expected)


@pytest.mark.parametrize("case", ERRORS, ids=lambda case: case.name)
def test_error_case_says_where_and_changes_nothing(
    case: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    output = built(tmp_path, "base_url: https://example.com\narticles:\n  7: [5, 4]\n  8: []\n")
    (output / "CNAME").write_text("ratings.example.com\n")
    before = snapshot(output)
    monkeypatch.chdir(case)
    if (case / "stdin").exists():  # the input of `--input -`
        monkeypatch.setattr(
            sys, "stdin", io.TextIOWrapper(io.BytesIO((case / "stdin").read_bytes()))
        )

    assert main(["--output", str(output), *case_args(case)]) == 2

    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", (case / "error").read_text())
    assert snapshot(output) == before
