"""The package installs with pip into a fresh virtual environment and, run from outside the
checkout, builds the very site the checkout builds, templates included.
"""

from __future__ import annotations

import os
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Final

from packaging.requirements import Requirement

from ratings_api.build import build
from tests.contract import run_ok
from tests.trees import read_tree, tree_diff

ROOT: Final = Path(__file__).resolve().parent.parent
PIP_SECONDS: Final = 600  # a loaded machine, and maybe the package index
RATINGS: Final = "base_url: https://ratings.example.com\nscale: [1, 5]\narticles:\n  7: [5, 4]\n"


def clean_environ() -> dict[str, str]:
    """This environment without what would let the checkout's code be imported instead."""
    hidden = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "BASE_URL", "CONTEXT", "URL")
    return {name: value for name, value in os.environ.items() if name not in hidden}


def run(command: list[str | Path], cwd: Path) -> str:
    parts = [str(part) for part in command]
    return run_ok(parts, cwd=cwd, env=clean_environ(), timeout=PIP_SECONDS).stdout


def test_the_dependencies_are_requirements_txt_s() -> None:
    """pyproject.toml's dependencies are requirements.txt's exact pins, or ranges holding them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pins = [
        Requirement(line)
        for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    ]
    declared = [Requirement(line) for line in project["dependencies"]]
    assert [pin.name for pin in pins] == [allowed.name for allowed in declared]
    for pin, allowed in zip(pins, declared, strict=True):
        (exact,) = pin.specifier
        assert exact.operator == "==", pin
        assert allowed.specifier.contains(exact.version), (pin, allowed)


def test_a_wheel_installs_in_a_fresh_venv_and_builds_the_same_site(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "ratings_api", source / "ratings_api", ignore=shutil.ignore_patterns("__pycache__")
    )
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", tmp_path / "dist", source], ROOT)
    wheels = list((tmp_path / "dist").glob("ratings_api-*.whl"))
    assert len(wheels) == 1, wheels
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv], tmp_path)
    run([venv / "bin" / "python", "-m", "pip", "install", "-q", wheels[0]], tmp_path)

    project = tmp_path / "project"
    project.mkdir()
    (project / "ratings.yaml").write_text(RATINGS, encoding="utf-8")
    where = run(
        [venv / "bin" / "python", "-c", "import ratings_api; print(ratings_api.__file__)"], project
    )
    assert where.startswith(str(venv / "lib")), where  # the installed copy, not the checkout
    said = run([venv / "bin" / "ratings-api"], project)
    assert said.startswith("built site: 1 article; files: 10 written, 0 removed, 0 unchanged in ")

    expected = tmp_path / "expected"
    build(str(project / "ratings.yaml"), str(expected), base_url=None, environ={})
    built = read_tree(project / "site")
    assert "index.html" in built  # the templates came along
    assert "assets/star.svg" in built
    assert built == read_tree(expected), tree_diff(built, read_tree(expected))
