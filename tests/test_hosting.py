"""The hosts' configuration: rendered from the contract, and what the builds do with it.

The HTTP contract suite runs against each host's own server (tests/hosts.py);
here each checked-in file is held to its rendering (deploy/render.py).
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path
from typing import Final

import pytest
import yaml

from deploy.render import COMMAND, FILES, REPO, rendered
from ratings_api.contract import COMMON_HEADERS, ERROR_TYPE, NOT_FOUND
from ratings_api.publish import content_type
from tests.contract import make_project
from tests.hosts import CLOUDFLARE_BUILD, NETLIFY_TOML
from tests.test_cli import SCHEME
from tests.test_user_errors import run

# The rendered files


@pytest.mark.parametrize("path", list(FILES))
def test_each_host_file_is_its_rendering_of_the_contract(path: str) -> None:
    """As site/ is held to the build: a file edited by hand, or a contract changed without
    rendering again, shows its diff (pytest's) and the command that renders it."""
    checked_in = (REPO / path).read_text(encoding="utf-8")
    assert checked_in == rendered()[path], f"{path} is not its rendering; run `{COMMAND}`"


# netlify.toml


def test_netlify_builds_with_the_deploy_s_own_url() -> None:
    """ratings.yaml's base_url would win over Netlify's variables: --base-url wins over it."""
    config = tomllib.loads(NETLIFY_TOML.read_text(encoding="utf-8"))
    build, contexts = config["build"], config["context"]
    assert (build["publish"], build["command"]) == ("site", 'python generate.py --base-url "$URL"')
    previews = [contexts[name]["command"] for name in ("deploy-preview", "branch-deploy")]
    assert previews == ['python generate.py --base-url "$DEPLOY_PRIME_URL"'] * 2
    assert re.fullmatch(r"3\.1[1-9]", build["environment"]["PYTHON_VERSION"])


# deploy/cloudflare-pages/build


PAGES_URL: Final = "https://abc123.ratings.pages.dev"
OWN_URL: Final = "https://ratings.example.com"


# id: (the deployment's variables, the article URL the build gives, or its error). The build
# with the deployment's address alone is the one the contract suite serves with wrangler: its
# _headers, the user's dotfile kept, the lock beside site/ (tests/test_writers.py) are proven there.
CLOUDFLARE: Final = {
    # the project's own base URL wins over the deployment's address
    "base-url": ({"CF_PAGES_URL": PAGES_URL, "BASE_URL": OWN_URL}, OWN_URL, ""),
    "no-address": ({}, None, f"--base-url: {SCHEME}''\n"),
}


@pytest.mark.parametrize("name", list(CLOUDFLARE))
def test_the_cloudflare_build(tmp_path: Path, name: str) -> None:
    environ, url, error = CLOUDFLARE[name]
    make_project(tmp_path)
    pages = {"PYTHON": sys.executable, **environ}
    done = run(tmp_path, environ=pages, command=["bash", str(CLOUDFLARE_BUILD)])
    site = tmp_path / "site"
    assert (done[0], done[2]) == ((2, error) if url is None else (0, ""))
    assert (site / "_headers").exists() is (site / "away").exists() is (url is not None)
    if url is not None:
        document = json.loads((site / "away/api/articles/7/rating/index.json").read_bytes())
        assert document["article_url"] == f"{url}/away/api/articles/7/"


# deploy/cloudfront/template.yaml

FUNCTION: Final = REPO / "deploy/cloudfront/function.js"
TEMPLATE: Final = REPO / "deploy/cloudfront/template.yaml"
MAX_FUNCTION_BYTES: Final = 10 * 1024  # CloudFront's limit on a function's code


def test_the_template_holds_this_function_and_turns_a_missing_key_into_the_404_page() -> None:
    # CloudFormation's tags (!Sub, !Ref...) read as None.
    loader = type("Loader", (yaml.SafeLoader,), {})
    loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    resources = yaml.load(TEMPLATE.read_text(encoding="utf-8"), Loader=loader)["Resources"]
    function = resources["RatingsFunction"]["Properties"]
    assert function["FunctionCode"] == FUNCTION.read_text(encoding="utf-8")
    assert function["FunctionConfig"]["Runtime"] == "cloudfront-js-2.0"
    assert len(FUNCTION.read_bytes()) < MAX_FUNCTION_BYTES
    distribution = resources["RatingsDistribution"]["Properties"]["DistributionConfig"]
    errors = distribution["CustomErrorResponses"]
    pages = [(e["ErrorCode"], e["ResponseCode"], e["ResponsePagePath"]) for e in errors]
    assert pages == [(403, 404, "/404.html"), (404, 404, "/404.html")]
    associations = distribution["DefaultCacheBehavior"]["FunctionAssociations"]
    assert [a["EventType"] for a in associations] == ["viewer-request", "viewer-response"]
    # The error page CloudFront sends is the published 404.html (its body, the JSON error, is
    # the contract suite's, on CloudFront as a host), with the type --publish gives it.
    assert content_type("404.html") == ERROR_TYPE


# docs/deploy-other-hosts.md: snippets for hosts the suite does not run


def test_the_other_hosts_snippets_say_the_contract_s_values() -> None:
    page = (REPO / "docs" / "deploy-other-hosts.md").read_text(encoding="utf-8")
    apache = [f'Header always set {name} "{value}"' for name, value in COMMON_HEADERS]
    caddy = [
        f"header {name} {json.dumps(value) if ' ' in value else value}"
        for name, value in COMMON_HEADERS
    ]
    errors = [f"ForceType {ERROR_TYPE}", f"header Content-Type {ERROR_TYPE}"]
    errors += [f"respond `{NOT_FOUND.decode()}` 404"]
    assert [line for line in apache + caddy + errors if line not in page] == []
