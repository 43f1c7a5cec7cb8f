"""The files that describe the API: the OpenAPI document and the front page, as a build writes them."""

from __future__ import annotations

import json
import random
import re
import shlex
from dataclasses import dataclass, field
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Final

import pytest
from openapi_schema_validator import OAS31Validator
from openapi_spec_validator import OpenAPIV31SpecValidator

from ratings_api.cli import main
from ratings_api.describe import (
    ASSETS,
    BEST_RATED,
    FRONT_PAGE_CSP,
    META_CSP,
    Article,
    best_rated,
    describe_files,
    first_unrated,
    missing_id,
    regex_literal,
    stars_for,
)
from ratings_api.loader import MAX_ID, Catalogue
from ratings_api.rating import rating_value
from tests.sample import SAMPLE, SAMPLE_BEST

REPO: Final = Path(__file__).resolve().parent.parent
OPENAPI: Final = "away/api/openapi.json"
RATING_PATH: Final = "/away/api/articles/{id}/rating/"
FIELDS: Final = ["article_url", "id", "rating_sum", "rating_count", "rating_value"]
# Everything a base URL may hold that means something in HTML, in a shell or in a regex.
HOSTILE_URL: Final = "https://example.com/<script>alert('x')</script>&amp;\"$(id)`id`(a|b)+.*"


def build_site(folder: Path, ratings: str, *options: str) -> Path:
    source = folder / "ratings.yaml"
    source.write_text(ratings, encoding="utf-8")
    site = folder / "site"
    assert main(["--input", str(source), "--output", str(site), "--quiet", *options]) == 0
    return site


