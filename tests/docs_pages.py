"""The pages rendered from the tests' own data, which tests/test_docs.py holds them to:
docs/troubleshooting.md and docs/troubleshooting-publishing.md (every error message and its
fix), tests/hosts-contract.md (how each host answers each point of the contract), all
rewritten by ``python -m tests.docs_pages``; and docs/http-api.md's table of how the hosts
differ (CLIENT_POINTS).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Final

from tests.contract import cell, contract_table, reasons_list

ROOT: Final = Path(__file__).resolve().parent.parent
CASES: Final = ROOT / "tests" / "cases" / "errors"
TROUBLESHOOTING: Final = ROOT / "docs" / "troubleshooting.md"
TROUBLESHOOTING_PUBLISHING: Final = ROOT / "docs" / "troubleshooting-publishing.md"
HOSTS_CONTRACT: Final = ROOT / "tests" / "hosts-contract.md"

# The fix for each input error, by case name (tests/cases/errors/<name>). A new case
# with no fix of its own or of its kind fails tests/test_docs.py.
_ID = "Write the id as a positive integer in plain decimal, unquoted: `7: [5, 4]`."
_RATING = "Write each rating as an integer in plain decimal, unquoted: `[5, 4, 3]`."
_SCALE = "Write `scale: [1, 5]`: two integers, the lowest rating first."
_OUTSIDE = "Correct the rating, or widen `scale` if the scale really changed."
_PLAIN = "Write the value out in full: anchors, aliases and tags are refused."
_TOTALS = "Write totals as `{sum: 29, count: 6}`: two integers, nothing else."
_VALUE = "Give the article a list of ratings (`[5, 4]`, or `[]`) or totals."
_URL = "Give a full address: `https://ratings.example.com` (a path is fine)."
_TOP = "Start the file with `articles:`, one article a line under it."
_SYNTAX = "Correct the YAML at that line and column (indent with spaces, close brackets)."
_FORMS = "`article_id,rating` (a row a rating) or `article_id,rating_sum,rating_count`"
_CSV_NUMBER = "Write the number in plain decimal, with no spaces: `7,5`."
# The fix of a case by the start of its name, unless the case has one of its own.
FIX_BY_KIND: Final = {
    "csv-header-": f"Name the columns {_FORMS} (a row an article).",
    "csv-id-": _CSV_NUMBER,
    "csv-rating-": _CSV_NUMBER,
    "csv-row-": "Give each row a value a column, as in the header; an unrated article: `31,`.",
    "csv-totals-": "Write the totals as two integers: `7,29,6`.",
    "id-": _ID,
    "rating-": _RATING,
    "scale-": _SCALE,
    "syntax-": _SYNTAX,
    "tag-": _PLAIN,
    "top-": _TOP,
    "totals-": _TOTALS,
    "url-": _URL,
    "value-": _VALUE,
}
_SUM = "Correct the sum: it must lie within the scale times the count."
# Browsers and most JSON readers read an integer as a double: past 2^53 - 1, inexactly.
_NULL_SUM = "SQL's `sum` of no ratings is `NULL`: select `coalesce(sum(rating), 0)`."
_EXACT = "Correct it; ratings adding up past it: give totals."
INPUT_FIXES: Final[dict[str, str]] = {
    "alias": _PLAIN,
    "anchor": _PLAIN,
    "articles-list": "Write the articles as a mapping: `7: [5, 4]`, not `- 7`.",
    "articles-null": "List at least one article under `articles:`, or `articles: {}`.",
    "bad-utf8": "Save the file as UTF-8.",
    "billion-laughs": _PLAIN,
    "csv-bad-utf8": "Save the file as UTF-8.",
    "csv-empty": "Check the export: its first line is the header, then a row an article or rating.",
    "csv-header-semicolon": "Export with commas between the values, not semicolons.",
    "csv-id-twice": "Give each article one row, or use the form of a row a rating.",
    "csv-quote": "Close the quotes, or leave the numbers unquoted: `7,5`.",
    "csv-rating-above": "Correct the rating, or `--scale` if the scale really changed.",
    "csv-rating-decimal-comma": "A spreadsheet's decimal comma: give integers.",
    "csv-ratings-add-past": _EXACT,
    "csv-stdin-no-format": "Add `--format csv`.",
    "csv-totals-mysql-null": _NULL_SUM,
    "csv-totals-past": _EXACT,
    "csv-totals-above": "Correct the sum: it must lie within the scale times the count.",
    "csv-totals-negative": "Correct the count: it is a number of ratings, 0 or more.",
    "csv-totals-null": _NULL_SUM,
    "csv-totals-zero": "With `rating_count` 0, write `rating_sum` 0.",
    "control-char": "Remove the control character (often pasted from a terminal).",
    "deep-nesting": _RATING,
    "deep-top": _TOP,
    "id-too-large": _EXACT,
    "id-twice": "Merge the two entries into one.",
    "rating-above": _OUTSIDE,
    "rating-below": _OUTSIDE,
    "rating-huge": _EXACT,
    "ratings-add-past": _EXACT,
    "scale-late": _OUTSIDE,
    "syntax-colon": "Add the `:` after the id: `8: [3]`, on that line or the one above it.",
    "top-twice": "Keep one of the two keys.",
    "top-two-docs": "Keep one YAML document: remove the `---` and what follows, or merge.",
    "top-typo": "Correct the key: `articles`, `scale` or `base_url`.",
    "totals-above": _SUM,
    "totals-below": _SUM,
    "totals-negative": "Correct the count: it is a number of ratings, 0 or more.",
    "totals-zero": "With `count: 0`, write `sum: 0` (or list the article as `[]`).",
    "url-missing": "Set `base_url:` in the file, `BASE_URL`, or `--base-url URL`.",
    "url-query": "Leave the query and fragment out of the base URL.",
    "url-space": "Encode the space (`%20`) or remove it.",
}


def input_fix(case: str) -> str:
    """The fix of the case ``case``: its own, or its kind's; a case with neither fails."""
    kinds = [fix for kind, fix in FIX_BY_KIND.items() if case.startswith(kind)]
    return INPUT_FIXES.get(case) or kinds[0]


