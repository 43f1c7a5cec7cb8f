"""The GitHub Actions workflow users copy (deploy/github-actions/publish.yml) and the
action it uses (action.yml, tests/action.py).

actionlint checks the workflow against the action's inputs as GitHub would read them;
the action's steps run here with the workflow's values, as the runner runs them, against
moto's S3 server, once as AWS (no endpoint given: the AWS configuration's, here a config
file's) and once with the endpoint of any other store; docs/ci.md shows the workflow as it is.
"""

from __future__ import annotations

import itertools
import os
import re
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

pytestmark = [
    pytest.mark.real_world,
    pytest.mark.stores(
        "moto", why="the action's steps: test_publish.py holds the stores to the same publish"
    ),
]

WORKFLOW: Final = REPO / "deploy" / "github-actions" / "publish.yml"
PAGE: Final = REPO / "docs" / "ci.md"
ACTIONLINT: Final = Path(sys.executable).parent / "actionlint"  # requirements-dev.txt
VERSION: Final = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
USES: Final = "OWNER/ratings-api@COMMIT"  # the action, at the commit of this version's tag
BUCKETS: Final = (f"ci-recipe-{number}" for number in itertools.count())
# The one concurrency group of every publishing workflow, in the workflow and the docs.
PUBLISHING_GROUP: Final = "ratings-api-publish"
# An action pinned as GitHub's hardening guide advises: a full commit SHA, its tag beside it.
PINNED: Final = re.compile(r"[\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+")


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
    main = "github.ref == 'refs/heads/main'"
    assert flow["concurrency"]["group"] == (
        f"${{{{ {main} && '{PUBLISHING_GROUP}' || format('ratings-api-check-{{0}}', github.ref) }}}}"
    )
    assert flow["permissions"] == {"contents": "read"}
    env = flow["jobs"]["publish"]["env"]
    # Only the secrets: a job's env key is set even when its variable is not, empty.
    assert env == {
        "AWS_ACCESS_KEY_ID": "${{ secrets.AWS_ACCESS_KEY_ID }}",
        "AWS_SECRET_ACCESS_KEY": "${{ secrets.AWS_SECRET_ACCESS_KEY }}",
    }
    assert the_action_step()["with"]["check-only"] == "${{ github.ref != 'refs/heads/main' }}"


def test_every_action_used_is_pinned_by_commit() -> None:
    """The workflow's and the action's `uses:` name a full commit SHA and its tag, and the
    workflow's own action is this version's tag."""
    used = [
        line.split("uses: ", 1)[1]
        for path in (WORKFLOW, ACTION)
        for line in path.read_text().splitlines()
        if "uses: " in line
    ]
    assert f"{USES} # v{VERSION}" in used
    others = [uses for uses in used if not uses.startswith(USES)]
    assert len(others) == 2, used  # actions/checkout and actions/setup-python
    for uses in others:
        assert PINNED.fullmatch(uses), uses


def test_every_page_names_the_one_publishing_group() -> None:
    """One group name for every publishing workflow, wherever a page or the workflow gives one."""
    texts = [WORKFLOW.read_text(), *(page.read_text() for page in (REPO / "docs").glob("*.md"))]
    groups = {g for text in texts for g in re.findall(r"group: ([^\s`)]+)", text)}
    assert groups == {PUBLISHING_GROUP, "${{"}, groups  # the literal, and the workflow's


