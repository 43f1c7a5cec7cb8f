"""Files that describe the API beside its documents: an OpenAPI document and a front page.

Both come from a few cheap passes over the catalogue's lists (the best-rated
few with a heap, the smallest id not rated yet, the largest id), so a million
articles add about 0.15 s to a build and nothing is written per article. The OpenAPI document is a dict dumped by ``json``; the front page is
a Jinja template with autoescape on, because the base URL is the user's text
and may hold ``<``, ``&`` or quotes. The page's script, style sheet and icon
are separate files, so that a Content-Security-Policy without
``'unsafe-inline'`` allows them.
"""

from __future__ import annotations

import functools
import heapq
import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import count as counting
from pathlib import Path
from typing import Any, Final

import jinja2

from ratings_api.loader import MAX_ID, Catalogue
from ratings_api.rating import ARTICLES_PATH, Renderer, article_url, rating_value

# Package data: installed with the package, found beside this file.
TEMPLATES: Final = Path(__file__).resolve().parent / "templates"
FRONT_PAGE: Final = "index.html"
OPENAPI_PATH: Final = "away/api/openapi.json"
# Copied as they are: nothing in them depends on the catalogue.
ASSETS: Final = ("assets/front-page.js", "assets/front-page.css", "assets/star.svg")
BEST_RATED: Final = 10  # rows in the front page's table
MAX_STARS: Final = 10  # a wider scale is shown as a number only

# Everything the front page uses comes from its own site: its script, its style
# sheet, its icon and the API it fetches. Nothing inline, nothing from elsewhere.
FRONT_PAGE_CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
# The page repeats the policy in a <meta> element, so that it holds on a host
# that sends no header. Browsers ignore frame-ancestors there (and warn).
META_CSP: Final = "; ".join(
    part for part in FRONT_PAGE_CSP.split("; ") if not part.startswith("frame-ancestors")
)

RATING_PATH: Final = f"/{ARTICLES_PATH}/{{id}}/rating/"
RATING_VALUE_PATTERN: Final = r"^-?[0-9]+\.[0-9]$"
FIELDS: Final = ("article_url", "id", "rating_sum", "rating_count", "rating_value")
NOT_FOUND: Final = {"detail": "Not found."}
# The characters a regular expression gives a meaning to, in Python as in
# ECMAScript: escaped, each with a backslash, they are literal in both.
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


@dataclass(frozen=True)
class Examples:
    """Real articles of the catalogue to show: the best rated, one not rated yet, an unused id."""

    rated: Article | None
    unrated: Article | None
    unlisted: int

    @property
    def first(self) -> Article | None:
        """The article to show first: the best rated, else one not rated yet."""
        return self.rated or self.unrated


def describe_files(catalogue: Catalogue, base_url: str) -> dict[str, bytes]:
    """Generated files beside the documents, by their path below the output folder."""
    best = best_rated(catalogue)
    examples = Examples(
        best[0] if best else None, first_unrated(catalogue), missing_id(catalogue.ids)
    )
    files = {
        OPENAPI_PATH: openapi_bytes(openapi_document(catalogue, base_url, examples)),
        FRONT_PAGE: front_page(catalogue, base_url, best, examples.first),
    }
    for name in ASSETS:
        files[name] = (TEMPLATES / name).read_bytes()
    return files


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
    smallest = min(
        (i for i, c in zip(catalogue.ids, catalogue.counts, strict=True) if not c), default=None
    )
    return None if smallest is None else Article(smallest, 0, 0)


def missing_id(ids: Sequence[int]) -> int:
    """An id that no article has, for the examples of a 404: one past the largest, usually."""
    largest = max(ids, default=0)
    if largest < MAX_ID:
        return largest + 1
    present = set(ids)  # only when an article has the very largest id
    return next(i for i in counting(1) if i not in present)


# The OpenAPI document


def openapi_bytes(document: dict[str, Any]) -> bytes:
    """The document as UTF-8 JSON: indented, as people read it too, and one trailing newline."""
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode()


