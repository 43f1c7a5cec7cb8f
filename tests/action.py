"""The repository's GitHub Action (action.yml), run as GitHub's runner runs a composite
action: each shell step with its `${{ ... }}` expressions given the values a run would give,
and this Python in the part of `actions/setup-python`.

Its Install step is also the tool as users install it: a wheel built from a copy of the
checkout, in a fresh venv in a folder of its own, with the [publish] extra. It runs once a
session (the fixture ``installed_tool``, in tests/conftest.py), for tests/test_packaging.py
and tests/test_ci_recipe.py alike: that install is the slow part.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from filelock import FileLock

REPO: Final = Path(__file__).resolve().parent.parent
ACTION: Final = REPO / "action.yml"
# GitHub runs a step's `shell: bash` as this (and a workflow's `run:` with no shell named).
RUNNER_SHELL: Final = ("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c")
EXPRESSION: Final = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
# The exact versions the action installs the tool with (its Install step's constraints).
REQUIREMENTS: Final = ("requirements.txt", "requirements-publish.txt")
INSTALL_SECONDS: Final = 600  # for any command run() starts: the install, on a loaded machine


def load(path: Path) -> dict[str, Any]:
    """A workflow or action file: BaseLoader, so every scalar is a string and `on` a key."""
    loaded: dict[str, Any] = yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    return loaded


def expand(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each `${{ expression }}` replaced by its value: one not given fails."""
    return EXPRESSION.sub(lambda found: values[found.group(1)], text)


def clean_environ() -> dict[str, str]:
    """This environment without what would let the checkout's code be imported instead."""
    hidden = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "BASE_URL", "CONTEXT", "URL")
    return {name: value for name, value in os.environ.items() if name not in hidden}


def run(
    command: Sequence[str | Path], cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``command`` in ``cwd``, its output captured; in ``env``, or clean_environ()."""
    env = clean_environ() if env is None else env
    return subprocess.run(
        command,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=INSTALL_SECONDS,
        check=False,
    )


def run_step(
    name: str, values: Mapping[str, str], environ: Mapping[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    """The action's step ``name``: its env expanded with ``values``, its script as the runner runs it."""
    (step,) = [s for s in load(ACTION)["runs"]["steps"] if s.get("name") == name]
    assert step["shell"] == "bash", step
    assert "${{" not in step["run"], step  # expressions go through env: no script injection
    env = {**environ, **{key: expand(value, values) for key, value in step["env"].items()}}
    return run([*RUNNER_SHELL, step["run"]], cwd, env)


@pytest.fixture(scope="session")
def installed_tool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The action's Install step, run once, however many workers (-n) ask for it: the
    first installs, the others wait for it (pytest-xdist's own recipe). The action's
    checkout is a copy of this one's package (pip builds in the folder it installs from).
    Its RUNNER_TEMP, which holds the venv, ``ratings-api``."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the run's, above each worker's own
    folder, runner_temp = shared / "action", shared / "action" / "runner-temp"
    with FileLock(shared / "action.lock"):
        # Not installed yet, or a worker's install failed: install.
        if not (runner_temp / "ratings-api/bin/ratings-api").exists():
            checkout = folder / "action-checkout"
            shutil.copytree(
                REPO / "ratings_api",
                checkout / "ratings_api",
                ignore=shutil.ignore_patterns("__pycache__"),
                dirs_exist_ok=True,
            )
            for name in ("pyproject.toml", "README.md", "action.yml", *REQUIREMENTS):
                shutil.copyfile(REPO / name, checkout / name)
            values = {
                "steps.python.outputs.python-path": sys.executable,
                "github.action_path": str(checkout),
            }
            environ = {**clean_environ(), "RUNNER_TEMP": str(runner_temp)}
            done = run_step("Install ratings-api", values, environ, folder)
            assert done.returncode == 0, done.stdout + done.stderr
    return runner_temp
