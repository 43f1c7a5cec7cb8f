"""Property-based tests of the served API: Schemathesis, driven by the site's own OpenAPI document.

Schemathesis loads the document from ``--serve`` (catalogue: tests/api_checks.py) and sends its
examples, the id's boundaries and generated requests; each answer is held to the document and
each 200 to the catalogue, byte for byte. Deterministic: the same requests every time.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
import schemathesis
from schemathesis.core.failures import FailureGroup

from tests.api_checks import CHECKED_LOG, LISTED, MAX_ID, RATINGS, UNLISTED, expected_document
from tests.served import Served, hermetic_environ, serving

# A server (`--serve`) and Schemathesis's own command line: not the app in-process.
pytestmark = pytest.mark.real_world

Operation = schemathesis.APIOperation[Any, Any, Any, Any]
MAX_EXAMPLES: Final = 100
RUN_SECONDS: Final = 300  # it takes about 2 s; a loaded CI machine may take many times that


# The run's configuration: deterministic, bounded, and our ids in the mix.
CONFIG: Final = f"""\
color = false
hooks = "{Path(__file__).resolve().parent / "api_checks.py"}"
cache.enabled = false
generation = {{ mode = "all", max-examples = {MAX_EXAMPLES}, deterministic = true, database = "none" }}
dictionaries.article-ids.values = [{", ".join(map(str, (*LISTED, *UNLISTED)))}]
parameters."path.id" = {{ dictionary = "article-ids", probability = 0.5 }}
"""


@dataclass(frozen=True)
class Run:
    """One Schemathesis run against the served site: its output, and the ids the catalogue
    check passed."""

    served: Served
    done: subprocess.CompletedProcess[str]
    checked: list[int]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """One ``schemathesis run`` against ``--serve``, as the CLI runs it."""
    work = tmp_path_factory.mktemp("schemathesis")
    config = work / "schemathesis.toml"
    config.write_text(CONFIG, encoding="utf-8")
    checked = work / "checked.log"
    checked.write_text("")
    environ = hermetic_environ() | {
        "HYPOTHESIS_STORAGE_DIRECTORY": str(work / "hypothesis"),  # not in the checkout
        "NO_COLOR": "1",
        "COLUMNS": "100",
        CHECKED_LOG: str(checked),
    }
    # No base URL anywhere: the build uses the served address, so the
    # document's server is the one the tests talk to.
    with serving(tmp_path_factory.mktemp("properties"), RATINGS) as served:
        done = subprocess.run(
            [
                *(sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run"),
                *("--checks", "all", f"{served.address}/away/api/openapi.json"),
            ],
            cwd=work,
            env=environ,
            check=False,  # the exit code is what the test reads
            capture_output=True,
            text=True,
            timeout=RUN_SECONDS,
        )
        yield Run(served, done, [int(line) for line in checked.read_text().split()])


def test_schemathesis_finds_nothing_and_ran_the_catalogue_check(run: Run) -> None:
    output = run.done.stdout
    assert run.done.returncode == 0, output + run.done.stderr
    assert run.done.stderr == ""
    assert "Dictionaries:     1 dictionary / 15 entries\n" in output, output
    assert re.search(r"\n=+ No issues found in [\d.]+s =+\n$", output), output
    for phase in ("Examples", "Coverage", "Fuzzing"):
        assert f"  ✅ {phase}\n" in output, output
    cases = re.search(r"\nTest cases:\n  (\d+) generated, (\d+) passed\n", output)
    assert cases, output
    assert cases[1] == cases[2]
    assert int(cases[1]) >= MAX_EXAMPLES, f"only {cases[1]} cases: the run tested little"
    # Proof that Schemathesis loaded the hooks file and ran its check, on listed articles
    # only (an unlisted id answering 200 fails it), the document's examples among them: the
    # best rated, the largest id there can be, and one not rated yet. What the other ids
    # answer, every host is held to by tests/test_http_contract.py.
    assert {MAX_ID, 31} <= set(run.checked) <= set(LISTED)


@pytest.fixture(scope="module")
def operation(run: Run) -> Operation:
    # An explicit configuration: no schemathesis.toml found by chance decides this test.
    schema = schemathesis.openapi.from_url(
        f"{run.served.address}/away/api/openapi.json", config=schemathesis.Config()
    )
    found: Operation = schema["/away/api/articles/{id}/rating/"]["GET"]
    return found


# A wrong document on disk, and what Schemathesis says about it: proof that
# the checks above can fail. Each is the right one with one text replaced.
SCHEMA: Final = "ST108 Response violates schema"
WRONG_DOCUMENTS: Final = {
    "a value with two decimals": ('"4.8"', '"4.83"', SCHEMA),
    "an article_url on another host": ("BASE", "https://elsewhere.example", SCHEMA),
    "the fields in another order": (
        '"rating_sum": 29, "rating_count": 6',
        '"rating_count": 6, "rating_sum": 29',
        "Custom check failed: `matches_the_catalogue`",
    ),
}


@pytest.mark.parametrize("name", list(WRONG_DOCUMENTS))
def test_a_wrong_document_fails(operation: Operation, run: Run, name: str) -> None:
    served = run.served  # after the run, which must see the site as built
    text, wrong, failure = WRONG_DOCUMENTS[name]
    right = expected_document("BASE", 7).decode()
    document = right.replace(text, wrong).replace("BASE", served.address)
    assert document != right.replace("BASE", served.address)
    path = served.site / "away/api/articles/7/rating/index.json"
    good = path.read_bytes()
    path.write_text(document, encoding="utf-8")
    try:
        with pytest.raises(FailureGroup) as caught:
            operation.Case(path_parameters={"id": 7}).call_and_validate()
    finally:
        path.write_bytes(good)
    assert failure in str(caught.value)
