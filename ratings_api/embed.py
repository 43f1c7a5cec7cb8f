"""``away/api/embed.js``: the ``<article-rating>`` element that shows a rating on any page.

A hand-written ES module with no dependencies and no build step: the only
values filled in are the scale's, known when the site is built, so that the
element draws stars without a second request. It sits beside ``articles/``
and finds the API from its own URL, wherever the site is published.
"""

from __future__ import annotations

import functools
import json
from typing import Final

import jinja2

from ratings_api.describe import stars_for, template_environment
from ratings_api.loader import Catalogue

EMBED_PATH: Final = "away/api/embed.js"
ELEMENT: Final = "article-rating"
MAX_GZIPPED: Final = 2048  # bytes: a test holds the element to it


def embed_files(catalogue: Catalogue) -> dict[str, bytes]:
    """The element's module, by its path below the output folder."""
    return {EMBED_PATH: embed_script(catalogue.scale)}


def embed_script(scale: tuple[int, int] | None) -> bytes:
    """The module's bytes for a catalogue on ``scale``: the same scale, the same bytes."""
    return (
        _environment()
        .get_template("embed.js.j2")
        .render(
            stars=json.dumps(stars_for(scale)),
            top=json.dumps(None if scale is None else scale[1]),
        )
        .encode()
    )


@functools.cache
def _environment() -> jinja2.Environment:
    # JavaScript, not HTML: nothing to escape, and both values are JSON numbers or null.
    return template_environment(autoescape=False)