# The fix for each command-line mistake of tests/test_user_errors.py, by its param id.
_BAD_URL = "Correct the base URL: `https://host[:port][/path]`, a port from 1 to 65535."
_INPUT = "Give `--input` the ratings file itself, YAML or CSV, readable by you."
COMMAND_FIXES: Final[dict[str, str]] = {
    "ipv6-unclosed": _BAD_URL,
    "port-out-of-range": _BAD_URL,
    "port-not-a-number": _BAD_URL,
    "port-0": _BAD_URL,
    "ipv6-variable": _BAD_URL,
    "ipv6-in-the-file": _BAD_URL,
    "input-a-folder": _INPUT,
    "input-missing": _INPUT,
    "input-a-symlink-loop": _INPUT,
    "input-a-socket": _INPUT,
    "input-unreadable": _INPUT,
    "input-name-too-long": _INPUT,
    "scale-with-yaml": "Set `scale: [1, 5]` in the YAML file; `--scale` is for a CSV input.",
    "csv-no-base-url": "Give `--base-url URL`, or set `BASE_URL`: a CSV input holds no settings.",
    "output-a-file": "Give `--output` a folder (it is made if missing), not a file.",
    "serve-port-out-of-range": "Give `--port` a number from 0 (any free port) to 65535.",
    "serve-host-idna": "Give `--host` an address or a valid host name.",
    "serve-bad-host": "Give `--host` an address of this machine: `127.0.0.1`, `0.0.0.0`.",
}

_DENIED = (
    "Check the key pair, and that it may read and write under the prefix; on AWS, list the "
    "bucket too ([the policy](deploy-object-storage.md#setting-up))."
)