def openapi(site: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((site / OPENAPI).read_text(encoding="utf-8"))
    return document


def rating_document(site: Path, article_id: int) -> bytes:
    return (site / f"away/api/articles/{article_id}/rating/index.json").read_bytes()


# The OpenAPI document


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_site(tmp_path_factory.mktemp("sample"), SAMPLE)


def test_the_document_is_valid_openapi_3_1(sample: Path) -> None:
    document = openapi(sample)
    OpenAPIV31SpecValidator(document).validate()
    assert document["openapi"] == "3.1.0"
    assert document["servers"] == [
        {"url": "https://ratings.example.com", "description": "where this build is published"}
    ]


def test_the_document_describes_one_operation(sample: Path) -> None:
    paths = openapi(sample)["paths"]
    assert list(paths) == [RATING_PATH]
    assert list(paths[RATING_PATH]) == ["get"]
    operation = paths[RATING_PATH]["get"]
    assert operation["operationId"] == "retrieveArticleRating"
    assert list(operation["responses"]) == ["200", "304", "404"]


def test_the_id_parameter(sample: Path) -> None:
    parameter = openapi(sample)["components"]["parameters"]["ArticleId"]
    assert parameter["name"] == "id"
    assert parameter["in"] == "path"
    assert parameter["required"] is True
    assert parameter["schema"] == {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}
    assert {name: example["value"] for name, example in parameter["examples"].items()} == {
        "rated": 3,  # the best rated
        "unrated": 31,
        "unlisted": 43,  # one past the largest id
    }


def test_the_rating_schema(sample: Path) -> None:
    schema = openapi(sample)["components"]["schemas"]["Rating"]
    assert schema["type"] == "object"
    assert list(schema["properties"]) == FIELDS
    assert schema["required"] == FIELDS
    assert schema["additionalProperties"] is False
    types = {name: spec["type"] for name, spec in schema["properties"].items()}
    assert types == {
        "article_url": "string",
        "id": "integer",
        "rating_sum": "integer",
        "rating_count": "integer",
        "rating_value": "string",
    }
    assert schema["properties"]["rating_value"]["pattern"] == r"^-?[0-9]+\.[0-9]$"
    assert schema["properties"]["article_url"]["pattern"] == (
        r"^https://ratings\.example\.com/away/api/articles/[1-9][0-9]*/$"
    )
    assert schema["properties"]["article_url"]["format"] == "uri"
    assert schema["properties"]["rating_count"]["minimum"] == 0


def test_the_examples_are_the_documents_the_build_wrote(sample: Path) -> None:
    document = openapi(sample)
    content = document["paths"][RATING_PATH]["get"]["responses"]["200"]["content"][
        "application/json"
    ]
    examples = {name: example["value"] for name, example in content["examples"].items()}
    assert list(examples) == ["rated", "unrated"]
    # Dumped as the build dumps a document, each is the very file, fields in order.
    assert (json.dumps(examples["rated"]) + "\n").encode() == rating_document(sample, 3)
    assert (json.dumps(examples["unrated"]) + "\n").encode() == rating_document(sample, 31)
    assert list(examples["rated"]) == FIELDS
    assert document["components"]["schemas"]["Rating"]["examples"] == [
        examples["rated"],
        examples["unrated"],
    ]


def test_every_document_of_the_site_matches_the_rating_schema(sample: Path) -> None:
    schema = openapi(sample)["components"]["schemas"]["Rating"]
    documents = sorted((sample / "away/api/articles").glob("*/rating/index.json"))
    assert len(documents) == 12
    validator = OAS31Validator(schema)
    for path in documents:
        validator.validate(json.loads(path.read_bytes()))


def test_the_404_and_the_headers(sample: Path) -> None:
    document = openapi(sample)
    responses = document["paths"][RATING_PATH]["get"]["responses"]
    not_found = responses["404"]["content"]["application/json"]
    assert not_found["example"] == {"detail": "Not found."}
    assert document["components"]["schemas"]["NotFound"]["properties"] == {
        "detail": {"type": "string", "const": "Not found."}
    }
    headers = document["components"]["headers"]
    assert headers["Access-Control-Allow-Origin"]["schema"] == {"type": "string", "const": "*"}
    assert headers["X-Content-Type-Options"]["schema"] == {"type": "string", "const": "nosniff"}
    assert {name: header["required"] for name, header in headers.items()} == {
        "Access-Control-Allow-Origin": True,
        "X-Content-Type-Options": True,
        "Cache-Control": True,
        "ETag": True,
        "Last-Modified": False,
    }

    def names(status: str) -> list[str]:
        return [ref["$ref"].rpartition("/")[2] for ref in responses[status]["headers"].values()]

    common = ["Access-Control-Allow-Origin", "X-Content-Type-Options", "Cache-Control"]
    assert names("200") == ["ETag", "Last-Modified", *common]
    assert names("304") == ["ETag", *common]
    assert names("404") == common


def test_the_document_is_indented_utf8_json_with_one_trailing_newline(tmp_path: Path) -> None:
    site = build_site(tmp_path, SAMPLE, "--base-url", "https://bücher.example/neu")
    data = (site / OPENAPI).read_bytes()
    assert data.endswith(b"}\n")
    assert not data.endswith(b"\n\n")
    assert data.startswith(b'{\n  "openapi": "3.1.0",\n')
    assert "https://bücher.example/neu".encode() in data  # not \u-escaped
    schema = openapi(site)["components"]["schemas"]["Rating"]
    assert schema["properties"]["article_url"]["format"] == "iri"
    OpenAPIV31SpecValidator(openapi(site)).validate()


CATALOGUES: Final = {
    "no articles": "base_url: https://example.com\narticles: {}\n",
    "none rated": "base_url: https://example.com\narticles:\n  4: []\n  2: []\n",
    "none unrated": "base_url: https://example.com\narticles:\n  4: [1]\n",
    "no scale, negative": "base_url: https://example.com\narticles:\n  1: [-1, -1, 1]\n  2: [-5]\n",
    "the largest id": f"base_url: https://example.com\narticles:\n  1: [1]\n  {MAX_ID}: [2]\n",
}
# The id examples each catalogue gives.
CATALOGUE_IDS: Final = {
    "no articles": {"unlisted": 1},
    "none rated": {"unrated": 2, "unlisted": 5},
    "none unrated": {"rated": 4, "unlisted": 5},
    "no scale, negative": {"rated": 1, "unlisted": 3},
    "the largest id": {"rated": MAX_ID, "unlisted": 2},
}


@pytest.mark.parametrize("name", list(CATALOGUES))
def test_every_catalogue_gives_a_valid_document(tmp_path: Path, name: str) -> None:
    site = build_site(tmp_path, CATALOGUES[name])
    document = openapi(site)
    OpenAPIV31SpecValidator(document).validate()
    examples = document["components"]["parameters"]["ArticleId"]["examples"]
    assert {key: example["value"] for key, example in examples.items()} == CATALOGUE_IDS[name]


def test_a_hostile_base_url_is_data_in_the_document(tmp_path: Path) -> None:
    site = build_site(tmp_path, SAMPLE, "--base-url", HOSTILE_URL)
    document = openapi(site)
    OpenAPIV31SpecValidator(document).validate()
    assert document["servers"][0]["url"] == HOSTILE_URL
    pattern = document["components"]["schemas"]["Rating"]["properties"]["article_url"]["pattern"]
    assert re.fullmatch(pattern, f"{HOSTILE_URL}/away/api/articles/7/")
    assert not re.fullmatch(pattern, "https://example.com/away/api/articles/7/")
    OAS31Validator(document["components"]["schemas"]["Rating"]).validate(
        json.loads(rating_document(site, 7))
    )


def test_regex_literal_matches_only_its_text() -> None:
    text = r"a.b*c+d?e(f)g[h]i{1}j|k^l$m\n"
    assert re.fullmatch(regex_literal(text), text)
    assert not re.fullmatch(regex_literal(text), text.replace(".", "x"))


# What the description is made of


def catalogue_of(articles: dict[int, tuple[int, int]]) -> Catalogue:
    return Catalogue(
        ids=list(articles),
        sums=[total for total, _ in articles.values()],
        counts=[count for _, count in articles.values()],
    )


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
    assert best_rated(catalogue_of(articles)) == reference_best(articles)


def test_best_rated_rounds_ties_away_from_zero_as_the_documents_do() -> None:
    # -3.25 shows as -3.3, below -3.2; 3.25 shows as 3.3, above 3.24...
    articles = {1: (-65, 20), 2: (-64, 20), 3: (65, 20), 4: (324, 100), 5: (0, 0), 6: (-1, 100)}
    best = best_rated(catalogue_of(articles))
    assert [(a.id, a.value) for a in best] == [
        (3, "3.3"),
        (4, "3.2"),
        (6, "0.0"),
        (2, "-3.2"),
        (1, "-3.3"),
    ]


def test_best_rated_is_the_same_in_any_input_order() -> None:
    articles = {i: (i % 7 + 3, 2 + i % 3) for i in range(1, 200)}
    shuffled = dict(random.Random(1).sample(sorted(articles.items()), len(articles)))
    assert best_rated(catalogue_of(shuffled)) == best_rated(catalogue_of(articles))


def test_first_unrated_and_missing_id() -> None:
    assert first_unrated(catalogue_of({9: (0, 0), 4: (3, 1), 6: (0, 0)})) == Article(6, 0, 0)
    assert first_unrated(catalogue_of({4: (3, 1)})) is None
    assert missing_id([]) == 1
    assert missing_id([3, 9, 4]) == 10
    assert missing_id([1, MAX_ID, 2, 4]) == 3


def test_stars_follow_the_scale() -> None:
    assert stars_for((1, 5)) == 5
    assert stars_for((0, 10)) == 10
    assert stars_for((1, 3)) == 3
    assert stars_for(None) is None  # any integers: no top to count stars to
    assert stars_for((-1, 1)) is None
    assert stars_for((1, 100)) is None  # a hundred stars help nobody


def test_the_files_are_the_same_bytes_in_any_input_order() -> None:
    articles = {i: (3 * i % 11, i % 4) for i in range(1, 500)}
    shuffled = dict(random.Random(2).sample(sorted(articles.items()), len(articles)))
    assert describe_files(catalogue_of(shuffled), "https://example.com") == describe_files(
        catalogue_of(articles), "https://example.com"
    )


def test_the_generated_files() -> None:
    files = describe_files(catalogue_of({7: (29, 6)}), "https://example.com")
    assert sorted(files) == sorted([OPENAPI, "index.html", *ASSETS])
    for name in ASSETS:
        assert files[name] == (REPO / "templates" / name).read_bytes()


# The front page


@dataclass
class Element:
    tag: str
    attributes: dict[str, str]
    text: str = ""
    children: list[Element] = field(default_factory=list)


class PageParser(HTMLParser):
    """The page as a list of elements, each with its attributes and its whole text."""

    VOID: Final = frozenset({"meta", "link", "input", "br", "img"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self.open: list[Element] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {name: value or "" for name, value in attrs})
        self.elements.append(element)
        if self.open:
            self.open[-1].children.append(element)
        if tag not in self.VOID:
            self.open.append(element)

    def handle_endtag(self, tag: str) -> None:
        assert self.open, f"</{tag}> closes nothing"
        assert self.open[-1].tag == tag, f"</{tag}> closes <{self.open[-1].tag}>"
        self.open.pop()

    def handle_data(self, data: str) -> None:
        for element in self.open:
            element.text += data


@dataclass
class Page:
    source: str
    elements: list[Element]

    def by_id(self, name: str) -> Element:
        found = [element for element in self.elements if element.attributes.get("id") == name]
        assert len(found) == 1, name
        return found[0]

    def all(self, tag: str) -> list[Element]:
        return [element for element in self.elements if element.tag == tag]


def front_page(site: Path) -> Page:
    source = (site / "index.html").read_text(encoding="utf-8")
    parser = PageParser()
    parser.feed(source)
    parser.close()
    assert not parser.open, [element.tag for element in parser.open]
    return Page(source, parser.elements)


def rows(table: Element) -> list[tuple[str, ...]]:
    body = next(child for child in table.children if child.tag == "tbody")
    return [tuple(cell.text.split()[-1] for cell in row.children) for row in body.children]


def test_the_front_page_says_what_the_api_is(sample: Path) -> None:
    page = front_page(sample)
    assert page.all("title")[0].text == "Article ratings API"
    assert page.all("h1")[0].text == "Article ratings API"
    lead = " ".join(page.all("header")[0].children[1].text.split())
    assert lead == (
        "The reader ratings of 12 articles (362 ratings, on a scale of 1 to 5), published as a "
        "read-only JSON API of static files: one document per article, ready for any web page to fetch."
    )
    assert page.all("html")[0].attributes["lang"] == "en"


def test_the_front_page_shows_the_endpoint_and_a_real_curl_line(sample: Path) -> None:
    page = front_page(sample)
    endpoint = next(p for p in page.all("p") if p.attributes.get("class") == "endpoint")
    assert " ".join(endpoint.text.split()) == (
        "GET https://ratings.example.com/away/api/articles/{id}/rating/"
    )
    assert page.by_id("curl").text == "curl https://ratings.example.com/away/api/articles/3/rating/"
    assert page.by_id("example").text == rating_document(sample, 3).decode().rstrip("\n")


def test_the_front_page_lists_the_best_rated(sample: Path) -> None:
    page = front_page(sample)
    table = next(
        element for element in page.all("table") if element.attributes.get("class") == "best"
    )
    assert rows(table) == SAMPLE_BEST
    links = [
        a.attributes["href"]
        for a in page.all("a")
        if a.attributes["href"].startswith("away/api/articles/")
    ]
    assert links == [f"away/api/articles/{row[1]}/rating/" for row in SAMPLE_BEST]
    stars = [span.attributes for span in page.all("span") if "data-value" in span.attributes]
    assert [(s["data-value"], s["data-max"], s["aria-label"]) for s in stars] == [
        (row[2], "5", f"{row[2]} out of 5 stars") for row in SAMPLE_BEST
    ]


def test_the_front_page_links_the_openapi_document(sample: Path) -> None:
    link = front_page(sample).by_id("openapi-link")
    assert link.attributes["href"] == OPENAPI
    assert (sample / link.attributes["href"]).is_file()


def test_the_lookup_form(sample: Path) -> None:
    page = front_page(sample)
    form = page.by_id("lookup-form")
    assert form.attributes["data-api"] == "away/api/articles/"
    assert form.attributes["data-stars"] == "5"
    assert page.by_id("article-id").attributes["value"] == "3"


def test_the_front_page_passes_its_own_policy(sample: Path) -> None:
    """Nothing inline, nothing from elsewhere: all the policy allows is the site's own files."""
    page = front_page(sample)
    metas = [m.attributes for m in page.all("meta") if m.attributes.get("http-equiv")]
    assert metas == [{"http-equiv": "Content-Security-Policy", "content": META_CSP}]
    scripts = page.all("script")
    assert [s.attributes for s in scripts] == [{"src": "assets/front-page.js", "defer": ""}]
    assert all(s.text == "" for s in scripts)
    assert page.all("style") == []
    links = {link.attributes["rel"]: link.attributes["href"] for link in page.all("link")}
    assert links == {"stylesheet": "assets/front-page.css", "icon": "assets/star.svg"}
    for element in page.elements:
        assert "style" not in element.attributes, element
        assert not any(name.startswith("on") for name in element.attributes), element
        for name in ("href", "src", "action"):
            url = element.attributes.get(name, "")
            assert not re.match(r"[a-z]+:|//", url), url  # relative: this site only
    css = (sample / "assets/front-page.css").read_text()
    assert "@import" not in css
    assert "url(" not in css
    script = (sample / "assets/front-page.js").read_text()
    for unsafe in (
        "innerHTML",
        "outerHTML",
        "eval(",
        "new Function",
        "document.write",
        'setAttribute("style',
    ):
        assert unsafe not in script, unsafe


def test_the_policy() -> None:
    assert FRONT_PAGE_CSP == (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
    # A <meta> policy cannot hold frame-ancestors: browsers ignore it there, with a warning.
    assert FRONT_PAGE_CSP.removesuffix("; frame-ancestors 'none'") == META_CSP


def test_a_hostile_base_url_is_escaped_on_the_front_page(tmp_path: Path) -> None:
    site = build_site(tmp_path, SAMPLE, "--base-url", HOSTILE_URL)
    page = front_page(site)
    assert "<script>alert" not in page.source
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;amp;&#34;" in page.source
    assert [s.attributes for s in page.all("script")] == [
        {"src": "assets/front-page.js", "defer": ""}
    ]
    # The curl line, pasted in a shell, asks for exactly the URL.
    assert shlex.split(page.by_id("curl").text) == [
        "curl",
        f"{HOSTILE_URL}/away/api/articles/3/rating/",
    ]
    assert page.by_id("example").text == rating_document(site, 3).decode().rstrip("\n")


def test_a_front_page_without_ratings(tmp_path: Path) -> None:
    page = front_page(build_site(tmp_path, CATALOGUES["none rated"]))
    assert [p.text for p in page.all("p") if p.text == "No article has a rating yet."] == [
        "No article has a rating yet."
    ]
    assert page.by_id("curl").text == "curl https://example.com/away/api/articles/2/rating/"
    assert page.by_id("lookup-form").attributes["data-stars"] == ""


def test_a_front_page_without_articles(tmp_path: Path) -> None:
    page = front_page(build_site(tmp_path, CATALOGUES["no articles"]))
    assert page.by_id("curl").text == "curl https://example.com/away/api/articles/1/rating/"
    assert [e for e in page.elements if e.attributes.get("id") == "example"] == []
    lead = " ".join(page.all("header")[0].children[1].text.split())
    assert lead.startswith("The reader ratings of 0 articles (0 ratings), published")