class Runner:
    """A repository that holds only ratings.yaml, and the values a run gives the workflow.

    ``endpoint``: the repository variable AWS_ENDPOINT_URL; empty, as for AWS itself, puts
    the store's endpoint in an AWS config file instead, a stand-in for AWS's own.
    """

    def __init__(self, folder: Path, store: Store, bucket: str, tool: Tool, endpoint: str) -> None:
        self.folder = folder
        self.bucket = bucket
        self.store = store
        (folder / "ratings.yaml").write_text(RATINGS)
        self.context = {
            "secrets.AWS_ACCESS_KEY_ID": store.access_key,
            "secrets.AWS_SECRET_ACCESS_KEY": store.secret_key,
            "vars.AWS_ENDPOINT_URL": endpoint,
            "vars.AWS_REGION": endpoint and store.region,  # AWS: the bucket's own
            "vars.PUBLISH_TO": f"s3://{bucket}/v1",
            "vars.BASE_URL": "",
        }
        config = folder.parent / "aws-config"
        config.write_text("" if endpoint else f"[default]\nendpoint_url = {store.endpoint}\n")
        environ = {k: v for k, v in clean_environ().items() if not k.startswith("AWS_")}
        environ["AWS_CONFIG_FILE"] = str(config)
        environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
        environ["RUNNER_TEMP"] = str(tool.runner_temp)
        self.environ = environ

    def run(self, ref: str, **given: str) -> subprocess.CompletedProcess[str]:
        """The action's Publish step, for a run of ``ref``: the job's env, the step's `with:`
        (or ``given``) over the action's defaults."""
        context = {
            **self.context,
            "github.ref != 'refs/heads/main'": str(ref != "refs/heads/main").lower(),
        }
        job = load(WORKFLOW)["jobs"]["publish"]
        environ = {**self.environ, **{k: expand(v, context) for k, v in job["env"].items()}}
        inputs = {name: spec.get("default", "") for name, spec in load(ACTION)["inputs"].items()}
        inputs |= {k: expand(v, context) for k, v in the_action_step()["with"].items()} | given
        values = {f"inputs.{name}": value for name, value in inputs.items()}
        return run_step("Publish", values, environ, self.folder)


@pytest.fixture(params=["AWS", "custom endpoint"])
def runner(
    request: pytest.FixtureRequest, tmp_path: Path, object_store: Store, installed_tool: Tool
) -> Runner:
    bucket = next(BUCKETS)
    object_store.create_bucket(bucket)
    endpoint = "" if request.param == "AWS" else object_store.endpoint
    folder = tmp_path / "repository"
    folder.mkdir()
    return Runner(folder, object_store, bucket, installed_tool, endpoint)


PULL_REQUEST: Final = "refs/pull/4/merge"
FEATURE: Final = "refs/heads/feature"  # a manual run (workflow_dispatch) of another branch


def test_the_action_checks_and_publishes_as_the_runner_runs_it(runner: Runner) -> None:
    first = runner.run(PULL_REQUEST)  # exit 1 from the check: the step passes, and says why
    assert first.returncode == 0, first.stderr
    assert first.stderr.startswith(f"checked s3://{runner.bucket}/v1: 11 to upload, 0 to remove, ")

    manual = runner.run(FEATURE)  # another branch only checks: the bucket is still empty
    assert manual.returncode == 0, manual.stderr
    assert manual.stderr.startswith(f"checked s3://{runner.bucket}/v1: 11 to upload, 0 to remove, ")

    published = runner.run("refs/heads/main")
    assert published.returncode == 0, published.stderr
    assert published.stdout.startswith(
        f"published s3://{runner.bucket}/v1: 11 uploaded, 0 removed, "
    )
    assert [path.name for path in runner.folder.iterdir()] == ["ratings.yaml"]  # no folder built

    (runner.folder / "ratings.yaml").write_text(RATINGS.replace("[2, 3, 2]", "[2, 3, 9]"))
    bad = runner.run(PULL_REQUEST)  # a mistake fails the check with the tool's own exit 2
    assert (bad.returncode, bad.stdout) == (2, "")
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
    done = runner.run("refs/heads/main", **given)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", error)


def test_the_base_url_and_the_options_reach_the_command(runner: Runner) -> None:
    url = "https://api.example.org/ratings"
    done = runner.run(
        "refs/heads/main", **{"base-url": url, "options": "--quiet --publish-workers 2"}
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    document = runner.store.url(runner.bucket, "v1/away/api/articles/7/rating/index.json")
    with urllib.request.urlopen(document) as answer:
        assert answer.read().startswith(
            f'{{"article_url": "{url}/away/api/articles/7/", "id": 7,'.encode()
        )


def test_the_docs_page_shows_the_workflow_as_it_is() -> None:
    page = PAGE.read_text()
    assert f"```yaml\n{WORKFLOW.read_text()}```" in page  # its length: test_docs.py
