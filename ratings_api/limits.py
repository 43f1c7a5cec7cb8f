"""The static hosts' limits on a site's size, checked before a build writes anything.

When the build runs on a host it can recognise from the environment (its own
build machines set variables such as ``CF_PAGES`` or ``NETLIFY``) and the
catalogue is over that host's limit, ``check`` says so before anything is
written: a notice where the deploy may fail, an InputError (exit 2) where it
certainly would. Either way it names the way out: object storage, which has
no limit that matters here. docs/hosts.md's table gives each host's limit and
its source; a test holds the table to the numbers here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Final

from ratings_api.errors import InputError

OBJECT_STORAGE: Final = (
    "publish to object storage instead: python generate.py --publish s3://BUCKET[/PREFIX] "
    "(docs/deploy-object-storage.md)"
)
PAGES_FREE: Final = 20_000
PAGES_PAID: Final = 100_000
# Pages' upload leaves its rule files out of the count (wrangler's IGNORE_LIST).
PAGES_UNCOUNTED: Final = frozenset({"_redirects", "_headers", "_routes.json", "_worker.js"})
NETLIFY_PER_DIRECTORY: Final = 54_000


def check(
    articles: int, extras: Iterable[str], environ: Mapping[str, str], say: Callable[[str], None]
) -> None:
    """Refuse a catalogue a recognised host would certainly reject; ``say`` a risk."""
    if environ.get("CF_PAGES") == "1":
        files = articles + sum(1 for path in extras if path not in PAGES_UNCOUNTED)
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
    netlify = environ.get("NETLIFY") == "true" or "CONTEXT" in environ
    if netlify and articles > NETLIFY_PER_DIRECTORY:
        say(
            f"note: away/api/articles/ holds {articles:,} folders, {articles - NETLIFY_PER_DIRECTORY:,} "
            f"over the {NETLIFY_PER_DIRECTORY:,} files a directory Netlify is reported to "
            f"allow, if folders count (not confirmed); if the deploy fails, {OBJECT_STORAGE}"
        )
