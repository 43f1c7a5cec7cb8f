"""Property-based tests of the served API: Schemathesis, driven by the site's own OpenAPI document.

Schemathesis loads the document from ``--serve`` and sends its examples, the id's boundaries,
the catalogue's ids and their neighbours, and generated requests; each answer is held to the
document by Schemathesis's own checks. That each 200 is the article's document, byte for byte,
and that no unlisted id answers 200, every host is held to by tests/test_http_contract.py (the
largest id's document: the golden case ``bounds``). Deterministic: the same requests every time.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Final

import pytest

from ratings_api.contract import MAX_ID
from tests.contract import ARTICLES, hermetic_environ, run_ok
from tests.contract import RATINGS as CONTRACT_RATINGS
from tests.served import serving

# A server (`--serve`) and Schemathesis's own command line: not the app in-process.
pytestmark = pytest.mark.real_world

MAX_EXAMPLES: Final = 100
RUN_SECONDS: Final = 300  # it takes about 2 s; a loaded CI machine may take many times that
# The contract's catalogue and the largest id there can be; ids next to listed ones, and the
# largest ids that are not.
RATINGS: Final = f"{CONTRACT_RATINGS}  {MAX_ID}: {{sum: 10, count: 2}}\n"
IDS: Final = (*ARTICLES, MAX_ID, 2, 6, 8, 13, 30, 32, 999999, 1000001, MAX_ID - 1)


# The run's configuration: deterministic, bounded, and our ids in the mix.
CONFIG: Final = f"""\
color = false
cache.enabled = false
generation = {{ mode = "all", max-examples = {MAX_EXAMPLES}, deterministic = true, database = "none" }}
dictionaries.article-ids.values = [{", ".join(map(str, IDS))}]
parameters."path.id" = {{ dictionary = "article-ids", probability = 0.5 }}
"""


def test_schemathesis_finds_nothing(tmp_path: Path) -> None:
    """One ``schemathesis run`` against ``--serve``, as the CLI runs it."""
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG, encoding="utf-8")
    environ = hermetic_environ() | {
        "HYPOTHESIS_STORAGE_DIRECTORY": str(tmp_path / "hypothesis"),  # not in the checkout
        "NO_COLOR": "1",
        "COLUMNS": "100",
    }
    # No base URL anywhere: the build uses the served address, so the
    # document's server is the one the tests talk to.
    with serving(tmp_path, RATINGS) as served:
        command = [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run"]
        command += ["--checks", "all", f"{served.address}/away/api/openapi.json"]
        done = run_ok(command, cwd=tmp_path, env=environ, timeout=RUN_SECONDS)  # exit 0: no issue
    output = done.stdout
    assert done.stderr == "", output + done.stderr
    assert "Dictionaries:     1 dictionary / 15 entries\n" in output, output
    for phase in ("Examples", "Coverage", "Fuzzing"):
        assert f"  ✅ {phase}\n" in output, output
    cases = re.search(r"\nTest cases:\n  (\d+) generated, \1 passed\n", output)
    assert cases, output
    assert int(cases[1]) >= MAX_EXAMPLES, output  # else the run tested little
