"""Lint, format and types in the test command: each tool, pinned and configured in
pyproject.toml, over the whole checkout (coverage: pytest-cov, on every run).

The tests read each tool's exit status, and where a finding matters, its
machine-readable report (the rule's code); never the tool's own wording, which
is the tool's to change.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parent.parent


def run_tool(*command: str) -> subprocess.CompletedProcess[str]:
    """``python -m <command>`` at the checkout's root, its output captured."""
    # The tools are not the code under measurement: without this variable the
    # coverage started in every Python child (pyproject.toml) stays out of them.
    environ = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_PROCESS_")}
    return subprocess.run(
        [sys.executable, "-m", *command],
        cwd=ROOT,
        env=environ,
        check=False,  # the exit code is what the tests read
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize(
    "command",
    [
        ("ruff", "check", "--no-cache", "."),
        ("ruff", "format", "--check", "--no-cache", "."),
        ("mypy",),  # the files and the options (strict, and more) are in [tool.mypy]
        ("pre_commit", "validate-config", ".pre-commit-config.yaml"),
    ],
    ids=" ".join,
)
def test_the_checkout_passes(command: tuple[str, ...]) -> None:
    done = run_tool(*command)
    # The output on failure, not pytest's diff of it: what to fix.
    assert done.returncode == 0, done.stdout + done.stderr


# The project's settings are the ones in force: a file that breaks them is caught.


def test_ruff_applies_the_chosen_rules(tmp_path: Path) -> None:
    # An unused import, no __future__ import, and a comma missing after "a".
    (tmp_path / "bad.py").write_text('import os\n\nNAMES = [\n    "a"\n    "b",\n    "c",\n]\n')
    config, bad = str(ROOT / "pyproject.toml"), str(tmp_path / "bad.py")
    done = run_tool(
        "ruff", "check", "--no-cache", "--config", config, "--output-format", "json", bad
    )
    found = [(item["code"], item["location"]["row"]) for item in json.loads(done.stdout or "[]")]
    assert (done.returncode, sorted(found)) == (
        1,
        [("F401", 1), ("I002", 1), ("ISC004", 4)],
    ), done.stdout + done.stderr


def test_mypy_is_strict(tmp_path: Path) -> None:
    (tmp_path / "loose.py").write_text("def double(x):\n    return x * 2\n")
    # A cache of its own: the shared one remembers a module "loose" at an older path.
    cache, loose = str(tmp_path / "mypy-cache"), str(tmp_path / "loose.py")
    done = run_tool(
        "mypy", "--config-file", "pyproject.toml", "--cache-dir", cache, "-O", "json", loose
    )
    found = [json.loads(line) for line in done.stdout.splitlines()]
    assert (done.returncode, [(item["code"], item["line"]) for item in found]) == (
        1,
        [("no-untyped-def", 1)],
    ), done.stdout + done.stderr
