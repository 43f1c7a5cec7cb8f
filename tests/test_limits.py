"""Host limits: a build on a host it recognises says so, before writing, when over the limit."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from ratings_api.errors import InputError
from ratings_api.limits import NETLIFY_PER_DIRECTORY, OBJECT_STORAGE, PAGES_FREE, PAGES_PAID, check
from tests.contract import REPO, hermetic_environ

# Extras as the build adds them to the articles' documents (index.html, 404.html, the
# three assets, openapi.json, _redirects; a real build also embed.js and embed.d.ts, which the
# subprocess test below counts): Pages leaves _redirects out of its count.
EXTRAS: Final = (
    *("404.html", "_redirects", "index.html", "away/api/openapi.json"),
    *(f"assets/{name}" for name in ("front-page.css", "front-page.js", "star.svg")),
)


def ratings(count: int) -> str:
    return "scale: [1, 5]\narticles:\n" + "".join(
        f"  {index}: {{sum: 5, count: 1}}\n" for index in range(1, count + 1)
    )


FREE_PLAN_NOTE: Final = (
    "note: 100,000 files (and any of yours) are over Cloudflare Pages' Free plan limit of "
    "20,000 files a deployment by 80,000: the deploy fails unless the project is on a "
    f"paid plan (100,000); or {OBJECT_STORAGE}"
)
NETLIFY_NOTE: Final = (
    "note: away/api/articles/ holds 54,001 folders, 1 over the 54,000 files a directory "
    "Netlify is reported to allow, if folders count (not confirmed); if the deploy fails, "
    f"{OBJECT_STORAGE}"
)


# (articles, the host's variables): the notices, before anything is written.
@pytest.mark.parametrize(
    ("articles", "environ", "said"),
    [
        (99_994, {"CF_PAGES": "1"}, [FREE_PLAN_NOTE]),
        (
            19_995,
            {"CF_PAGES": "1"},
            [
                FREE_PLAN_NOTE.replace("100,000 files (", "20,001 files (").replace(
                    "by 80,000", "by 1"
                )
            ],
        ),
        (19_994, {"CF_PAGES": "1"}, []),
        (54_001, {"NETLIFY": "true"}, [NETLIFY_NOTE]),
        (54_001, {"CONTEXT": "production"}, [NETLIFY_NOTE]),
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
        "100,008 files (and any of yours) are over Cloudflare Pages' limit of 100,000 files "
        f"a deployment by 8: the deploy would fail; {OBJECT_STORAGE}\n"
    )
    assert not (tmp_path / "site").exists()


def test_generate_says_so_on_netlify_before_writing(tmp_path: Path) -> None:
    """--check writes nothing: the notice comes first, then what a build would write."""
    (tmp_path / "ratings.yaml").write_text(ratings(54_001), encoding="utf-8")
    netlify = {"NETLIFY": "true", "CONTEXT": "production", "URL": "https://r.example.com"}
    done = generate(tmp_path, netlify, "--check")
    assert done.stderr.splitlines()[0] == NETLIFY_NOTE
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


def test_the_hosts_page_gives_the_limits_the_build_checks() -> None:
    page = (REPO / "docs" / "hosts.md").read_text(encoding="utf-8")
    said = [
        f"{PAGES_FREE:,} files a deployment on the Free plan, {PAGES_PAID:,}",
        f"over {PAGES_PAID:,} files, exit 2; over {PAGES_FREE:,}, a notice",
        f"{NETLIFY_PER_DIRECTORY:,} files a directory",
        f"over {NETLIFY_PER_DIRECTORY:,} articles, a notice",
    ]
    assert [text for text in said if text not in page] == []