def openapi_document(catalogue: Catalogue, base_url: str, examples: Examples) -> dict[str, Any]:
    """The OpenAPI 3.1 description of the API as this build publishes it."""
    return {
        "openapi": "3.1.0",
        "info": _info(catalogue),
        "servers": [{"url": base_url, "description": "where this build is published"}],
        "tags": [{"name": "ratings", "description": "Reader ratings of articles."}],
        "paths": {RATING_PATH: {"get": _operation(base_url, examples)}},
        "components": {
            "schemas": {
                "Rating": _rating_schema(catalogue, base_url, examples),
                "NotFound": _not_found_schema(),
            },
            "parameters": {"ArticleId": _article_id(examples)},
            "headers": _headers(),
        },
    }


def _info(catalogue: Catalogue) -> dict[str, Any]:
    return {
        "title": "Article ratings",
        "version": "1.0.0",
        "summary": "The reader ratings of articles, one static JSON document per article.",
        "description": (
            "A read-only API of static files, generated from one ratings file. "
            f"This build lists {len(catalogue.ids):,} articles{_scale_text(catalogue.scale)}. "
            "Every response, errors included, carries `Access-Control-Allow-Origin: *`, "
            "so any web page may read it. `HEAD` answers as `GET` without a body; "
            "other methods answer 405 with an `Allow` header; the path without its "
            "trailing slash redirects (301) to the one with it."
        ),
    }


def _scale_text(scale: tuple[int, int] | None) -> str:
    return f", rated on the scale {scale[0]}..{scale[1]}" if scale else ""


def _operation(base_url: str, examples: Examples) -> dict[str, Any]:
    json_ok: dict[str, Any] = {"schema": {"$ref": "#/components/schemas/Rating"}}
    documents = {
        name: {"summary": summary, "value": _document(base_url, article)}
        for name, summary, article in (
            ("rated", f"Article {_id(examples.rated)}, the best rated", examples.rated),
            (
                "unrated",
                f"Article {_id(examples.unrated)}, listed but not rated yet",
                examples.unrated,
            ),
        )
        if article is not None
    }
    if documents:
        json_ok["examples"] = documents
    common = {name: {"$ref": f"#/components/headers/{name}"} for name in _COMMON_HEADERS}
    validators = {name: {"$ref": f"#/components/headers/{name}"} for name in _VALIDATORS}
    return {
        "operationId": "retrieveArticleRating",
        "summary": "The rating of one article",
        "description": (
            "The sum, count and average of the article's ratings. An article that "
            'is listed but not rated yet has a count of 0 and the value `"0.0"`. '
            "Send `If-None-Match` with the `ETag` to be answered 304 when nothing changed."
        ),
        "tags": ["ratings"],
        "parameters": [{"$ref": "#/components/parameters/ArticleId"}],
        "responses": {
            "200": {
                "description": "The article's rating.",
                "headers": {**validators, **common},
                "content": {"application/json": json_ok},
            },
            "304": {
                "description": "Not modified: the copy the client holds is current.",
                "headers": {"ETag": validators["ETag"], **common},
            },
            "404": {
                "description": "No article has this id.",
                "headers": common,
                "content": {
                    "application/json": {
                        "schema": {"$ref": "#/components/schemas/NotFound"},
                        "example": NOT_FOUND,
                    }
                },
            },
        },
    }


def _document(base_url: str, article: Article) -> dict[str, Any]:
    """The article's document as the build writes it, in its field order."""
    document: dict[str, Any] = json.loads(
        Renderer(base_url)(article.id, article.total, article.count)
    )
    return document


def _id(article: Article | None) -> int | None:
    return None if article is None else article.id


def _article_id(examples: Examples) -> dict[str, Any]:
    values = {
        name: {"summary": summary, "value": value}
        for name, summary, value in (
            ("rated", "The best-rated article: 200", _id(examples.rated)),
            ("unrated", "An article not rated yet: 200", _id(examples.unrated)),
            ("unlisted", "An id no article has: 404", examples.unlisted),
        )
        if value is not None
    }
    return {
        "name": "id",
        "in": "path",
        "required": True,
        "description": "The article's id: a positive integer in plain decimal, at most 2^63-1.",
        "schema": {"type": "integer", "minimum": 1, "maximum": MAX_ID},
        "examples": values,
    }