def _errors(table: str) -> list[tuple[str, str, str, str]]:
    """Errors as lines ``fragment | message | fix | test file``: the message, its fix, and the
    test file that asserts its text (the fragment, which may end in a space, must appear there)."""
    rows = [line.split(" | ") for line in table.removeprefix("\n").removesuffix("\n").split("\n")]
    assert all(len(row) == 4 for row in rows), rows
    return [(message, fix, test_file, fragment) for fragment, message, fix, test_file in rows]


# Errors met while building or serving, the paths examples.
OTHER_ERRORS: Final = _errors("""
a mount point: the build keeps its lock and temporary file beside the | /srv/data: a mount point: the build keeps its lock and temporary file beside the output folder, in /srv/.data.generate, on the same file system; build into a folder inside the mount instead | Build into a folder inside the mount: `--output /srv/data/site`. | test_writers.py
is a symbolic link: the build follows none where it writes; remove it | site/away/api/articles/2: is a symbolic link: the build follows none where it writes; remove it | Remove the link: the build writes only real folders and files in `site/`. | test_writers.py
: Address already in use | cannot serve at 127.0.0.1:8000: Address already in use | Stop what serves at that port, or give another: `--port 8001` (`0`: any free one). | test_http_contract.py
no such folder: build the site first (python generate.py) | site: no such folder: build the site first (python generate.py) | Build first, or give the server the folder the build wrote. | test_http_contract.py
""")

# Errors met while publishing, alike, besides those publish_errors() reads from the tests.
PUBLISH_ERRORS: Final = _errors("""
(in a checkout: -r requirements-publish.txt) | --publish needs boto3 and obstore: pip install 'ratings-api[publish]' (in a checkout: -r requirements-publish.txt) | Installed: `pip install 'ratings-api[publish]'`; in a checkout: `pip install -r requirements-publish.txt`. | test_publish.py
; nothing was changed. If that is meant, run again with  | s3://ratings: this publish would remove 300 files, more than --max-removals 256; nothing was changed. If that is meant, run again with --max-removals 300 | Check the input lost no articles; if the removals are meant, run again as told. | test_publish.py
after another publish; uploads were made. If that is meant, run again  | s3://ratings: this publish would remove 300 files, more than --max-removals 256, after another publish; uploads were made. If that is meant, run again with --max-removals 300 | Check the input lost no articles; if the removals are meant, run again as told. | test_state_chain.py
: no credentials: set AWS_ACCESS_KEY_ID and  | s3://ratings/v1: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE | Set the two variables (in CI: the repository's secrets), or a profile. | test_publish.py
: the credentials are incomplete: AWS_SECRET_ACCESS_KEY is missing | s3://ratings/v1: the credentials are incomplete: AWS_SECRET_ACCESS_KEY is missing | Set the two variables (in CI: the repository's secrets), or a profile. | test_publish.py
: AWS_PROFILE: no profile 'nope' in the AWS config or  | s3://ratings/v1: AWS_PROFILE: no profile 'nope' in the AWS config or credentials files | Correct the profile's name, or unset `AWS_PROFILE`. | test_publish.py
: the profile's settings give no credentials (InvalidConfigError): correct  | s3://ratings/v1: the profile's settings give no credentials (InvalidConfigError): correct the profile | Correct the profile's `role_arn`, `source_profile`, `credential_source` or `sso_` lines. | test_publish.py
: not a valid AWS config or credentials file | s3://ratings/v1: /Users/me/.aws/config: not a valid AWS config or credentials file | Correct the file: `[section]` lines, then `key = value` lines. | test_publish.py
config) is not a URL such as https://HOST[:PORT] | s3://ratings/v1: the endpoint (AWS_ENDPOINT_URL, or endpoint_url in the AWS config) is not a URL such as https://HOST[:PORT] | Give a URL; keys go in `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`, never in it. | test_publish.py
the region (AWS_REGION, or region in the AWS config) must be a name such  | s3://ratings/v1: the region (AWS_REGION, or region in the AWS config) must be a name such as us-east-1, found 'us east' | Correct the region, or unset it: the bucket is asked. | test_publish.py
: the profile's sign-in has expired or was never made:  | s3://ratings/v1: the profile's sign-in has expired or was never made: run aws sso login, then publish again | Run `aws sso login --profile NAME`, then publish again. | test_publish.py
: the profile's credential_process failed: run it by hand to see why | s3://ratings/v1: the profile's credential_process failed: run it by hand to see why | Run the profile's `credential_process` command yourself. | test_publish.py
check-only: expected true or false, found 'yes' | check-only: expected true or false, found 'yes' | Give the GitHub Action's `check-only` input `true` or `false`. | test_ci_recipe.py
: the state keeps changing: is another publish running? | s3://ratings/v1: the state keeps changing: is another publish running? | Run one publish per target at a time (a CI concurrency group), then again. | test_state_chain.py
(--lock-timeout); nothing was changed | s3://ratings/v1: another publish holds the lock (ci@runner-7 (process 4242), since 24 Nov 2026 09:00:00 UTC); waited 600 s (--lock-timeout); nothing was changed | Another publish of the target is running: wait, or raise `--lock-timeout` (a dead one's lock expires after 60 s). | test_publish_lock.py
so two publishes at once could lose files; nothing was changed. If only one  | s3://ratings/v1: https://store.example:9000 ignores conditional writes (If-None-Match), so two publishes at once could lose files; nothing was changed. If only one publish ever runs at a time, run again with --single-publisher | Publish to a store that honours conditional writes ([which do](deploy-object-storage.md#what-each-store-guarantees)); or, if one publish ever runs at a time (a CI concurrency group), add `--single-publisher`. | test_publish_lock.py
another publish took over this one's lock; stopped | s3://ratings/v1: another publish took over this one's lock; stopped: publish again to finish | The publish was paused longer than the lock's lease (a suspended runner): publish again. | test_lease.py
publish may hold it now; stopped: publish again to finish | s3://ratings/v1: this publish's lock was not renewed within 30 s, so another publish may hold it now; stopped: publish again to finish | It was paused, or its renewals were too slow: it wrote nothing more. Publish again. | test_lease.py
--lock-timeout must be at least the lock's lease, 60 s | --lock-timeout must be at least the lock's lease, 60 s | Give 60 or more (a dead publish's lock expires after 60 s), or leave it out. | test_lease.py
""")

