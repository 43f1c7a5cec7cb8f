"""Host limits: a build on a host it recognises says so, before writing, when over the limit."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from ratings_api.build import build
from ratings_api.errors import InputError
from ratings_api.limits import HOST_LIMITS, OBJECT_STORAGE, check
from tests.contract import REPO, hermetic_environ

# Extras as the build adds them to the articles' documents (index.html, 404.html, the
# three assets, openapi.json, _redirects; a real build also embed.js, which the
# subprocess test below counts): Pages leaves _redirects out of its count.
EXTRAS: Final = (
    "404.html",
    "_redirects",
    "index.html",
    "assets/front-page.css",
    "assets/front-page.js",
    "assets/star.svg",
    "away/api/openapi.json",
)


def ratings(count: int) -> str:
    return "scale: [1, 5]\narticles:\n" + "".join(
        f"  {index}: {{sum: 5, count: 1}}\n" for index in range(1, count + 1)
    )


PAGES_FREE: Final = (
    "note: 100,000 files (and any of yours) are over Cloudflare Pages' Free plan limit of "
    "20,000 files a deployment by 80,000: the deploy fails unless the project is on a "
    f"paid plan (100,000); or {OBJECT_STORAGE}"
)
NETLIFY: Final = (
    "note: away/api/articles/ holds 54,001 folders, 1 over the 54,000 files a directory "
    "Netlify is reported to allow, if folders count (not confirmed); if the deploy fails, "
    f"{OBJECT_STORAGE}"
)


# (articles, the host's variables): the notices, before anything is written.
@pytest.mark.parametrize(
    ("articles", "environ", "said"),
    [
        (99_994, {"CF_PAGES": "1"}, [PAGES_FREE]),
        (
            19_995,
            {"CF_PAGES": "1"},
            [PAGES_FREE.replace("100,000 files (", "20,001 files (").replace("by 80,000", "by 1")],
        ),
        (19_994, {"CF_PAGES": "1"}, []),
        (54_001, {"NETLIFY": "true"}, [NETLIFY]),
        (54_001, {"CONTEXT": "production"}, [NETLIFY]),
        (54_000, {"NETLIFY": "true"}, []),
        *(
            (10_000_000, environ, [])
            for environ in ({}, {"VERCEL": "1"}, {"CF_PAGES": "0"}, {"NETLIFY": "false"})
        ),
    ],
)
def test_a_host_s_limit_is_a_notice_where_the_deploy_may_fail(
    articles: int, environ: dict[str, str], said: list[str]
) -> None:
    notices: list[str] = []
    check(articles, EXTRAS, environ, notices.append)
    assert notices == said


def test_pages_over_its_paid_limit_stops_the_build() -> None:
    with pytest.raises(InputError) as caught:
        check(99_995, EXTRAS, {"CF_PAGES": "1"}, print)
    assert str(caught.value) == (
        "100,001 files (and any of yours) are over Cloudflare Pages' limit of 100,000 files "
        f"a deployment by 1: the deploy would fail; {OBJECT_STORAGE}"
    )


def test_the_build_stops_before_writing(tmp_path: Path) -> None:
    source = tmp_path / "ratings.yaml"
    source.write_text(ratings(100_000), encoding="utf-8")
    said: list[str] = []
    with pytest.raises(InputError):
        build(
            str(source),
            str(tmp_path / "site"),
            base_url="https://ratings.example.com",
            environ={"CF_PAGES": "1"},
            host_notice=said.append,
        )
    assert not (tmp_path / "site").exists()
    assert said == []


def generate(folder: Path, environ: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "generate.py"), *args],
        cwd=folder,
        capture_output=True,
        text=True,
        env={**hermetic_environ(), **environ},
        check=False,
        timeout=300,
    )


def test_generate_exits_2_on_pages_over_the_limit(tmp_path: Path) -> None:
    (tmp_path / "ratings.yaml").write_text(ratings(100_000), encoding="utf-8")
    done = generate(tmp_path, {"CF_PAGES": "1"}, "--base-url", "https://r.example.com")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "100,007 files (and any of yours) are over Cloudflare Pages' limit of 100,000 files "
        f"a deployment by 7: the deploy would fail; {OBJECT_STORAGE}\n"
    )
    assert not (tmp_path / "site").exists()


def test_generate_says_so_on_netlify_before_writing(tmp_path: Path) -> None:
    """--check writes nothing: the notice comes first, then what a build would write."""
    (tmp_path / "ratings.yaml").write_text(ratings(54_001), encoding="utf-8")
    netlify = {"NETLIFY": "true", "CONTEXT": "production", "URL": "https://r.example.com"}
    done = generate(tmp_path, netlify, "--check")
    assert done.stderr.splitlines()[0] == NETLIFY
    assert done.stderr.splitlines()[1].startswith("site is out of date: ")


def test_a_publishing_build_checks_no_static_host(tmp_path: Path) -> None:
    """With --publish the site goes to a bucket, which has no such limit: no notice."""
    (tmp_path / "ratings.yaml").write_text(ratings(19_995), encoding="utf-8")
    with socket.socket() as closed:  # a port nothing listens on: the publish stops there
        closed.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{closed.getsockname()[1]}"
    done = generate(
        tmp_path,
        {"CF_PAGES": "1", "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "k"},
        "--base-url",
        "https://r.example.com",
        "--publish",
        "s3://ratings/p",
        "--output",
        "site",
    )
    assert (tmp_path / "site/away/api/articles/19995/rating/index.json").is_file()
    assert done.returncode == 2
    assert done.stderr.startswith("s3://ratings/p: "), done.stderr  # the publish's own error
    assert "Cloudflare" not in done.stderr


def test_every_host_the_docs_name_has_a_row_with_a_source() -> None:
    hosts = [row.host for row in HOST_LIMITS]
    assert hosts[:5] == [
        "Cloudflare Pages",
        "Netlify",
        "Azure Static Web Apps",
        "Vercel",
        "GitHub Pages",
    ]
    assert hosts[5].startswith("Object storage")
    assert all(row.source and row.limit and row.check for row in HOST_LIMITS)


def limits_table() -> str:
    """docs/hosts.md's table of the hosts' limits, from HOST_LIMITS."""
    lines = [
        "| host | limit | what counts | source | what the build does |",
        "|---|---|---|---|---|",
    ]
    for row in HOST_LIMITS:
        cells = (row.host, row.limit, row.counts, row.source, row.check)
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def test_the_hosts_page_shows_the_limits_table() -> None:
    assert limits_table() in (REPO / "docs" / "hosts.md").read_text(encoding="utf-8")
