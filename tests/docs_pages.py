"""The pages rendered from the tests' own data, which tests/test_docs.py holds them to:
docs/troubleshooting.md and docs/troubleshooting-publishing.md (every error message and its
fix), tests/hosts-contract.md (how each host answers each point of the contract), all
rewritten by ``python -m tests.docs_pages``; and docs/http-api.md's table of how the hosts
differ (CLIENT_POINTS).
"""

from __future__ import annotations

import re
import string
from pathlib import Path
from typing import Any, Final

from tests.contract import cell, contract_table, data_lines, reasons_list

ROOT: Final = Path(__file__).resolve().parent.parent
CASES: Final = ROOT / "tests" / "cases" / "errors"
FIXES: Final = ROOT / "tests" / "error-fixes.txt"
TEMPLATES: Final = ROOT / "tests" / "page-templates"


def _sections() -> dict[str, list[list[str]]]:
    """error-fixes.txt's sections, by name: each line's fields."""
    sections: dict[str, list[list[str]]] = {}
    for line in data_lines(FIXES):
        if line.startswith("["):
            rows = sections.setdefault(line.strip("[]"), [])
        else:
            rows.append(line.split(" | "))
    return sections


SECTIONS: Final = _sections()
INPUT_FIXES: Final[dict[str, str]] = dict(SECTIONS["input"])
COMMAND_FIXES: Final[dict[str, str]] = dict(SECTIONS["command"])
PUBLISH_FIXES: Final[dict[str, str]] = dict(SECTIONS["publish"])
STORE_FIXES: Final[dict[str, str]] = dict(SECTIONS["store"])


def input_fix(case: str) -> str:
    """The fix of the case ``case``: its own, or its kind's (a key ending in -); else it fails."""
    kinds = [
        fix for kind, fix in INPUT_FIXES.items() if kind.endswith("-") and case.startswith(kind)
    ]
    return INPUT_FIXES.get(case) or kinds[0]


LOCATION: Final = re.compile(r"^ratings\.(?:yaml|csv):\d+(?::\d+)?: ")


# What varies within one kind of message: a number, a quoted value, one word in brackets.
_VARIES: Final = re.compile(r"[0-9]+|'[^']*'|\"[^\"]*\"|\([^)\s]*\)|\[[^\]\s]*\]")


def _rows(errors: list[tuple[str, str]]) -> str:
    """The table's rows: one a fix, its messages joined; those that differ only in what
    was found are shown once, with each value found, and those that differ only in a
    number or a quoted value (``rating 6``, ``rating 0``) once, the first."""
    groups: dict[str, dict[str, list[str]]] = {}
    kinds: dict[tuple[str, str], str] = {}  # the stem that shows each kind
    for message, fix in errors:
        stem, _, value = message.partition(", found ")
        if kinds.setdefault((fix, _VARIES.sub("_", stem)), stem) != stem:
            continue
        values = groups.setdefault(fix, {}).setdefault(stem, [])
        if value not in values:
            values.append(value)
    rows = []
    for fix, messages in groups.items():
        shown = []
        for stem, values in messages.items():
            text = f"`{cell(stem)}, found {cell(values[0])}`" if values[0] else f"`{cell(stem)}`"
            if len(values) > 1:
                text += ", or found " + ", ".join(f"`{cell(value)}`" for value in values[1:])
            shown.append(text)
        rows.append(f"| {'; '.join(shown)} | {cell(fix)} |\n")
    return "".join(rows)


def input_errors(csv: bool = False) -> list[tuple[str, str]]:
    """Each case of tests/cases/errors (``csv``: of a CSV input): its exact message, after
    its location, and its fix."""
    cases = sorted(CASES.iterdir())
    own = {case for case in INPUT_FIXES if not case.endswith("-")}
    assert own <= {case.name for case in cases}, "a fix without a case"
    errors = []
    for case in cases:
        if case.name.startswith("csv-") == csv:
            message = (case / "error").read_text(encoding="utf-8").removesuffix("\n")
            errors.append((LOCATION.sub("", message), input_fix(case.name)))
    return errors