# The fix for each error of publishing that a test holds as data, by its case: the
# options of test_publishing_options_without_publish_are_refused, the targets of
# test_a_bad_target_is_refused_before_building, the failures of
# test_each_store_failure_is_one_line_without_secrets, and the two states
# test_publish.py cannot read.
_ALONE = "Add `--publish s3://BUCKET[/PREFIX]`, or leave the option out."
_UNREACHABLE = (
    "Check `AWS_ENDPOINT_URL` (`http://` for a store without TLS) and that the store is up."
)
_FAILED = "See the store's status or logs; publish again."
_FULL = "Free space or raise the quota; publish again."
# The fix for the answers of test_a_store_that_answered_says_what_it_answered, one of a
# kind (the others are the same lines with another status, code or host).
STORE_FIXES: Final[dict[str, str]] = {
    "server-error": _FAILED,
    "full": _FULL,
}
_TARGET = "Write the target as `s3://BUCKET` or `s3://BUCKET/PREFIX`."
PUBLISH_FIXES: Final[dict[str, str]] = {
    "--repair": _ALONE,
    "--max-removals": _ALONE,
    "--publish-workers": _ALONE,
    "--check": _ALONE,
    "--lock-timeout": _ALONE,
    "--single-publisher": _ALONE,
    "https://bucket/p": _TARGET,
    "s3:///p": _TARGET,
    "s3://b/a/../c": _TARGET,
    "s3://[bucket1/x": _TARGET,
    "s3://bucket1:80/x": _TARGET,
    "s3://key:secret-9c1e@bucket1/x": _TARGET,
    "PermissionDeniedError": _DENIED,
    "UnauthenticatedError": _DENIED,
    "FileNotFoundError": "Create the bucket, or correct its name.",
    "GenericError": _UNREACHABLE,
    "NotSupportedError": "The store refused a request: run again; if it persists, report it.",
    "NEWER": "Upgrade ratings-api, or run once with `--repair` (this version's state).",
    "UNREADABLE": "Run the publish once with `--repair`.",
}


