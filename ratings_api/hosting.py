"""Files that static hosts read from the site folder: ``_redirects`` and ``404.html``.

Netlify and Cloudflare Pages look a folder's index up as ``index.html`` only,
so ``<id>/rating/`` needs a 200 rewrite to its ``index.json``. Where no file
answers, they send the site's ``404.html`` with status 404: ours is the API's
JSON error body, so an unknown id gets the same body there as from the app.

No rule names an article: Netlify advises against more than about 10,000
rules, and placeholder rules with a JSON ``404.html`` answer any id alike. So
the files are the same for ten articles or ten million, and a build writes
both whatever the catalogue, so that neither can be left stale from an earlier one.
"""

from __future__ import annotations

from typing import Final

from ratings_api.contract import ARTICLES_PATH, NOT_FOUND
from ratings_api.describe import render

REDIRECTS: Final = "_redirects"
NOT_FOUND_PAGE: Final = "404.html"


def hosting_files() -> dict[str, bytes]:
    """The hosts' files, by their path below the output folder: the same for any site."""
    return {
        REDIRECTS: render("hosting/_redirects.j2", articles=f"/{ARTICLES_PATH}"),
        NOT_FOUND_PAGE: NOT_FOUND,
    }
