"""The GitHub Actions workflow users copy (deploy/github-actions/publish.yml) and the
action it uses (action.yml, tests/action.py).

actionlint checks the workflow against the action's inputs as GitHub would read them;
the action's steps run here with the workflow's values, as the runner runs them, against
the real SeaweedFS; docs/ci.md shows the workflow as it is.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path
from typing import Any, Final

import pytest

from tests.action import ACTION, REPO, Tool, clean_environ, expand, load, run_step
from tests.objectstore import RATINGS, Store

pytestmark = pytest.mark.real_world

WORKFLOW: Final = REPO / "deploy" / "github-actions" / "publish.yml"
PAGE: Final = REPO / "docs" / "ci.md"
ACTIONLINT: Final = Path(sys.executable).parent / "actionlint"  # requirements-dev.txt
VERSION: Final = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
USES: Final = f"OWNER/ratings-api@v{VERSION}"  # the action, at the tag of this version
BUCKETS: Final = (f"ci-recipe-{number}" for number in itertools.count())


def the_action_step() -> dict[str, Any]:
    (step,) = [s for s in load(WORKFLOW)["jobs"]["publish"]["steps"] if s["uses"] == USES]
    return step


def actionlint(tmp_path: Path, workflow: str) -> subprocess.CompletedProcess[str]:
    """actionlint on ``workflow`` in a repository whose root holds action.yml, used as `./`."""
    (tmp_path / ".git").mkdir()  # where actionlint finds the repository's root
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    shutil.copyfile(ACTION, tmp_path / "action.yml")
    path = tmp_path / ".github" / "workflows" / "publish.yml"
    path.write_text(workflow.replace(f"uses: {USES}", "uses: ./"))
    return subprocess.run(
        [str(ACTIONLINT), "-no-color", "-shellcheck=", "-pyflakes=", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_actionlint_finds_nothing_in_the_workflow(tmp_path: Path) -> None:
    done = actionlint(tmp_path, WORKFLOW.read_text())
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_actionlint_finds_a_mistake_in_a_copy(tmp_path: Path) -> None:
    """The check above can fail: an input the action does not have is reported."""
    done = actionlint(tmp_path, WORKFLOW.read_text().replace("check-only:", "check_only:"))
    assert done.returncode == 1
    assert 'input "check_only" is not defined in action "ratings-api" defined at "./"' in (
        done.stdout
    )


def test_the_triggers_the_concurrency_group_and_the_action() -> None:
    flow = load(WORKFLOW)
    assert set(flow["on"]) == {"push", "schedule", "pull_request", "workflow_dispatch"}
    assert flow["on"]["push"] == {"branches": ["main"]}
    assert flow["concurrency"]["group"].endswith("|| 'publish' }}")
    assert flow["permissions"] == {"contents": "read"}
    env = flow["jobs"]["publish"]["env"]
    assert env["AWS_ACCESS_KEY_ID"] == "${{ secrets.AWS_ACCESS_KEY_ID }}"
    assert env["AWS_SECRET_ACCESS_KEY"] == "${{ secrets.AWS_SECRET_ACCESS_KEY }}"
    assert the_action_step()["with"]["check-only"] == "${{ github.event_name == 'pull_request' }}"


class Runner:
    """A repository that holds only ratings.yaml, and the values a run gives the workflow."""

    def __init__(self, folder: Path, store: Store, bucket: str, tool: Tool) -> None:
        self.folder = folder
        self.bucket = bucket
        self.store = store
        (folder / "ratings.yaml").write_text(RATINGS)
        self.context = {
            "secrets.AWS_ACCESS_KEY_ID": store.access_key,
            "secrets.AWS_SECRET_ACCESS_KEY": store.secret_key,
            "vars.AWS_ENDPOINT_URL": store.endpoint,
            "vars.AWS_REGION": "",
            "vars.PUBLISH_TO": f"s3://{bucket}/v1",
            "vars.BASE_URL": "",
        }
        environ = {k: v for k, v in clean_environ().items() if not k.startswith("AWS_")}
        environ["AWS_CONFIG_FILE"] = os.devnull
        environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
        environ["RUNNER_TEMP"] = str(tool.runner_temp)
        self.environ = environ

    def run(self, event: str, **given: str) -> subprocess.CompletedProcess[str]:
        """The action's Publish step, for ``event``: the job's env, the step's `with:`
        (or ``given``) over the action's defaults."""
        context = {
            **self.context,
            "github.event_name == 'pull_request'": str(event == "pull_request").lower(),
        }
        job = load(WORKFLOW)["jobs"]["publish"]
        environ = {**self.environ, **{k: expand(v, context) for k, v in job["env"].items()}}
        inputs = {name: spec.get("default", "") for name, spec in load(ACTION)["inputs"].items()}
        inputs |= {k: expand(v, context) for k, v in the_action_step()["with"].items()} | given
        values = {f"inputs.{name}": value for name, value in inputs.items()}
        return run_step("Publish", values, environ, self.folder)


@pytest.fixture
def runner(tmp_path: Path, object_store: Store, installed_tool: Tool) -> Runner:
    bucket = next(BUCKETS)
    object_store.create_bucket(bucket)
    return Runner(tmp_path, object_store, bucket, installed_tool)


@pytest.mark.stores(
    "SeaweedFS", why="the action's steps: test_publish.py holds the stores to the same publish"
)
def test_the_action_checks_and_publishes_as_the_runner_runs_it(runner: Runner) -> None:
    first = runner.run("pull_request")  # exit 1 from the check: the step passes, and says why
    assert first.returncode == 0, first.stderr
    assert first.stderr.startswith(f"checked s3://{runner.bucket}/v1: 11 to upload, 0 to remove, ")

    published = runner.run("push")
    assert published.returncode == 0, published.stderr
    assert published.stdout.startswith(
        f"published s3://{runner.bucket}/v1: 11 uploaded, 0 removed, "
    )
    assert [path.name for path in runner.folder.iterdir()] == ["ratings.yaml"]  # no folder built

    (runner.folder / "ratings.yaml").write_text(RATINGS.replace("[2, 3, 2]", "[2, 3, 9]"))
    bad = runner.run(
        "pull_request"
    )  # a mistake in the pull request fails its check (exit 2, not 1)
    assert bad.returncode == 1
    assert bad.stderr == "ratings.yaml:5:13: article 2: rating 9 is outside the scale 1..5\n"


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ({"check-only": "yes"}, "check-only: expected true or false, found 'yes'\n"),
        ({"input": "missing.yaml"}, "missing.yaml: cannot read: No such file or directory\n"),
    ],
    ids=["check-only", "input"],
)
def test_a_wrong_input_of_the_action_fails_its_step_in_one_line(
    runner: Runner, given: dict[str, str], error: str
) -> None:
    done = runner.run("push", **given)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", error)


def test_the_base_url_and_the_options_reach_the_command(runner: Runner) -> None:
    url = "https://api.example.org/ratings"
    done = runner.run("push", **{"base-url": url, "options": "--quiet --publish-workers 2"})
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    document = runner.store.url(runner.bucket, "v1/away/api/articles/7/rating/index.json")
    with urllib.request.urlopen(document) as answer:
        assert answer.read().startswith(
            f'{{"article_url": "{url}/away/api/articles/7/", "id": 7,'.encode()
        )


def test_the_docs_page_shows_the_workflow_as_it_is() -> None:
    page = PAGE.read_text()
    assert f"```yaml\n{WORKFLOW.read_text()}```" in page
    assert len(page) <= 16_000
