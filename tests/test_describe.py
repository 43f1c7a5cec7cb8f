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
from ratings_api.describe import BEST_RATED, META_CSP, Article, best_rated
from ratings_api.loader import Catalogue
from ratings_api.rating import rating_value
from tests.sample import SAMPLE
from tests.trees import built

REPO: Final = Path(__file__).resolve().parent.parent
OPENAPI: Final = "away/api/openapi.json"
RATING_PATH: Final = "/away/api/articles/{id}/rating/"
# Everything a base URL may hold that means something in HTML, in a shell or in a regex.
HOSTILE_URL: Final = "https://example.com/<script>alert('x')</script>&amp;\"$(id)`id`(a|b)+.*"
# The golden cases that hold the OpenAPI document: the sample, no articles, none rated, none
# unrated, no scale and negative, the bounds, a CSV, a Unicode and a hostile base URL.
DESCRIBED: Final = sorted(REPO.glob(f"tests/cases/valid/*/expected/{OPENAPI}"))


def rating_document(site: Path, article_id: int) -> bytes:
    return (site / f"away/api/articles/{article_id}/rating/index.json").read_bytes()


# The OpenAPI document


@pytest.mark.parametrize("path", DESCRIBED, ids=lambda path: path.parents[3].name)
def test_every_description_is_valid_and_its_examples_are_the_documents(path: Path) -> None:
    """Its bytes are the golden case's (tests/test_cases.py); the documents beside it too."""
    document = json.loads(path.read_bytes())
    OpenAPIV31SpecValidator(document).validate()
    site = path.parents[2]
    validator = OAS31Validator(document["components"]["schemas"]["Rating"])
    for found in (site / "away/api/articles").glob("*/rating/index.json"):  # every document
        validator.validate(json.loads(found.read_bytes()))
        for past in ({"id": MAX_ID + 1}, {"rating_count": MAX_ID + 1}, {"rating_sum": -MAX_ID - 1}):
            assert not validator.is_valid(json.loads(found.read_bytes()) | past), past
    ids = document["components"]["parameters"]["ArticleId"]["examples"]
    assert {"unlisted"} <= set(ids) <= {"rated", "unrated", "unlisted"}
    assert not (site / "away/api/articles" / str(ids["unlisted"]["value"])).exists()
    # The examples of a 200 are the very files, fields in order, dumped as the build dumps them.
    operation = document["paths"][RATING_PATH]["get"]
    content = operation["responses"]["200"]["content"]["application/json"]
    shown = {key: example["value"] for key, example in content.get("examples", {}).items()}
    assert list(shown) == [key for key in ("rated", "unrated") if key in ids]
    for key, example in shown.items():
        dumped = json.dumps(example, ensure_ascii=False) + "\n"
        assert dumped.encode() == rating_document(site, ids[key]["value"])
    assert document["components"]["schemas"]["Rating"].get("examples", []) == list(shown.values())


# What the description is made of


def reference_best(articles: dict[int, tuple[int, int]]) -> list[Article]:
    """The ranking, the slow and obvious way: by the value shown, then ratings, then id."""
    rated = [Article(i, t, c) for i, (t, c) in articles.items() if c]
    rated.sort(key=lambda a: (-Decimal(rating_value(a.total, a.count)), -a.count, a.id))
    return rated[:BEST_RATED]


@pytest.mark.parametrize("seed", range(20))
def test_best_rated_agrees_with_the_slow_ranking(seed: int) -> None:
    rng = random.Random(seed)
    articles = {}
    for article_id in rng.sample(range(1, 10_000), 300):
        count = rng.randint(0, 40)
        low, high = rng.choice([(1, 5), (-1, 1), (0, 10), (-1000, 1000)])
        articles[article_id] = (sum(rng.randint(low, high) for _ in range(count)), count)
    sums, counts = zip(*articles.values(), strict=True)
    catalogue = Catalogue(list(articles), list(sums), list(counts))
    assert best_rated(catalogue) == reference_best(articles)


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


def front_page(site: Path) -> list[Element]:
    """The page's elements; every element it opens, it closes."""
    parser = PageParser()
    parser.feed((site / "index.html").read_text(encoding="utf-8"))
    parser.close()
    assert not parser.open, [element.tag for element in parser.open]
    return parser.elements


def test_the_front_page_passes_its_own_policy_and_a_hostile_base_url_stays_data(
    tmp_path: Path,
) -> None:
    """Nothing inline, nothing from elsewhere: all the policy allows is the site's own files,
    whatever the base URL holds; in the document and on the page it is data."""
    site = built(tmp_path, SAMPLE, "--base-url", HOSTILE_URL)
    elements = front_page(site)
    metas = [e.attributes for e in elements if e.tag == "meta" and "http-equiv" in e.attributes]
    assert metas == [{"http-equiv": "Content-Security-Policy", "content": META_CSP}]
    scripts = [e for e in elements if e.tag == "script"]
    assert [(s.attributes, s.text) for s in scripts] == [
        ({"src": "assets/front-page.js", "defer": ""}, "")
    ]
    assert [e for e in elements if e.tag == "style"] == []
    for element in elements:
        assert "style" not in element.attributes, element
        assert not any(name.startswith("on") for name in element.attributes), element
        for name in ("href", "src", "action"):
            url = element.attributes.get(name, "")
            assert not re.match(r"[a-z]+:|//", url), url  # relative: this site only
    css = (site / "assets/front-page.css").read_text()
    assert "@import" not in css
    assert "url(" not in css
    script = (site / "assets/front-page.js").read_text()
    for unsafe in ("innerHTML", "outerHTML", "eval(", "new Function", "document.write"):
        assert unsafe not in script, unsafe
    assert 'setAttribute("style' not in script

    document = json.loads((site / OPENAPI).read_bytes())  # valid: its golden case
    assert document["servers"][0]["url"] == HOSTILE_URL
    schema = document["components"]["schemas"]["Rating"]
    pattern = schema["properties"]["article_url"]["pattern"]
    assert re.fullmatch(pattern, f"{HOSTILE_URL}/away/api/articles/7/")
    assert not re.fullmatch(pattern, "https://example.com/away/api/articles/7/")
    source = (site / "index.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;amp;&#34;" in source
    # The curl line, pasted in a shell, asks for exactly the URL.
    text = {e.attributes.get("id"): e.text for e in elements}
    assert shlex.split(text["curl"]) == ["curl", f"{HOSTILE_URL}/away/api/articles/3/rating/"]
    assert text["example"] == rating_document(site, 3).decode().rstrip("\n")
