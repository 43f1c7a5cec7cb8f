"""The GitHub Actions workflow users copy (deploy/github-actions/publish.yml) and the
action it uses (action.yml, tests/action.py).

actionlint checks the workflow against the action's inputs as GitHub would read them;
the action's steps run here with the workflow's values, as the runner runs them, against
moto's S3 server, once as AWS (no endpoint given: the AWS configuration's, here a config
file's) and once with the endpoint of any other store; docs/ci.md shows the workflow as it is.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Final

import pytest

from tests.action import ACTION, REPO, clean_environ, expand, load, run, run_step
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
# The one concurrency group of every publishing workflow, in the workflow and the docs.
PUBLISHING_GROUP: Final = "ratings-api-publish"
# An action pinned as GitHub's hardening guide advises: a full commit SHA, its tag beside it.
PINNED: Final = re.compile(r"[\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+")
# The workflow's step that uses the action.
(STEP,) = [step for step in load(WORKFLOW)["jobs"]["publish"]["steps"] if step["uses"] == USES]


def actionlint(folder: Path, workflow: str) -> subprocess.CompletedProcess[str]:
    """actionlint on ``workflow`` in a repository whose root holds action.yml, used as `./`."""
    (folder / ".git").mkdir(parents=True)  # where actionlint finds the repository's root
    (folder / ".github" / "workflows").mkdir(parents=True)
    shutil.copyfile(ACTION, folder / "action.yml")
    path = folder / ".github" / "workflows" / "publish.yml"
    path.write_text(workflow.replace(f"uses: {USES}", "uses: ./"))
    return run([ACTIONLINT, "-no-color", "-shellcheck=", "-pyflakes=", path], folder)


def test_actionlint_finds_nothing_in_the_workflow_and_a_mistake_in_a_copy(tmp_path: Path) -> None:
    done = actionlint(tmp_path / "as-is", WORKFLOW.read_text())
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    # The check can fail: an input the action does not have is reported.
    done = actionlint(
        tmp_path / "wrong", WORKFLOW.read_text().replace("check-only:", "check_only:")
    )
    assert done.returncode == 1
    assert 'input "check_only" is not defined in action "ratings-api" defined at "./"' in (
        done.stdout
    )


def test_the_workflow_s_triggers_group_permissions_and_pinned_actions() -> None:
    """Its concurrency group, the one of every publishing workflow a page gives; every `uses:`
    of the workflow and the action a full commit SHA and its tag, the workflow's own action
    this version's tag; docs/ci.md shows the workflow as it is."""
    flow = load(WORKFLOW)
    assert set(flow["on"]) == {"push", "schedule", "pull_request", "workflow_dispatch"}
    assert flow["on"]["push"] == {"branches": ["main"]}
    main = "github.ref == 'refs/heads/main'"
    assert flow["concurrency"]["group"] == (
        f"${{{{ {main} && '{PUBLISHING_GROUP}' || format('ratings-api-check-{{0}}', github.ref) }}}}"
    )
    assert flow["permissions"] == {"contents": "read"}
    # Only the secrets: a job's env key is set even when its variable is not, empty.
    assert flow["jobs"]["publish"]["env"] == {
        "AWS_ACCESS_KEY_ID": "${{ secrets.AWS_ACCESS_KEY_ID }}",
        "AWS_SECRET_ACCESS_KEY": "${{ secrets.AWS_SECRET_ACCESS_KEY }}",
    }
    assert STEP["with"]["check-only"] == "${{ github.ref != 'refs/heads/main' }}"

    texts = [WORKFLOW.read_text(), *(page.read_text() for page in (REPO / "docs").glob("*.md"))]
    groups = {g for text in texts for g in re.findall(r"group: ([^\s`)]+)", text)}
    assert groups == {PUBLISHING_GROUP, "${{"}, groups  # the literal, and the workflow's

    used = [line.split("uses: ", 1)[1] for path in (WORKFLOW, ACTION)
            for line in path.read_text().splitlines() if "uses: " in line]  # fmt: skip
    assert f"{USES} # v{VERSION}" in used
    others = [uses for uses in used if not uses.startswith(USES)]
    assert len(others) == 2, used  # actions/checkout and actions/setup-python
    assert all(PINNED.fullmatch(uses) for uses in others), others
    assert f"```yaml\n{WORKFLOW.read_text()}```" in PAGE.read_text()  # its length: test_docs.py