LOCATION: Final = re.compile(r"^ratings\.(?:yaml|csv):\d+(?::\d+)?: ")


# What varies within one kind of message: a number, a quoted value, one word in brackets.
_VARIES: Final = re.compile(r"[0-9]+|'[^']*'|\"[^\"]*\"|\([^)\s]*\)|\[[^\]\s]*\]")


def _rows(errors: list[tuple[str, str]]) -> str:
    """The table's rows: one a fix, its messages joined; those that differ only in what
    was found are shown once, with each value found, and those that differ only in a
    number or a quoted value (``rating 6``, ``rating 0``) once, the first."""
    groups: dict[str, dict[str, list[str]]] = {}
    kinds: set[tuple[str, str]] = set()
    for message, fix in errors:
        stem, found, value = message.rpartition(", found ")
        stem = stem if found else message
        kind = (fix, _VARIES.sub("_", stem))
        if stem not in groups.get(fix, {}) and kind in kinds:
            continue
        kinds.add(kind)
        values = groups.setdefault(fix, {}).setdefault(stem, [])
        if (value if found else "") not in values:
            values.append(value if found else "")
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
    assert set(INPUT_FIXES) <= {case.name for case in cases}, "a fix without a case"
    return [
        (
            LOCATION.sub("", (case / "error").read_text(encoding="utf-8").removesuffix("\n")),
            input_fix(case.name),
        )
        for case in cases
        if case.name.startswith("csv-") == csv
    ]


def command_errors() -> list[tuple[str, str]]:
    """Each command-line mistake of test_a_user_mistake_is_one_line_and_exit_2, with its fix."""
    from tests.test_user_errors import MISTAKES

    assert set(MISTAKES) == set(COMMAND_FIXES), "a case without a fix"
    return [(message, COMMAND_FIXES[name]) for name, (*_, message) in MISTAKES.items()]


def other_errors(errors: list[tuple[str, str, str, str]] = OTHER_ERRORS) -> list[tuple[str, str]]:
    """The errors of building and serving (or ``errors``), each checked against its test's text."""
    rows = []
    for message, fix, test_file, fragment in errors:
        source = (ROOT / "tests" / test_file).read_text(encoding="utf-8")
        assert fragment in message, fragment
        assert fragment in source, (test_file, fragment)
        rows.append((message, fix))
    return rows


def _cases(test_file: str, test: str) -> list[tuple[str, ...]]:
    """The parameters of a parametrized test of tests/<test_file>, as tuples."""
    function = getattr(importlib.import_module(f"tests.{test_file}"), test)
    mark = next(mark for mark in function.pytestmark if mark.name == "parametrize")
    return [tuple(getattr(value, "values", value)) for value in mark.args[1]]


def publish_errors() -> list[tuple[str, str]]:
    """The errors of publishing its tests hold as data, each line with its fix."""
    from tests import test_publish

    cases = [
        (options[0], line)
        for options, line in _cases(
            "test_publish", "test_publishing_options_without_publish_are_refused"
        )
    ]
    cases += _cases("test_publish", "test_a_bad_target_is_refused_before_building")
    cases += _cases("test_publish", "test_each_store_failure_is_one_line_without_secrets")
    cases += [("NEWER", test_publish.NEWER), ("UNREADABLE", test_publish.UNREADABLE)]
    assert {key for key, _ in cases} == set(PUBLISH_FIXES), "a case without a fix"
    return [(line, PUBLISH_FIXES[key]) for key, line in cases] + store_answers()