def command_errors() -> list[tuple[str, str]]:
    """Each command-line mistake of test_a_user_mistake_is_one_line_and_exit_2, with its fix."""
    from tests.test_user_errors import MISTAKES

    assert set(MISTAKES) == set(COMMAND_FIXES), "a case without a fix"
    return [
        (message.replace("{port}", "8000"), COMMAND_FIXES[name])
        for name, (*_, message) in MISTAKES.items()
    ]


def other_errors(section: str) -> list[tuple[str, str]]:
    """The errors of error-fixes.txt's ``section``, a line ``fragment | message | fix | test
    file``: each message with its fix, its fragment (which may end in a space) in the test file
    that asserts its text."""
    rows = []
    for fragment, message, fix, test_file in SECTIONS[section]:
        source = (ROOT / "tests" / test_file).read_text(encoding="utf-8")
        assert fragment in message, fragment
        assert fragment in source, (test_file, fragment)
        rows.append((message, fix))
    return rows


def _cases(test: str) -> list[tuple[Any, ...]]:
    """The parameters of a parametrized test of tests/test_publish.py, as tuples."""
    from tests import test_publish

    marks = getattr(test_publish, test).pytestmark
    (mark,) = [mark for mark in marks if mark.name == "parametrize"]
    return [tuple(getattr(value, "values", value)) for value in mark.args[1]]


def publish_errors() -> list[tuple[str, str]]:
    """The errors of publishing its tests hold as data, each line with its fix; and a store's
    answers of test_user_errors.py, one of a kind, with an example endpoint."""
    from tests import test_publish
    from tests.test_user_errors import STORE_ANSWERS

    options = _cases("test_publishing_options_without_publish_are_refused")
    cases = [(given[0], line) for given, line in options]
    cases += _cases("test_a_bad_target_is_refused_before_building")
    cases += _cases("test_each_store_failure_is_one_line_without_secrets")
    cases += [("NEWER", test_publish.NEWER), ("UNREADABLE", test_publish.UNREADABLE)]
    assert {key for key, _ in cases} == set(PUBLISH_FIXES), "a case without a fix"
    answers = [(STORE_ANSWERS[name][2], fix) for name, fix in STORE_FIXES.items()]
    return [(line, PUBLISH_FIXES[key]) for key, line in cases] + [
        (line.replace("ratings/v1", "b/p").format(host="store.example", port=9000), fix)
        for line, fix in answers
    ]


# The lines of the contract that change what a client of the API sees.
CLIENT_POINTS: Final = [
    "no slash (`7/rating`): GET, HEAD, with a query",
    "`Content-Type` of a 404",
    "`Cache-Control` of a 404",
    "`ETag`",
    "a rebuild (in the same second, same size)",
    "OPTIONS, with or without CORS, on a rating",
    "POST, PUT, PATCH, DELETE, PROPFIND, TRACE on a rating",
    "`Range: bytes=0-9`",
    "the document's own path (`7/rating/index.json`)",
]


def rendered() -> dict[Path, str]:
    """Each page as it must read, by its path: its template in page-templates/, filled in."""
    from tests.hosts import DIFFERENCES

    parts = {
        "docs/troubleshooting.md": {
            "yaml": _rows(input_errors()),
            "csv": _rows(input_errors(csv=True)),
            "command": _rows(command_errors()),
            "other": _rows(other_errors("building and serving")),
        },
        "docs/troubleshooting-publishing.md": {
            "rows": _rows(other_errors("publishing") + publish_errors()),
        },
        "tests/hosts-contract.md": {
            "table": contract_table(DIFFERENCES),
            "reasons": reasons_list(DIFFERENCES),
        },
    }
    pages = {}
    for name, filled in parts.items():
        template = string.Template((TEMPLATES / Path(name).name).read_text(encoding="utf-8"))
        pages[ROOT / name] = template.substitute(filled).rstrip("\n") + "\n"
    return pages


if __name__ == "__main__":
    for path, text in rendered().items():
        path.write_text(text, encoding="utf-8")