def publish_step(
    tmp_path: Path, store: Store, bucket: str, runner_temp: Path
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """The action's Publish step in a repository that holds only ratings.yaml, for a run of a
    ref: the job's env, the step's `with:` (or what is given) over the action's defaults.

    Its ``endpoint``: the repository variable AWS_ENDPOINT_URL; empty, as for AWS itself, puts
    the store's endpoint in an AWS config file instead, a stand-in for AWS's own.
    """
    folder = tmp_path / "repository"
    folder.mkdir()
    (folder / "ratings.yaml").write_text(RATINGS)
    config = tmp_path / "aws-config"
    environ = {k: v for k, v in clean_environ().items() if not k.startswith("AWS_")}
    environ |= {"AWS_CONFIG_FILE": str(config), "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
    environ["RUNNER_TEMP"] = str(runner_temp)
    job = load(WORKFLOW)["jobs"]["publish"]
    defaults = {name: spec.get("default", "") for name, spec in load(ACTION)["inputs"].items()}

    def publish(ref: str, endpoint: str = "", **given: str) -> subprocess.CompletedProcess[str]:
        config.write_text("" if endpoint else f"[default]\nendpoint_url = {store.endpoint}\n")
        values = {
            "secrets.AWS_ACCESS_KEY_ID": store.access_key,
            "secrets.AWS_SECRET_ACCESS_KEY": store.secret_key,
            "vars.AWS_ENDPOINT_URL": endpoint,
            "vars.AWS_REGION": endpoint and store.region,  # AWS: the bucket's own
            "vars.PUBLISH_TO": f"s3://{bucket}/v1",
            "vars.BASE_URL": "",
            "github.ref != 'refs/heads/main'": str(ref != MAIN).lower(),
        }
        env = {**environ, **{k: expand(v, values) for k, v in job["env"].items()}}
        inputs = defaults | {k: expand(v, values) for k, v in STEP["with"].items()} | given
        return run_step("Publish", {f"inputs.{k}": v for k, v in inputs.items()}, env, folder)

    return publish


MAIN: Final = "refs/heads/main"
PULL_REQUEST: Final = "refs/pull/4/merge"


def test_the_action_checks_publishes_and_takes_its_inputs_as_the_runner_runs_it(
    tmp_path: Path, object_store: Store, installed_tool: Path
) -> None:
    """A run of a pull request as AWS (no endpoint given: the AWS configuration's) checks, a
    run of main with the endpoint of any other store publishes; then the inputs."""
    object_store.create_bucket(bucket := "ci-recipe")
    publish = publish_step(tmp_path, object_store, bucket, installed_tool)
    # A run of any ref but main only checks (the workflow's expression: the test above):
    # exit 1 from the check, and the step passes, and says why; the bucket is still empty.
    checked = f"checked s3://{bucket}/v1: 11 to upload, 0 to remove, "
    done = publish(PULL_REQUEST)
    assert (done.returncode, done.stderr[: len(checked)]) == (0, checked), done.stderr
    done = publish(MAIN, object_store.endpoint)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"published s3://{bucket}/v1: 11 uploaded, 0 removed, ")

    # A wrong input of the action fails its step in one line.
    for given, error in [
        ({"check-only": "yes"}, "check-only: expected true or false, found 'yes'\n"),
        ({"input": "missing.yaml"}, "missing.yaml: cannot read: No such file or directory\n"),
    ]:
        done = publish(MAIN, **given)
        assert (done.returncode, done.stdout, done.stderr) == (2, "", error)

    # The base URL and the options reach the command.
    url = "https://api.example.org/ratings"
    done = publish(MAIN, **{"base-url": url, "options": "--quiet --publish-workers 2"})
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    document = "v1/away/api/articles/7/rating/index.json"
    got = object_store.client().get_object(Bucket=bucket, Key=document)["Body"].read()
    assert got.startswith(f'{{"article_url": "{url}/away/api/articles/7/", "id": 7,'.encode())

    (tmp_path / "repository" / "ratings.yaml").write_text(RATINGS.replace("[2, 3, 2]", "[2, 3, 9]"))
    bad = publish(PULL_REQUEST)  # a mistake fails the check with the tool's own exit 2
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr == "ratings.yaml:5:13: article 2: rating 9 is outside the scale 1..5\n"
