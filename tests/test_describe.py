"""The files that describe the API: what holds for any catalogue and any base URL (their bytes
are golden cases): valid OpenAPI whose examples are the documents, a front page that passes its
own policy, a hostile base URL that stays data.
"""

from __future__ import annotations

import json
import random
import re
import shlex
from dataclasses import dataclass
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path
from typing import Final

import pytest
from openapi_schema_validator import OAS31Validator
from openapi_spec_validator import OpenAPIV31SpecValidator

from ratings_api.contract import MAX_ID
from ratings_api.describe import BEST_RATED, META_CSP, TEMPLATES, Article, best_rated
from ratings_api.loader import Catalogue

CASES: Final = Path(__file__).parent / "cases/valid"
RATING_PATH: Final = "/away/api/articles/{id}/rating/"
# The golden case of everything a base URL may hold that means something in HTML, in a shell
# or in a regex (its args): its front page's bytes are the build's (tests/test_cases.py).
HOSTILE: Final = CASES / "hostile-base-url/expected"
HOSTILE_URL: Final = "https://example.com/<script>alert('x')</script>&amp;\"$(id)`id`(a|b)+.*"
# The golden cases that hold the OpenAPI document: the sample, no articles, none rated, none
# unrated, no scale and negative, the bounds, a CSV, a Unicode and a hostile base URL.
DESCRIBED: Final = sorted(CASES.glob("*/expected/away/api/openapi.json"))


# Fields a document cannot hold: past the bounds, or another site's URL.
WRONG: Final = (
    {"id": MAX_ID + 1},
    {"rating_count": MAX_ID + 1},
    {"rating_sum": -MAX_ID - 1},
    {"article_url": "https://elsewhere.example/away/api/articles/7/"},
)


# What the page's style sheet and script must not hold: what loads or runs more than they are.
UNSAFE: Final = {
    "css": r"@import|url\(",
    "js": r"innerHTML|outerHTML|eval\(|new Function|document\.write|setAttribute\(\"style",
}


def rating_document(site: Path, article_id: int) -> bytes:
    return (site / f"away/api/articles/{article_id}/rating/index.json").read_bytes()


def dumped(document: object) -> bytes:
    """``document`` as ``json`` dumps it, as the build's documents are."""
    return (json.dumps(document, ensure_ascii=False) + "\n").encode()


# The OpenAPI document


@pytest.mark.parametrize("path", DESCRIBED, ids=lambda path: path.parents[3].name)
def test_every_description_is_valid_and_its_examples_are_the_documents(path: Path) -> None:
    """Its bytes are the golden case's (tests/test_cases.py); the documents beside it too."""
    document = json.loads(path.read_bytes())
    OpenAPIV31SpecValidator(document).validate()
    site, server = path.parents[2], document["servers"][0]["url"]
    validator = OAS31Validator(document["components"]["schemas"]["Rating"])
    for found in (site / "away/api/articles").glob("*/rating/index.json"):  # every document
        rating = json.loads(found.read_bytes())
        assert dumped(rating) == found.read_bytes()  # the Renderer's bytes are json's
        validator.validate(rating)
        assert rating["article_url"] == f"{server}/away/api/articles/{rating['id']}/"
        assert [wrong for wrong in WRONG if validator.is_valid(rating | wrong)] == []
    ids = document["components"]["parameters"]["ArticleId"]["examples"]
    assert not (site / "away/api/articles" / str(ids.pop("unlisted")["value"])).exists()
    # The examples of a 200 are the very files, fields in order, dumped as the build dumps them.
    operation = document["paths"][RATING_PATH]["get"]
    content = operation["responses"]["200"]["content"]["application/json"]
    shown = {key: example["value"] for key, example in content.get("examples", {}).items()}
    examples = {key: dumped(value) for key, value in shown.items()}
    assert examples == {key: rating_document(site, id_["value"]) for key, id_ in ids.items()}
    assert document["components"]["schemas"]["Rating"].get("examples", []) == list(shown.values())


# What the description is made of


@pytest.mark.parametrize("seed", range(20))
def test_best_rated_agrees_with_the_slow_ranking(seed: int) -> None:
    """The ranking, the slow and obvious way: by the value shown, then ratings, then id."""
    rng = random.Random(seed)
    ids = rng.sample(range(1, 10_000), 300)
    counts = [rng.randint(0, 10) for _ in ids]  # small: many ties, of value and of count
    scales = [rng.choice([(1, 5), (-1, 1), (0, 10), (-10, 10)]) for _ in ids]
    sums = [
        sum(rng.randint(*scale) for _ in range(n)) for scale, n in zip(scales, counts, strict=True)
    ]
    rated = [Article(*numbers) for numbers in zip(ids, sums, counts, strict=True) if numbers[2]]
    rated.sort(key=lambda article: (-Decimal(article.value), -article.count, article.id))
    assert best_rated(Catalogue(ids, sums, counts)) == rated[:BEST_RATED]


# The front page


@dataclass
class Element:
    tag: str
    attributes: dict[str, str]
    text: str = ""


class PageParser(HTMLParser):
    """The page as a list of elements, each with its attributes and its whole text."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[Element] = []
        self.open: list[Element] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append(Element(tag, {name: value or "" for name, value in attrs}))
        if tag not in ("meta", "link", "input", "br", "img"):  # void elements
            self.open.append(self.elements[-1])

    def handle_endtag(self, tag: str) -> None:
        assert self.open.pop().tag == tag, f"</{tag}> closes another element"

    def handle_data(self, data: str) -> None:
        for element in self.open:
            element.text += data


def test_the_front_page_passes_its_own_policy_and_a_hostile_base_url_stays_data() -> None:
    """Nothing inline, nothing from elsewhere: all the policy allows is the site's own files,
    whatever the base URL holds; on the page it is data (in the OpenAPI document: above)."""
    parser = PageParser()
    parser.feed((HOSTILE / "index.html").read_text(encoding="utf-8"))
    parser.close()
    assert not parser.open, [element.tag for element in parser.open]  # each element closed
    elements = parser.elements
    # The policy, once; one script, the site's own (none from the base URL); no style element.
    policy = [e for e in elements if e.tag in ("script", "style") or "http-equiv" in e.attributes]
    assert policy == [
        Element("meta", {"http-equiv": "Content-Security-Policy", "content": META_CSP}),
        Element("script", {"src": "assets/front-page.js", "defer": ""}),
    ]
    for element in elements:
        assert "style" not in element.attributes, element
        assert not any(name.startswith("on") for name in element.attributes), element
        for name in ("href", "src", "action"):
            url = element.attributes.get(name, "")
            assert not re.match(r"[a-z]+:|//", url), url  # relative: this site only
    for kind, unsafe in UNSAFE.items():  # the page's style sheet and script, copied as they are
        source = (TEMPLATES / f"assets/front-page.{kind}").read_text()
        assert re.findall(unsafe, source) == [], kind
    # The curl line, pasted in a shell, asks for exactly the URL.
    text = {e.attributes.get("id"): e.text for e in elements}
    assert shlex.split(text["curl"]) == ["curl", f"{HOSTILE_URL}/away/api/articles/3/rating/"]
    assert text["example"] == rating_document(HOSTILE, 3).decode().rstrip("\n")
