"""Property-based tests of the served API: Schemathesis, driven by the site's own OpenAPI document.

Schemathesis loads the document from ``--serve`` (catalogue: tests/api_checks.py) and sends its
examples, the id's boundaries and generated requests; each answer is held to the document and
each 200 to the catalogue, byte for byte. Deterministic: the same requests every time.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from tests.api_checks import CHECKED_LOG, LISTED, MAX_ID, RATINGS, SITE, UNLISTED
from tests.contract import hermetic_environ
from tests.served import serving

# A server (`--serve`) and Schemathesis's own command line: not the app in-process.
pytestmark = pytest.mark.real_world

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


def test_schemathesis_finds_nothing_and_ran_the_catalogue_check(tmp_path: Path) -> None:
    """One ``schemathesis run`` against ``--serve``, as the CLI runs it: it exits 0 (no issue)."""
    config, checked = tmp_path / "schemathesis.toml", tmp_path / "checked.log"
    config.write_text(CONFIG, encoding="utf-8")
    checked.write_text("")
    # No base URL anywhere: the build uses the served address, so the
    # document's server is the one the tests talk to.
    with serving(tmp_path, RATINGS) as served:
        environ = hermetic_environ() | {
            "HYPOTHESIS_STORAGE_DIRECTORY": str(tmp_path / "hypothesis"),  # not in the checkout
            "NO_COLOR": "1",
            "COLUMNS": "100",
            CHECKED_LOG: str(checked),
            SITE: str(served.site),
        }
        command = [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run"]
        command += ["--checks", "all", f"{served.address}/away/api/openapi.json"]
        done = subprocess.run(
            command,
            check=False,
            cwd=tmp_path,
            env=environ,
            capture_output=True,
            text=True,
            timeout=RUN_SECONDS,
        )
    output = done.stdout
    assert (done.returncode, done.stderr) == (0, ""), output + done.stderr
    assert "Dictionaries:     1 dictionary / 15 entries\n" in output, output
    for phase in ("Examples", "Coverage", "Fuzzing"):
        assert f"  ✅ {phase}\n" in output, output
    cases = re.search(r"\nTest cases:\n  (\d+) generated, \1 passed\n", output)
    assert cases, output
    assert int(cases[1]) >= MAX_EXAMPLES, output  # else the run tested little
    # Proof that Schemathesis loaded the hooks file and ran its check, on listed articles
    # only (an unlisted id answering 200 fails it), the document's examples among them: the
    # best rated, the largest id there can be, and one not rated yet. What the other ids
    # answer, every host is held to by tests/test_http_contract.py.
    checked_ids = {int(line) for line in checked.read_text().split()}
    assert {MAX_ID, 31} <= checked_ids <= set(LISTED)
