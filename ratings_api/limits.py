"""The static hosts' limits on a site's size, checked before a build writes anything.

Each host the documentation names has a row in HOST_LIMITS, with its source.
When the build runs on a host it can recognise from the environment (its own
build machines set variables such as ``CF_PAGES`` or ``NETLIFY``) and the
catalogue is over that host's limit, ``check`` says so before anything is
written: a notice where the deploy may fail, an InputError (exit 2) where it
certainly would. Either way it names the way out: object storage, which has
no limit that matters here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from ratings_api.errors import InputError

OBJECT_STORAGE: Final = (
    "publish to object storage instead: python generate.py --publish s3://BUCKET[/PREFIX] "
    "(docs/deploy-object-storage.md)"
)


@dataclass(frozen=True)
class HostLimit:
    """A host's limit on a site, what it counts, how sure it is, and where it is said."""

    host: str
    limit: str  # as the table says it
    counts: str
    source: str
    check: str  # what the build does on this host


# One row per host the documentation names, in the docs' table order.
HOST_LIMITS: Final = (
    HostLimit(
        "Cloudflare Pages",
        "20,000 files a deployment on the Free plan, 100,000 on paid plans",
        "files only (folders do not count; `_redirects` and `_headers` neither)",
        "Cloudflare's Pages limits page; wrangler 4.80.0's own check (`Pages only supports "
        "up to 20,000 files in a deployment for your current plan`, the count its JWT "
        "allows), read in its source: it counts the files its walk finds, not folders",
        "`CF_PAGES=1`: over 100,000 files, exit 2; over 20,000, a notice (the plan is "
        "not known to the build)",
    ),
    HostLimit(
        "Netlify",
        "54,000 files a directory (as reported; not confirmed)",
        "not known whether folders count: the articles' folder holds one folder per "
        "article and no file",
        "the figure as reported to this project; not found in Netlify's documentation "
        "reachable here, nor in netlify-cli 26.2.0's deploy code (it hashes and uploads "
        "every file and checks no count), nor in its issues: low confidence",
        "`NETLIFY=true` or `CONTEXT` set: over 54,000 articles, a notice (never exit 2: "
        "the failure is not certain)",
    ),
    HostLimit(
        "Azure Static Web Apps",
        "250 MB of content on the Free plan, 500 MB on Standard",
        "bytes, not files",
        "its deploy's own error for a Standard app (`The size of the app content was too "
        "large. The limit for this Static Web App is 524288000 bytes`, dapr/docs#4792); "
        "250 MB on Free by Azure's quotas page (not reachable from here)",
        "none: its builds are not recognisable from the environment",
    ),
    HostLimit(
        "Vercel",
        "no file count found",
        "—",
        "Vercel's limits page names none for static files; the 15,000-file limit of CLI "
        "deployments (`files should NOT have more than 15000 items`, vercel/vercel#8571) "
        "was lifted (Vercel's changelog: “CLI deployment limits removed”)",
        "none (`VERCEL=1` is recognised, with no limit to apply)",
    ),
    HostLimit(
        "GitHub Pages",
        "1 GB a site",
        "bytes, not files",
        "GitHub Pages' usage limits (not reachable from here) and its deploy action's "
        "warning (`Uploaded artifact size ... exceeds the allowed size of 1 GB`); it "
        "cannot serve this API as is anyway (docs/hosts.md)",
        "none",
    ),
    HostLimit(
        "Object storage behind a CDN (S3, R2, GCS...)",
        "none that matters",
        "objects: a bucket holds any number",
        "S3's documentation: the number of objects in a bucket is unlimited",
        "none: the way out for every limit above",
    ),
)

PAGES_FREE: Final = 20_000
PAGES_PAID: Final = 100_000
# Pages' upload leaves its rule files out of the count (wrangler's IGNORE_LIST).
PAGES_UNCOUNTED: Final = frozenset({"_redirects", "_headers", "_routes.json", "_worker.js"})
NETLIFY_PER_DIRECTORY: Final = 54_000


def check(
    articles: int,
    extras: Iterable[str],
    environ: Mapping[str, str],
    notice: Callable[[str], None] | None = None,
) -> None:
    """Refuse a catalogue a recognised host would certainly reject; tell ``notice`` of a risk."""
    say = notice or (lambda _text: None)
    if environ.get("CF_PAGES") == "1":
        _pages(articles + sum(1 for path in extras if path not in PAGES_UNCOUNTED), say)
    if environ.get("NETLIFY") == "true" or "CONTEXT" in environ:
        _netlify(articles, say)


def _pages(files: int, say: Callable[[str], None]) -> None:
    if files > PAGES_PAID:
        raise InputError(
            f"{files:,} files (and any of yours) are over Cloudflare Pages' limit of "
            f"{PAGES_PAID:,} files a deployment by {files - PAGES_PAID:,}: the deploy would "
            f"fail; {OBJECT_STORAGE}"
        )
    if files > PAGES_FREE:
        say(
            f"note: {files:,} files (and any of yours) are over Cloudflare Pages' Free plan "
            f"limit of {PAGES_FREE:,} files a deployment by {files - PAGES_FREE:,}: the "
            f"deploy fails unless the project is on a paid plan ({PAGES_PAID:,}); "
            f"or {OBJECT_STORAGE}"
        )


def _netlify(articles: int, say: Callable[[str], None]) -> None:
    if articles > NETLIFY_PER_DIRECTORY:
        say(
            f"note: away/api/articles/ holds {articles:,} folders, {articles - NETLIFY_PER_DIRECTORY:,} "
            f"over the {NETLIFY_PER_DIRECTORY:,} files a directory Netlify is reported to "
            f"allow, if folders count (not confirmed); if the deploy fails, {OBJECT_STORAGE}"
        )