def _rating_schema(catalogue: Catalogue, base_url: str, examples: Examples) -> dict[str, Any]:
    prefix = article_url(base_url, 0)[: -len("0/")]
    properties = {
        "article_url": {
            "type": "string",
            "format": "uri" if prefix.isascii() else "iri",
            "pattern": f"^{regex_literal(prefix)}[1-9][0-9]*/$",
            "description": "The article's absolute URL.",
        },
        "id": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_ID,
            "description": "The article's id.",
        },
        "rating_sum": {"type": "integer", "description": "The sum of its ratings."},
        "rating_count": {
            "type": "integer",
            "minimum": 0,
            "description": "The number of its ratings.",
        },
        "rating_value": {
            "type": "string",
            "pattern": RATING_VALUE_PATTERN,
            "description": (
                "rating_sum / rating_count with exactly one decimal, ties rounded away "
                f'from zero; "0.0" when rating_count is 0{_scale_text(catalogue.scale)}.'
            ),
        },
    }
    schema: dict[str, Any] = {
        "type": "object",
        "description": f"One article's rating. The fields always come in this order: {', '.join(FIELDS)}.",
        "required": list(FIELDS),
        "properties": properties,
        "additionalProperties": False,
    }
    documents = [
        _document(base_url, a) for a in (examples.rated, examples.unrated) if a is not None
    ]
    if documents:
        schema["examples"] = documents
    return schema


def regex_literal(text: str) -> str:
    """``text`` as a regular expression that matches just it, in any flavour JSON Schema meets."""
    return REGEX_SYNTAX.sub(r"\\\1", text)


def _not_found_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "The error body, in the style of Django REST framework.",
        "required": ["detail"],
        "properties": {"detail": {"type": "string", "const": NOT_FOUND["detail"]}},
        "additionalProperties": False,
        "examples": [NOT_FOUND],
    }


_COMMON_HEADERS: Final = {
    "Access-Control-Allow-Origin": (
        "Any origin may read the response.",
        {"type": "string", "const": "*"},
    ),
    "X-Content-Type-Options": (
        "Browsers take the Content-Type as sent.",
        {"type": "string", "const": "nosniff"},
    ),
    "Cache-Control": (
        "Caches may keep a copy but revalidate it: ratings change at every deploy.",
        {"type": "string"},
    ),
}
_VALIDATORS: Final = {
    "ETag": (
        "Changes whenever the document does: send it back in If-None-Match.",
        {"type": "string"},
    ),
    "Last-Modified": ("When the document was last written.", {"type": "string"}),
}
# Not every static host sends Last-Modified (ETag is the validator to use): optional.
_OPTIONAL_HEADERS: Final = frozenset({"Last-Modified"})


def _headers() -> dict[str, Any]:
    return {
        name: {
            "description": description,
            "required": name not in _OPTIONAL_HEADERS,
            "schema": schema,
        }
        for name, (description, schema) in {**_COMMON_HEADERS, **_VALIDATORS}.items()
    }


# The front page


def template_environment(**options: Any) -> jinja2.Environment:
    """The package's templates: an unknown name is an error, the last newline is kept."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        **options,
    )


@functools.cache
def _environment() -> jinja2.Environment:
    return template_environment(autoescape=True)


def front_page(
    catalogue: Catalogue, base_url: str, best: list[Article], example: Article | None
) -> bytes:
    """The front page, ``index.html``: what the API is, how to call it, a lookup, the best rated."""
    sample_id = example.id if example is not None else 1
    sample_url = f"{base_url}/{ARTICLES_PATH}/{sample_id}/rating/"
    document = (
        None if example is None else Renderer(base_url)(example.id, example.total, example.count)
    )
    page = (
        _environment()
        .get_template("index.html.j2")
        .render(
            meta_csp=META_CSP,
            base_url=base_url,
            articles_path=ARTICLES_PATH,
            openapi_path=OPENAPI_PATH,
            assets=ASSETS,
            curl=f"curl {shlex.quote(sample_url)}",
            sample_id=sample_id,
            example_document=None if document is None else document.decode().rstrip("\n"),
            articles=len(catalogue.ids),
            ratings=sum(catalogue.counts),
            scale=catalogue.scale,
            stars=stars_for(catalogue.scale),
            best=best,
        )
    )
    return page.encode()


def stars_for(scale: tuple[int, int] | None) -> int | None:
    """How many stars show an average: the top of a scale from 0 or 1 up to MAX_STARS, else none."""
    if scale is None or scale[0] not in (0, 1) or not 2 <= scale[1] <= MAX_STARS:
        return None
    return scale[1]
