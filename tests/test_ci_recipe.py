"""The GitHub Actions workflow users copy (deploy/github-actions/publish.yml).

actionlint checks it as GitHub would read it; its shell steps run here, as the
runner runs them, against the real SeaweedFS; docs/ci.md shows it as it is.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from tests.objectstore import RATINGS, Store

REPO: Final = Path(__file__).resolve().parent.parent
WORKFLOW: Final = REPO / "deploy" / "github-actions" / "publish.yml"
PAGE: Final = REPO / "docs" / "ci.md"
ACTIONLINT: Final = Path(sys.executable).parent / "actionlint"  # requirements-dev.txt
# GitHub runs `run:` steps with this shell when none is named.
RUNNER_SHELL: Final = ("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c")


def workflow() -> dict[str, Any]:
    # BaseLoader: every scalar a string, and `on` a key, not True.
    loaded: dict[str, Any] = yaml.load(WORKFLOW.read_text(), Loader=yaml.BaseLoader)
    return loaded


def step(name: str) -> dict[str, str]:
    steps = workflow()["jobs"]["publish"]["steps"]
    found: list[dict[str, str]] = [s for s in steps if s.get("name") == name]
    assert len(found) == 1, f"no single step named {name!r}"
    return found[0]


def actionlint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ACTIONLINT), "-no-color", "-shellcheck=", "-pyflakes=", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_actionlint_finds_nothing_in_the_workflow() -> None:
    done = actionlint(WORKFLOW)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_actionlint_finds_a_mistake_in_a_copy(tmp_path: Path) -> None:
    """The check above can fail: an input the action does not have is reported."""
    copy = tmp_path / "publish.yml"
    copy.write_text(WORKFLOW.read_text().replace("cache-dependency-path:", "cache-dependency:"))
    done = actionlint(copy)
    assert done.returncode == 1
    assert 'input "cache-dependency" is not defined in action "actions/setup-python@v6"' in (
        done.stdout
    )


def test_the_triggers_the_concurrency_group_and_the_secrets() -> None:
    flow = workflow()
    assert set(flow["on"]) == {"push", "schedule", "pull_request", "workflow_dispatch"}
    assert flow["on"]["push"] == {"branches": ["main"]}
    assert flow["concurrency"]["group"].endswith("|| 'publish' }}")
    assert flow["permissions"] == {"contents": "read"}
    env = flow["jobs"]["publish"]["env"]
    assert env["AWS_ACCESS_KEY_ID"] == "${{ secrets.AWS_ACCESS_KEY_ID }}"
    assert env["AWS_SECRET_ACCESS_KEY"] == "${{ secrets.AWS_SECRET_ACCESS_KEY }}"
    assert step("Check what a merge would publish")["if"] == "github.event_name == 'pull_request'"
    assert step("Publish")["if"] == "github.event_name != 'pull_request'"


class Runner:
    """A fresh checkout (generate.py, ratings_api, ratings.yaml) and the job's variables."""

    def __init__(self, folder: Path, store: Store, bucket: str) -> None:
        self.folder = folder
        for name in ("generate.py", "ratings_api"):
            (folder / name).symlink_to(REPO / name)
        (folder / "ratings.yaml").write_text(RATINGS)
        environ = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        environ.update(store.environ())
        environ["AWS_CONFIG_FILE"] = str(folder / "no-aws-config")
        environ["AWS_SHARED_CREDENTIALS_FILE"] = str(folder / "no-aws-credentials")
        environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environ['PATH']}"
        environ.update(PUBLISH_TO=f"s3://{bucket}/v1", BASE_URL="", AWS_REGION="")
        self.environ = environ

    def run(self, name: str) -> subprocess.CompletedProcess[str]:
        """The step's shell text, run as the runner runs it."""
        return subprocess.run(
            [*RUNNER_SHELL, step(name)["run"]],
            cwd=self.folder,
            env=self.environ,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


@pytest.fixture
def runner(tmp_path: Path, object_store: Store) -> Runner:
    object_store.create_bucket("ci-recipe")
    return Runner(tmp_path, object_store, "ci-recipe")


def test_the_steps_publish_and_check_as_the_runner_runs_them(runner: Runner) -> None:
    check = "Check what a merge would publish"
    first = runner.run(check)  # exit 1 from generate.py: the check passes, and says why
    assert first.returncode == 0, first.stderr
    assert first.stderr.startswith("checked s3://ci-recipe/v1: 11 to upload, 0 to remove, ")

    published = runner.run("Publish")
    assert published.returncode == 0, published.stderr
    assert published.stdout.startswith("published s3://ci-recipe/v1: 11 uploaded, 0 removed, ")
    assert sorted(path.name for path in runner.folder.iterdir()) == [
        "generate.py",
        "ratings.yaml",
        "ratings_api",
    ]  # no folder built on the runner

    (runner.folder / "ratings.yaml").write_text(RATINGS.replace("[2, 3, 2]", "[2, 3, 9]"))
    bad = runner.run(check)  # a mistake in the pull request fails its check (exit 2, not 1)
    assert bad.returncode == 1
    assert bad.stderr == "ratings.yaml:5:13: article 2: rating 9 is outside the scale 1..5\n"


def test_the_docs_page_shows_the_workflow_as_it_is() -> None:
    page = PAGE.read_text()
    assert f"```yaml\n{WORKFLOW.read_text()}```" in page
    assert len(page) <= 16_000
