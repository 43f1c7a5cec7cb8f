"""``away/api/embed.js``, the ``<article-rating>`` element, and ``embed.d.ts``, its types.

A hand-written ES module with no dependencies and no build step: the only
values filled in are the scale's and the built-in texts (``embed-texts.json``),
known when the site is built, so that the element draws stars without a second
request. It sits beside ``articles/`` and finds the API from its own URL,
wherever the site is published.
"""

from __future__ import annotations

import json
from typing import Final

from ratings_api.contract import ARTICLE_ID
from ratings_api.describe import TEMPLATES, render, stars_for
from ratings_api.loader import Catalogue

EMBED_PATH: Final = "away/api/embed.js"
TYPES_PATH: Final = "away/api/embed.d.ts"
MAX_GZIPPED: Final = 3072  # bytes: a test holds the element to it


def embed_files(catalogue: Catalogue) -> dict[str, bytes]:
    """The element's module and its types, by their paths below the output folder."""
    return {EMBED_PATH: embed_script(catalogue.scale), TYPES_PATH: embed_types()}


def embed_script(scale: tuple[int, int] | None) -> bytes:
    """The module's bytes for a catalogue on ``scale``: the same scale, the same bytes."""
    top = None if scale is None else scale[1]
    # By language: "Not rated yet", then the count and the label by plural category; the
    # label says the scale in the language's words, or nothing without a scale.
    texts = json.loads((TEMPLATES / "embed-texts.json").read_bytes())
    built_in = {}
    for language, text in texts.items():
        words = "" if top is None else text["scale"]
        labels = {kind: label.replace("{scale}", words) for kind, label in text["label"].items()}
        built_in[language] = [text["unrated"], text["count"], labels]
    return render(
        "embed.js.j2",
        article_id=ARTICLE_ID,
        stars=json.dumps(stars_for(scale)),
        top=json.dumps(top),
        texts=json.dumps(built_in, ensure_ascii=False, separators=(",", ":")),
    )


def embed_types() -> bytes:
    """``embed.d.ts``: the element's class, attributes and events, for TypeScript."""
    return render("embed.d.ts.j2")
