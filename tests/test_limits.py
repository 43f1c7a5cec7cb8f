"""Host limits: a build on a host it recognises says so, before writing, when over the limit."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from ratings_api.limits import NETLIFY_PER_DIRECTORY, OBJECT_STORAGE, PAGES_FREE, PAGES_PAID, check
from tests.contract import REPO
from tests.test_user_errors import run

# Extras as the build adds them to the articles' documents (index.html, 404.html, the
# three assets, openapi.json, _redirects; a real build also embed.js and embed.d.ts, which the
# subprocess test below counts): Pages leaves _redirects out of its count.
EXTRAS: Final = (
    *("404.html", "_redirects", "index.html", "away/api/openapi.json"),
    *(f"assets/{name}" for name in ("front-page.css", "front-page.js", "star.svg")),
)


# The notice of a deployment of {} files, {} over the Free plan's limit.
FREE_PLAN_NOTE: Final = (
    "note: {} files (and any of yours) are over Cloudflare Pages' Free plan limit of "
    "20,000 files a deployment by {}: the deploy fails unless the project is on a "
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
        (99_994, {"CF_PAGES": "1"}, [FREE_PLAN_NOTE.format("100,000", "80,000")]),
        (19_995, {"CF_PAGES": "1"}, [FREE_PLAN_NOTE.format("20,001", "1")]),
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


PAGES_OVER: Final = (
    "100,008 files (and any of yours) are over Cloudflare Pages' limit of 100,000 files "
    f"a deployment by 8: the deploy would fail; {OBJECT_STORAGE}"
)
NETLIFY: Final = {"NETLIFY": "true", "CONTEXT": "production", "URL": "https://r.example.com"}
# id: (articles, the environment, the options, the exit code, the first lines on stderr)
BUILDS: Final = {
    # Every file of a real build counts (embed.js and embed.d.ts too), and nothing is written.
    "pages-over-its-paid-limit": (100_000, {"CF_PAGES": "1"}, [], 2, [PAGES_OVER]),
    # --check writes nothing: the notice comes first, then what a build would write.
    "netlify": (54_001, NETLIFY, ["--check"], 1, [NETLIFY_NOTE, "site is out of date: "]),
    # With --publish the site goes to a bucket, which has no such limit: no notice, only the
    # publish's own error.
    "publishing": (
        19_995,
        {"CF_PAGES": "1", "AWS_ACCESS_KEY_ID": "k"},
        ["--publish", "s3://ratings/p", "--output", "site"],
        2,
        ["s3://ratings/p: "],
    ),
}


@pytest.mark.parametrize("name", list(BUILDS))
def test_a_build_on_a_host_checks_its_limit_before_writing(name: str, tmp_path: Path) -> None:
    articles, environ, options, code, said = BUILDS[name]
    text = "".join(f"  {n}: {{sum: 5, count: 1}}\n" for n in range(1, articles + 1))
    (tmp_path / "ratings.yaml").write_text(f"scale: [1, 5]\narticles:\n{text}", encoding="utf-8")
    done = run(tmp_path, "--base-url", "https://r.example.com", *options, environ=environ)
    lines = zip(done[2].splitlines(), said, strict=False)
    assert (done[0], [line[: len(start)] for line, start in lines]) == (code, said), done
    written = (tmp_path / f"site/away/api/articles/{articles}/rating/index.json").is_file()
    assert written is (name == "publishing")


def test_the_hosts_page_gives_the_limits_the_build_checks() -> None:
    page = (REPO / "docs" / "hosts.md").read_text(encoding="utf-8")
    said = [
        f"{PAGES_FREE:,} files a deployment on the Free plan, {PAGES_PAID:,}",
        f"over {PAGES_PAID:,} files, exit 2; over {PAGES_FREE:,}, a notice",
        f"{NETLIFY_PER_DIRECTORY:,} files a directory",
        f"over {NETLIFY_PER_DIRECTORY:,} articles, a notice",
    ]
    assert [text for text in said if text not in page] == []
