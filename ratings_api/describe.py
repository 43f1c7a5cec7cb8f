"""The files that describe the API beside its documents: the OpenAPI document, the front page.

Both come from a few passes over the catalogue's columns (the best rated with a
heap, the smallest id not rated yet, the largest id); nothing is written per
article. The OpenAPI document is templates/openapi.json with this build's values
filled in, dumped by ``json``; the front page a Jinja template, autoescaped: the
base URL is the user's text. Its script, style sheet and icon are files of their
own, for a Content-Security-Policy without ``'unsafe-inline'``. ``render`` is the
package's one way to fill a Jinja template.
"""

from __future__ import annotations

import heapq
import json
import operator
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress
from pathlib import Path
from typing import Any, Final

import jinja2

from ratings_api import contract
from ratings_api.loader import Catalogue
from ratings_api.rating import Renderer, article_url, rating_value
from ratings_api.rules import ID_TEXT

# Package data: installed with the package, found beside this file.
TEMPLATES: Final = Path(__file__).resolve().parent / "templates"
OPENAPI_PATH: Final = "away/api/openapi.json"
# Copied as they are: nothing in them depends on the catalogue.
ASSETS: Final = ("assets/front-page.js", "assets/front-page.css", "assets/star.svg")
BEST_RATED: Final = 10  # rows in the front page's table
MAX_STARS: Final = 10  # a wider scale is shown as a number only

# The page repeats the policy in a <meta> element, so that it holds on a host
# that sends no header. Browsers ignore frame-ancestors there (and warn).
META_CSP: Final = "; ".join(
    part for part in contract.FRONT_PAGE_CSP.split("; ") if not part.startswith("frame-ancestors")
)

PLACEHOLDER: Final = re.compile(r"\{([^{}]+)\}")  # a value of the build, in the OpenAPI template
# The characters a regular expression gives a meaning to, in Python as in
# ECMAScript: escaped, each with a backslash, they are literal in both, so the base
# URL is matched as it is by any flavour JSON Schema meets.
REGEX_SYNTAX: Final = re.compile(r"([\\^$.|?*+()\[\]{}])")


@dataclass(frozen=True)
class Article:
    """One article's numbers, as the front page and the examples show them."""

    id: int
    total: int
    count: int

    @property
    def value(self) -> str:
        return rating_value(self.total, self.count)

    def document(self, base_url: str) -> bytes:
        """Its document, as the build writes it."""
        return Renderer(base_url)(self.id, self.total, self.count)


def describe_files(catalogue: Catalogue, base_url: str) -> dict[str, bytes]:
    """Generated files beside the documents, by their path below the output folder."""
    best = best_rated(catalogue)
    # Real articles of the catalogue to show: the best rated, one not rated yet.
    candidates = (("rated", next(iter(best), None)), ("unrated", first_unrated(catalogue)))
    shown = {name: article for name, article in candidates if article is not None}
    example = next(iter(shown.values()), None)  # on the front page
    return {
        OPENAPI_PATH: openapi_document(catalogue, base_url, shown),
        contract.FRONT_PAGE: front_page(catalogue, base_url, best, example),
        **{name: (TEMPLATES / name).read_bytes() for name in ASSETS},
    }


