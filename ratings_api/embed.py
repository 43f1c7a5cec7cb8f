"""``away/api/embed.js``: the ``<article-rating>`` element that shows a rating on any page.

A hand-written ES module with no dependencies and no build step: the only
values filled in are the scale's, known when the site is built, so that the
element draws stars without a second request. It sits beside ``articles/``
and finds the API from its own URL, wherever the site is published.
"""

from __future__ import annotations

import json
from typing import Final

from ratings_api.describe import render, stars_for
from ratings_api.loader import Catalogue

EMBED_PATH: Final = "away/api/embed.js"
MAX_GZIPPED: Final = 2048  # bytes: a test holds the element to it


def embed_files(catalogue: Catalogue) -> dict[str, bytes]:
    """The element's module, by its path below the output folder."""
    return {EMBED_PATH: embed_script(catalogue.scale)}


def embed_script(scale: tuple[int, int] | None) -> bytes:
    """The module's bytes for a catalogue on ``scale``: the same scale, the same bytes."""
    top = None if scale is None else scale[1]
    return render("embed.js.j2", stars=json.dumps(stars_for(scale)), top=json.dumps(top))
