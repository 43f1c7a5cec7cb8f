"""The package as a user installs it (the action's Install step, tests/action.py: a wheel
built from the checkout, in a fresh venv with the [publish] extra), run from a folder of
its own, builds the very site the checkout builds and serves it; its dependencies are
ranges that hold the checkout's pins. That install's publish is the action's Publish step,
run by tests/test_ci_recipe.py.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import tomllib
import urllib.request
from pathlib import Path
from typing import Final

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.action import REQUIREMENTS, run
from tests.contract import start, stop, wait_answering, wait_for
from tests.trees import built, read_tree, tree_diff

pytestmark = pytest.mark.real_world

ROOT: Final = Path(__file__).resolve().parent.parent
RATINGS: Final = "base_url: https://ratings.example.com\nscale: [1, 5]\narticles:\n  7: [5, 4]\n"
DOCUMENT: Final = "away/api/articles/7/rating/index.json"
BIN: Final = "ratings-api/bin"  # the venv the action installs, in its RUNNER_TEMP
PROJECT: Final = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def pins(name: str) -> dict[str, Requirement]:
    """The requirements file ``name``'s pins, by canonical name."""
    lines = (ROOT / name).read_text(encoding="utf-8").splitlines()
    found = [Requirement(line) for line in lines if line and not line.startswith(("#", "-r"))]
    return {canonicalize_name(pin.name): pin for pin in found}


@pytest.mark.parametrize(
    ("extra", "file"), [(None, "requirements.txt"), ("publish", "requirements-publish.txt")]
)
def test_the_dependencies_are_ranges_that_hold_the_requirements_pins(
    extra: str | None, file: str
) -> None:
    """pyproject.toml's ranges hold the exact pins the checkout's site and CI install
    (requirements-publish.txt also pins what boto3 brings along)."""
    declared = PROJECT["optional-dependencies"][extra] if extra else PROJECT["dependencies"]
    pinned = pins(file)
    ranges = {canonicalize_name(r.name): r.specifier for r in map(Requirement, declared)}
    assert set(ranges) <= set(pinned)
    if extra is None:  # every pin of requirements.txt is a dependency
        assert set(ranges) == set(pinned)
    for name, pin in pinned.items():
        (exact,) = pin.specifier
        assert exact.operator == "==", pin
        assert name not in ranges or ranges[name].contains(exact.version), (pin, ranges[name])


def test_the_action_installs_the_requirements_exact_versions(installed_tool: Path) -> None:
    """A pinned action pins its libraries too: each of requirements*.txt's pins, as installed."""
    listed = run([installed_tool / BIN / "python", "-m", "pip", "list", "--format=json"], ROOT)
    installed = {canonicalize_name(p["name"]): p["version"] for p in json.loads(listed.stdout)}
    pinned = {name: str(pin.specifier) for file in REQUIREMENTS for name, pin in pins(file).items()}
    assert pinned, "no pins found"
    assert {name: f"=={installed.get(name)}" for name in pinned} == pinned


# The installed app under gunicorn, as docs/serving.md shows (its --serve is generate.py's, which
# served.py runs).
SERVE: Final = ["--bind", "127.0.0.1:0", "--no-control-socket", "ratings_api.server:create_app()"]


def test_the_installed_command_builds_and_serves_the_checkout_s_site(
    installed_tool: Path, tmp_path: Path
) -> None:
    """Run from a folder of its own, as `ratings-api` and `python -m ratings_api`: the same site
    as the checkout's, its own version, and the app under gunicorn."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "ratings.yaml").write_text(RATINGS, encoding="utf-8")
    (tmp_path / "checkout").mkdir()
    expected = read_tree(built(tmp_path / "checkout", RATINGS))
    python = installed_tool / BIN / "python"
    where = run([python, "-c", "import ratings_api; print(ratings_api.__file__)"], folder)
    # Not the checkout's.
    assert where.stdout.startswith(str(installed_tool / "ratings-api" / "lib")), where
    for command in ([installed_tool / BIN / "ratings-api"], [python, "-m", "ratings_api"]):
        shutil.rmtree(folder / "site", ignore_errors=True)
        said = run(command, folder)
        assert (said.returncode, said.stderr) == (0, "")
        assert said.stdout.startswith(
            "built site: 1 article; files: 10 written, 0 removed, 0 unchanged in "
        )
        tree = read_tree(folder / "site")
        assert tree == expected, tree_diff(tree, expected)  # the templates and assets too

    # --version reads the installed metadata; a checkout's generate.py says it is none.
    said = run([installed_tool / BIN / "ratings-api", "--version"], tmp_path)
    version = f"ratings-api {PROJECT['version']}\n"
    assert (said.returncode, said.stdout, said.stderr) == (0, version, "")
    said = run([sys.executable, "-m", "ratings_api", "--version"], ROOT)
    assert (said.returncode, said.stdout) == (0, "ratings-api (not installed: a checkout)\n")

    log = tmp_path / "serve.log"
    process = start([str(installed_tool / BIN / "gunicorn"), *SERVE], folder, log)
    try:
        port = int(wait_for(r"Listening at: http://127\.0\.0\.1:(\d+)", log, process)[1])
        wait_answering(port)  # gunicorn listens before its worker runs
        url = f"http://127.0.0.1:{port}/away/api/articles/7/rating/"
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert (answer.status, answer.read()) == (200, expected[DOCUMENT])
    finally:
        stop(process, signal.SIGINT)
