"""The hosts' configuration: what it says, and what the hosts' own servers do with it.

The HTTP contract suite runs against each host's own server (tests/hosts.py);
here are the files each configuration must agree with.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from ratings_api.contract import COMMON_HEADERS, FRONT_PAGE_CSP, NOT_FOUND
from ratings_api.hosting import hosting_files
from tests.contract import hermetic_environ, make_project
from tests.hosts import (
    CLOUDFLARE_BUILD,
    CLOUDFLARE_HEADERS,
    NETLIFY_TOML,
    NGINX_CONF,
    nginx_site_conf,
)


def test_hosting_files_are_the_rules_and_the_json_404() -> None:
    """The same for any site (a million articles need two rules): bytes in tests/cases/valid/front-page."""
    golden = Path(__file__).parent / "cases/valid/front-page/expected"
    assert hosting_files() == {
        "_redirects": (golden / "_redirects").read_bytes(),
        "404.html": NOT_FOUND,
    }


# netlify.toml


def netlify_config() -> dict[str, Any]:
    with open(NETLIFY_TOML, "rb") as file:
        return tomllib.load(file)


def netlify_headers(path: str) -> dict[str, str]:
    rules = [rule["values"] for rule in netlify_config()["headers"] if rule["for"] == path]
    assert len(rules) == 1, path
    return dict(rules[0])


def test_netlify_sends_the_apps_headers_everywhere() -> None:
    assert netlify_headers("/*") == dict(COMMON_HEADERS)


def test_netlify_sends_the_front_page_policy() -> None:
    assert netlify_headers("/") == {"Content-Security-Policy": FRONT_PAGE_CSP}
    assert netlify_headers("/index.html") == {"Content-Security-Policy": FRONT_PAGE_CSP}


def test_netlify_builds_with_the_deploy_s_own_url() -> None:
    """ratings.yaml's base_url would win over Netlify's variables: --base-url wins over it."""
    config = netlify_config()
    assert config["build"]["publish"] == "site"
    assert config["build"]["command"] == 'python generate.py --base-url "$URL"'
    for context in ("deploy-preview", "branch-deploy"):
        assert config["context"][context]["command"] == (
            'python generate.py --base-url "$DEPLOY_PRIME_URL"'
        )
    assert re.fullmatch(r"3\.1[1-9]", config["build"]["environment"]["PYTHON_VERSION"])


# deploy/cloudflare-pages/_headers


def test_cloudflare_headers_are_the_apps_and_the_front_page_policy() -> None:
    text = CLOUDFLARE_HEADERS.read_text(encoding="utf-8")
    rules = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#"))
    common = "".join(f"  {name}: {value}\n" for name, value in COMMON_HEADERS)
    policy = f"  Content-Security-Policy: {FRONT_PAGE_CSP}\n"
    types = "/away/api/embed.d.ts\n  Content-Type: text/plain; charset=utf-8\n"
    assert rules == f"/*\n{common}{types}/\n{policy}/index.html\n{policy}"


# deploy/cloudflare-pages/build


def run_cloudflare_build(folder: Path, **environ: str) -> subprocess.CompletedProcess[str]:
    make_project(folder)
    return subprocess.run(
        ["bash", str(CLOUDFLARE_BUILD)],
        cwd=folder,
        capture_output=True,
        text=True,
        env={**hermetic_environ(), "PYTHON": sys.executable, **environ},
        check=False,
    )


def article_url(site: Path) -> str:
    document = json.loads((site / "away/api/articles/7/rating/index.json").read_bytes())
    return str(document["article_url"])


def test_cloudflare_build_uses_the_deployment_s_address(tmp_path: Path) -> None:
    done = run_cloudflare_build(tmp_path, CF_PAGES_URL="https://abc123.ratings.pages.dev")
    assert done.returncode == 0, done.stderr
    site = tmp_path / "site"
    assert article_url(site) == "https://abc123.ratings.pages.dev/away/api/articles/7/"
    assert (site / "_headers").read_bytes() == CLOUDFLARE_HEADERS.read_bytes()
    assert (tmp_path / ".site.generate" / "lock").is_file()  # beside site/: not published
    assert not (site / ".generate-state").exists()
    assert (site / ".hidden").exists()  # a dotfile of the user's is theirs


def test_cloudflare_build_prefers_the_project_s_base_url(tmp_path: Path) -> None:
    done = run_cloudflare_build(
        tmp_path,
        CF_PAGES_URL="https://abc123.ratings.pages.dev",
        BASE_URL="https://ratings.example.com",
    )
    assert done.returncode == 0, done.stderr
    assert article_url(tmp_path / "site") == "https://ratings.example.com/away/api/articles/7/"


def test_cloudflare_build_without_an_address_fails_and_writes_nothing(tmp_path: Path) -> None:
    done = run_cloudflare_build(tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "--base-url: the base URL must start with http:// or https://, found ''\n"
    )
    assert not (tmp_path / "site" / "away").exists()
    assert not (tmp_path / "site" / "_headers").exists()


# deploy/nginx.conf


def test_nginx_conf_sends_the_apps_headers_and_policy() -> None:
    text = NGINX_CONF.read_text(encoding="utf-8")
    for name, value in COMMON_HEADERS:
        assert f'    add_header {name} "{value}" always;\n' in text
    assert f'    "/index.html" "{FRONT_PAGE_CSP}";\n' in text


def test_nginx_conf_has_the_two_documented_edits(tmp_path: Path) -> None:
    text = nginx_site_conf(8080, tmp_path)
    assert "    listen 127.0.0.1:8080;\n" in text
    assert f"    root {tmp_path};\n" in text
    assert "# EDIT" not in text
