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

from tests.contract import unmeasured_environ

ROOT: Final = Path(__file__).resolve().parent.parent


def run_tool(*command: str) -> subprocess.CompletedProcess[str]:
    """``python -m <command>`` at the checkout's root, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", *command],
        cwd=ROOT,
        env=unmeasured_environ(),  # the tools are not the code under measurement
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


# The project's settings are the ones in force: a file that breaks them is caught. Each tool:
# the file, its command (the file's path last), and its findings as (code, line).
CAUGHT: Final = {
    # An unused import, no __future__ import, and a comma missing after "a".
    "ruff": (
        'import os\n\nNAMES = [\n    "a"\n    "b",\n    "c",\n]\n',
        ["ruff", "check", "--no-cache", "--config", "pyproject.toml", "--output-format", "json"],
        [("F401", 1), ("I002", 1), ("ISC004", 4)],
    ),
    # No cache (mypy's documented way): the shared one remembers a module "bad" at an older path.
    "mypy": (
        "def double(x):\n    return x * 2\n",
        ["mypy", "--config-file", "pyproject.toml", "--cache-dir", os.devnull, "-O", "json"],
        [("no-untyped-def", 1)],
    ),
}


@pytest.mark.parametrize("tool", CAUGHT)
def test_the_tool_applies_the_chosen_rules(tool: str, tmp_path: Path) -> None:
    source, command, expected = CAUGHT[tool]
    (tmp_path / "bad.py").write_text(source)
    done = run_tool(*command, str(tmp_path / "bad.py"))
    text = done.stdout.strip()
    # ruff reports a JSON list; mypy, a JSON object a line.
    found = (
        [json.loads(line) for line in text.splitlines()] if text[:1] == "{" else json.loads(text)
    )
    codes = sorted((item["code"], item.get("line") or item["location"]["row"]) for item in found)
    assert (done.returncode, codes) == (1, expected), done.stdout + done.stderr
