"""The HTTP contract of the API (docs/http-api.md), as data: every host answers by it.

The app (ratings_api/server.py), the publisher's object metadata
(ratings_api/publish.py) and the API's description read these values; the hosts'
configuration in deploy/ and netlify.toml is rendered from them. No third-party
import: a host's build or an edge's test can read it alone.
"""

from __future__ import annotations

import json
from typing import Final

ARTICLES_PATH: Final = "away/api/articles"
MAX_ID: Final = 2**53 - 1  # the largest integer every JSON reader reads exactly (RFC 7493, §2.2)
# An article id as a URL names it: no sign, no leading zero, no more digits than MAX_ID.
ARTICLE_ID: Final = rf"[1-9][0-9]{{0,{len(str(MAX_ID)) - 1}}}"

ALLOW: Final = "GET, HEAD, OPTIONS"
# Ratings change at every deploy, and a deploy cannot purge browsers' caches:
# caches may keep a copy but must ask again each time, which costs a 304.
CACHE_CONTROL: Final = "public, max-age=0, must-revalidate"
PREFLIGHT_MAX_AGE: Final = 86400  # seconds; browsers cap it lower anyway (Chrome: 2 hours)
# On every response, errors and 304s too: a browser reads a cross-origin
# response, even a 404 or a redirect, only if it carries CORS headers.
COMMON_HEADERS: Final = (
    ("Access-Control-Allow-Origin", "*"),
    ("X-Content-Type-Options", "nosniff"),
    ("Cache-Control", CACHE_CONTROL),
)
PREFLIGHT: Final = (
    ("Allow", ALLOW),
    ("Access-Control-Allow-Methods", ALLOW),
    ("Access-Control-Allow-Headers", "*"),
    ("Access-Control-Max-Age", str(PREFLIGHT_MAX_AGE)),
)

# Everything the front page uses comes from its own site: its script, its style
# sheet, its icon and the API it fetches. Nothing inline, nothing from elsewhere.
FRONT_PAGE: Final = "index.html"
FRONT_PAGE_CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

# The Content-Type of each kind of file the site has, as every host sends it.
CONTENT_TYPES: Final = {
    ".json": "application/json",
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".ts": "text/plain; charset=utf-8",  # embed.d.ts is text to read, as npm's CDNs send it
    ".svg": "image/svg+xml",
}
ERROR_TYPE: Final = "application/json"


def json_body(detail: str) -> bytes:
    """An error body in the style of Django REST framework, ending in a newline as documents."""
    return json.dumps({"detail": detail}).encode() + b"\n"


NOT_FOUND: Final = json_body("Not found.")
SERVER_ERROR: Final = json_body("A server error occurred.")  # Django REST framework's words


def not_allowed(method: str) -> bytes:
    """The 405's body for ``method``."""
    return json_body(f'Method "{method}" not allowed.')
