"""Files that static hosts read from the site folder: ``_redirects`` and ``404.html``.

Netlify and Cloudflare Pages look a folder's index up as ``index.html`` only,
so ``<id>/rating/`` needs a 200 rewrite to its ``index.json``. Where no file
answers, they send the site's ``404.html`` with status 404: ours is the API's
JSON error body, so an unknown id gets the same body there as from the app.

No rule names an article. Rules written for each id, followed by a
catch-all JSON 404, would also answer an unknown id with the JSON error, but
Netlify advises against more than about 10,000 rules; with a JSON
``404.html`` placeholder rules do the same at any size. So the files are the
same for ten articles or ten million, and a build writes both whatever the
catalogue, so that neither can be left stale from an earlier one.
"""

from __future__ import annotations

import functools
import json
from typing import Final

import jinja2

from ratings_api.describe import NOT_FOUND, template_environment
from ratings_api.loader import Catalogue
from ratings_api.rating import ARTICLES_PATH

REDIRECTS: Final = "_redirects"
NOT_FOUND_PAGE: Final = "404.html"


def hosting_files(catalogue: Catalogue, base_url: str) -> dict[str, bytes]:
    """The hosts' files, by their path below the output folder."""
    del catalogue, base_url  # the same rules serve any catalogue, on any host name
    return {
        REDIRECTS: redirects(),
        NOT_FOUND_PAGE: not_found_page(),
    }


def redirects() -> bytes:
    """``_redirects``: ``<id>/rating/`` rewritten to its ``index.json``."""
    template = _environment().get_template("hosting/_redirects.j2")
    return template.render(articles=f"/{ARTICLES_PATH}").encode()


def not_found_page() -> bytes:
    """``404.html``: the JSON body of the app's 404, which hosts send for any missing file."""
    return json.dumps(NOT_FOUND).encode() + b"\n"


@functools.cache
def _environment() -> jinja2.Environment:
    # Not HTML: nothing to escape, and the only value is a constant path.
    return template_environment(autoescape=False, trim_blocks=True, lstrip_blocks=True)