def best_rated(catalogue: Catalogue, size: int = BEST_RATED) -> list[Article]:
    """The ``size`` rated articles with the highest average, as shown to one decimal.

    Articles that show the same average come by their number of ratings, most
    first, then by id. The key is the value in tenths, rounded as
    ``rating_value`` rounds (half away from zero), in integers only; a generator
    of tuples is the cheapest shape for heapq: no key function to call.
    """
    rated = (
        ((20 * t + c) // (2 * c) if t >= 0 else -((c - 20 * t) // (2 * c)), c, -i, t)
        for i, t, c in zip(catalogue.ids, catalogue.sums, catalogue.counts, strict=True)
        if c
    )
    return [Article(-i, t, c) for _, c, i, t in heapq.nlargest(size, rated)]


def first_unrated(catalogue: Catalogue) -> Article | None:
    """The article with the smallest id among those not rated yet, if any."""
    smallest = min(compress(catalogue.ids, map(operator.not_, catalogue.counts)), default=None)
    return None if smallest is None else Article(smallest, 0, 0)


def missing_id(ids: Sequence[int]) -> int:
    """An id that no article has, for the examples of a 404: one past the largest, usually."""
    largest = max(ids, default=0)
    if largest < contract.MAX_ID:
        return largest + 1
    # Only when an article has the very largest id: one of 1 to len + 1 is free.
    return min(set(range(1, len(ids) + 2)) - set(ids))


# The OpenAPI document


def openapi_document(catalogue: Catalogue, base_url: str, shown: dict[str, Article]) -> bytes:
    """The OpenAPI 3.1 description of the API as this build publishes it.

    templates/openapi.json is the document, with this build's values for its "{name}"s
    (``_filled``): the contract's, the catalogue's, and the examples: the articles
    ``shown``, by name, and "unlisted", an id no article has.
    """
    prefix = article_url(base_url, 0)[: -len("0/")]
    values: dict[str, Any] = {
        **dict(contract.COMMON_HEADERS),
        "not_found": json.loads(contract.NOT_FOUND),
        "articles": f"{len(catalogue.ids):,}",
        "scale": ", rated on the scale {}..{}".format(*catalogue.scale) if catalogue.scale else "",
        "base_url": base_url,
        "url_format": "uri" if prefix.isascii() else "iri",
        "url_pattern": "^" + REGEX_SYNTAX.sub(r"\\\1", prefix) + ID_TEXT.pattern + "/$",
        "min": -contract.MAX_ID,  # every integer of a document lies within ±MAX_ID (rules.py)
        "max": contract.MAX_ID,
        "unlisted": missing_id(catalogue.ids),
        **{name: article.id for name, article in shown.items()},
        **{f"{n}_document": json.loads(a.document(base_url)) for n, a in shown.items()},
    }
    document = _filled(json.loads((TEMPLATES / "openapi.json").read_bytes()), values)
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode()  # for people too


def _filled(node: Any, values: dict[str, Any]) -> Any:
    """``node`` of the template with ``values`` in: a text that is one "{name}" becomes that
    value (a number, a document), any other is filled in by ``str.format``; of each
    "examples", only those of articles this build has (``_shown``)."""
    if isinstance(node, str):
        whole = PLACEHOLDER.fullmatch(node)
        return values[whole[1]] if whole and whole[1] in values else node.format_map(values)
    if isinstance(node, list):
        return [_filled(item, values) for item in node]
    if not isinstance(node, dict):
        return node
    kept = {k: _shown(v, values) if k == "examples" else v for k, v in node.items()}
    return {k: _filled(v, values) for k, v in kept.items() if k != "examples" or v}


def _shown(examples: Any, values: dict[str, Any]) -> Any:
    """The ``examples`` whose article this build has: an example is named, by its key or as
    the one "{name}" it is, after an article that a catalogue may lack (the best rated,
    one not rated yet). An "examples" left empty is left out."""
    if isinstance(examples, dict):
        return {name: example for name, example in examples.items() if name in values}
    return [example for example in examples if example[1:-1] in values]


# The front page


# The package's templates: an unknown name is an error, the last newline is kept, and
# only HTML is escaped (JavaScript and ``_redirects`` get numbers and paths).
ENVIRONMENT: Final = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    autoescape=jinja2.select_autoescape(["html.j2"]),
)


def render(template: str, **values: Any) -> bytes:
    """The template ``template`` of ratings_api/templates/, filled in, as UTF-8."""
    return ENVIRONMENT.get_template(template).render(**values).encode()


def front_page(
    catalogue: Catalogue, base_url: str, best: list[Article], example: Article | None
) -> bytes:
    """The front page, ``index.html``: what the API is, how to call it, a lookup, the best rated."""
    sample_id = example.id if example is not None else 1
    document = None if example is None else example.document(base_url)
    return render(
        "index.html.j2",
        meta_csp=META_CSP,
        base_url=base_url,
        articles_path=contract.ARTICLES_PATH,
        article_id=contract.ARTICLE_ID,
        openapi_path=OPENAPI_PATH,
        assets=ASSETS,
        curl=f"curl {shlex.quote(article_url(base_url, sample_id) + 'rating/')}",
        sample_id=sample_id,
        example_document=None if document is None else document.decode().rstrip("\n"),
        articles=len(catalogue.ids),
        ratings=sum(catalogue.counts),
        scale=catalogue.scale,
        stars=stars_for(catalogue.scale),
        best=best,
    )


def stars_for(scale: tuple[int, int] | None) -> int | None:
    """How many stars show an average: the top of a scale from 0 or 1 up to MAX_STARS, else none."""
    if scale is None or scale[0] not in (0, 1) or not 2 <= scale[1] <= MAX_STARS:
        return None
    return scale[1]