def store_answers() -> list[tuple[str, str]]:
    """A store's answers of test_user_errors.py, with an example endpoint, and their fixes."""
    from tests.test_user_errors import STORE_ANSWERS

    cases = {name: STORE_ANSWERS[name][2] for name in STORE_FIXES}
    return [
        (
            line.replace("ratings/v1", "b/p").format(host="store.example", port=9000),
            STORE_FIXES[name],
        )
        for name, line in cases.items()
    ]


_TABLE: Final = "| message | fix |\n|---|---|\n"


def troubleshooting_page() -> str:
    """docs/troubleshooting.md as it must read: the input, the command line, building."""
    return (
        "# Troubleshooting: every error message and its fix\n\n"
        "Every mistake is one line on stderr, exit status 2, and nothing written. A bug is\n"
        "exit status 3 with a traceback: please report it. Generated from the test suite's\n"
        "cases, each message below is the exact text printed.\n\n"
        "## In `ratings.yaml`\n\n"
        "Each message starts with where the mistake is, `ratings.yaml:LINE:COLUMN: ` (left\n"
        "out below), pointing at the key or value. The rules: [The input](input.md).\n\n"
        + _TABLE
        + _rows(input_errors())
        + "\n## In a CSV input\n\n"
        "Each message starts with `ratings.csv:LINE:COLUMN: ` (left out below), or\n"
        "`ratings.csv:LINE: ` for a CSV syntax error; from `--input -`, with `<stdin>`. The\n"
        "rules: [CSV](input.md#csv-from-a-database-or-a-spreadsheet).\n\n"
        + _TABLE
        + _rows(input_errors(csv=True))
        + "\n## On the command line\n\n"
        "Each names the option, variable or file it came from. The options: "
        "[The command line](cli.md).\n\n"
        + _TABLE
        + _rows(command_errors())
        + "\n## Building and serving\n\n"
        "The paths are examples. An unknown option, or `--check` with `--serve`, gets "
        "argparse's\nusage line and `generate.py: error: ` before its message, also with exit "
        "status 2.\n\n" + _TABLE + _rows(other_errors()) + "\n## Publishing\n\n"
        "On [a page of its own](troubleshooting-publishing.md).\n"
    )


def troubleshooting_publishing_page() -> str:
    """docs/troubleshooting-publishing.md as it must read."""
    return (
        "# Troubleshooting publishing: every error message and its fix\n\n"
        "One line on stderr, exit status 2, no secret; generated from the tests' cases as\n"
        "[the rest](troubleshooting.md). The bucket, prefix and counts are examples; a\n"
        "publishing option without `--publish` gets argparse's usage line first.\n\n"
        + _TABLE
        + _rows(other_errors(PUBLISH_ERRORS) + publish_errors())
    )


def hosts_contract_page() -> str:
    """tests/hosts-contract.md as it must read: the contract suite's table and reasons."""
    from tests.hosts import DIFFERENCES

    return (
        "# The contract on each host\n\n"
        "Generated by `python -m tests.docs_pages` from the contract suite's data,\n"
        "`tests/contract-table.txt`: the points and the app's answers, and each host's\n"
        "differences (a line `point | what it answers | why`). Each line is a point of\n"
        "the contract, which the suite observes on each host; a host's cell is what the suite\n"
        "requires of it, so a host that changed its answer fails the suite. ✓ is the app's\n"
        "answer. How the suite runs: [the tests' README](README.md).\n\n"
        + contract_table(DIFFERENCES)
        + "\nWhy each host differs where it does:\n\n"
        + reasons_list(DIFFERENCES)
    )


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


RENDERED: Final = {
    TROUBLESHOOTING: troubleshooting_page,
    TROUBLESHOOTING_PUBLISHING: troubleshooting_publishing_page,
    HOSTS_CONTRACT: hosts_contract_page,
}

if __name__ == "__main__":
    for path, page in RENDERED.items():
        path.write_text(page(), encoding="utf-8")
