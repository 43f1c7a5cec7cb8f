"""Lint, format and types in the test command: each tool, pinned and configured in
pyproject.toml, over the whole checkout (coverage: pytest-cov, on every run).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Final

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
        check=False,  # the exit code and the output are what the tests read
        capture_output=True,
        text=True,
        timeout=600,
    )


def output(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\n{done.stdout}{done.stderr}"


def test_ruff_check_finds_nothing() -> None:
    done = run_tool("ruff", "check", "--no-cache", ".")
    # The message, not pytest's diff of it: a diff would cut the tool's output short.
    assert output(done) == "exit 0\nAll checks passed!\n", output(done)


def test_ruff_format_would_change_nothing() -> None:
    done = run_tool("ruff", "format", "--check", "--no-cache", ".")
    assert re.fullmatch(r"exit 0\n\d+ files already formatted\n", output(done)), output(done)


def test_mypy_strict_finds_nothing() -> None:
    # The files and the options (strict, and more) are in [tool.mypy].
    done = run_tool("mypy")
    assert re.fullmatch(r"exit 0\nSuccess: no issues found in \d+ source files\n", output(done)), (
        output(done)
    )


def test_the_pre_commit_hooks_are_valid() -> None:
    done = run_tool("pre_commit", "validate-config", ".pre-commit-config.yaml")
    assert output(done) == "exit 0\n", output(done)


# The project's settings are the ones in force: a file that breaks them is caught.


def test_ruff_applies_the_chosen_rules(tmp_path: Path) -> None:
    # An unused import, no __future__ import, and a comma missing after "a".
    (tmp_path / "bad.py").write_text('import os\n\nNAMES = [\n    "a"\n    "b",\n    "c",\n]\n')
    done = run_tool(
        "ruff",
        "check",
        "--no-cache",
        "--config",
        str(ROOT / "pyproject.toml"),
        "--output-format",
        "concise",
        str(tmp_path / "bad.py"),
    )
    assert output(done) == (
        f"exit 1\n"
        f"{tmp_path}/bad.py:1:1: I002 [*] Missing required import: "
        "`from __future__ import annotations`\n"
        f"{tmp_path}/bad.py:1:8: F401 [*] `os` imported but unused\n"
        f"{tmp_path}/bad.py:4:5: ISC004 Unparenthesized implicit string concatenation "
        "in collection\n"
        "Found 3 errors.\n"
        "[*] 2 fixable with `--fix` (1 unsafe fix available with `--fix --unsafe-fixes`).\n"
    ), output(done)


def test_mypy_is_strict(tmp_path: Path) -> None:
    (tmp_path / "loose.py").write_text("def double(x):\n    return x * 2\n")
    # A cache of its own: the shared one remembers a module "loose" at an older path.
    cache = str(tmp_path / "mypy-cache")
    done = run_tool(
        "mypy", "--config-file", "pyproject.toml", "--cache-dir", cache, str(tmp_path / "loose.py")
    )
    assert output(done) == (
        "exit 1\n"
        f"{tmp_path}/loose.py:1: error: Function is missing a type annotation  [no-untyped-def]\n"
        "Found 1 error in 1 file (checked 1 source file)\n"
    ), output(done)
