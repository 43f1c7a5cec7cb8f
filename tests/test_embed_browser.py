"""The ``<article-rating>`` element in headless Chromium, embedded from the app (``--serve``).

A page of another origin, under a strict Content-Security-Policy, holds the two documented lines;
a script error or a refusal by the policy fails. The languages, the texts a page gives and the
failures are shown from the page's own server. That the hosts serve embed.js as the app does is
the contract suite's job (tests/test_http_contract.py). The module's own bytes, and Netlify's
types for it, are checked in the quick tier.
"""

from __future__ import annotations

import fnmatch
import gzip
import http.server
import json
import re
import threading
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
from selenium.common.exceptions import TimeoutException
from selenium.webdriver import Chrome
from selenium.webdriver.support.ui import WebDriverWait

from ratings_api.embed import EMBED_PATH, MAX_GZIPPED, TYPES_PATH, embed_script
from tests.browser import console, not_found
from tests.contract import Host, request
from tests.hosts import start_serve

REPO: Final = Path(__file__).resolve().parent.parent
WIDTH: Final = 560
HEIGHT: Final = 600
WAIT_SECONDS: Final = 15.0
# In tests.contract.RATINGS: 7 rated one by one, 12 given as totals (the same
# 4.8), 31 not rated yet, 1000000 rated once; no article 2.
RATED, TOTALS, UNRATED, ONCE, UNKNOWN, LATER = "7", "12", "31", "1000000", "2", "1"
ARTICLE: Final = "/away/api/articles/{}/rating/"
TEXT: Final = "text/plain; charset=utf-8"
# The host page's own sheet: the element's documented hooks, from outside.
PAGE_CSS: Final = b"""\
body { margin: 16px 20px; font: 16px/1.4 "DejaVu Sans", sans-serif; color: #1d2433; }
h1 { font-size: 18px; margin: 0 0 12px; }
p { margin: 0 0 10px; }
code { font: 13px "DejaVu Sans Mono", monospace; color: #5b6478; }
.styled article-rating {
  --article-rating-color: #1f5fbf;
  --article-rating-empty-color: #dbe8fb;
  --article-rating-size: 1.6em;
}
.styled article-rating::part(text) { font-weight: bold; }
"""


def page_policy(api: str) -> str:
    """The host page's policy: the API's origin may run a script and answer a fetch, nothing else."""
    return (
        f"default-src 'none'; script-src {api}; connect-src {api}; style-src 'self'; "
        "require-trusted-types-for 'script'; trusted-types 'none'; base-uri 'none'"
    )


Row = tuple[str | None, str, str | None, str | None, str | None, str | None, str | None, bool]


def rated(article: str, value: str, count: int, filled: str) -> Row:
    ratings, readers = ("rating", "reader") if count == 1 else ("ratings", "readers")
    label = f"Rated {value} out of 5 by {count} {readers}"
    return (article, "rated", "img", label, f"{value} ({count} {ratings})", "☆☆☆☆☆", filled, False)


def nothing(article: str | None, state: str) -> Row:
    return (article, state, None, None, None, None, None, True)


def not_rated(text: str) -> Row:
    return (UNRATED, "unrated", "img", text, text, None, None, False)


GERMAN: Final = ("Von 6 Lesern mit 4,8 von 5 bewertet", "4,8 (6 Bewertungen)")
# The host page, a row an element: its caption, the attributes of its section (a <div>), its
# article-id, and what it shows.
ROWS: Final = [
    (f'article-id="{RATED}"', "", RATED, rated(RATED, "4.8", 6, "96%")),
    (f'article-id="{TOTALS}"', "", TOTALS, rated(TOTALS, "4.8", 6, "96%")),
    (f'article-id="{ONCE}"', "", ONCE, rated(ONCE, "5.0", 1, "100%")),
    (f'article-id="{UNRATED}"', "", UNRATED, not_rated("Not rated yet")),
    (f'article-id="{UNKNOWN}" (no such article)', "", UNKNOWN, nothing(UNKNOWN, "missing")),
    ('article-id="07" (not an id)', "", "07", nothing("07", "invalid")),
    ("(no article-id)", "", None, nothing(None, "invalid")),
    (f'article-id="{RATED}" again', "", RATED, rated(RATED, "4.8", 6, "96%")),
    (f'lang="de" article-id="{RATED}"', 'lang="de"', RATED, (*rated(RATED, "4.8", 6, "96%")[:3], *GERMAN, "☆☆☆☆☆", "96%", False)),
    (f'lang="de" article-id="{UNRATED}"', 'lang="de"', UNRATED, not_rated("Noch nicht bewertet")),
    ("styled from outside", 'class="styled"', RATED, rated(RATED, "4.8", 6, "96%")),
]  # fmt: skip
EXPECTED: Final = [row[-1] for row in ROWS]
VALID: Final = sorted({row[0] for row in EXPECTED if row[1] != "invalid"})  # each asked once


def page(api: str) -> bytes:
    """The host page: the two documented lines, once for each state, and the styled example."""
    rows = "".join(
        f"<div {section}><p><code>{caption}</code> <article-rating"
        + ("" if article is None else f' article-id="{article}"')
        + "></article-rating></p></div>\n"
        for caption, section, article, _ in ROWS
    )
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>Embedded</title>\n'
        '<link rel="stylesheet" href="/page.css">\n'
        f'<script type="module" src="{api}/{EMBED_PATH}"></script>\n'
        f"</head><body>\n<h1>&lt;article-rating&gt; on another site</h1>\n{rows}</body></html>\n"
    ).encode()


@dataclass(frozen=True)
class Shown:
    """An element of the languages' page: where its language is set, and what it shows."""

    where: str  # "html" (of a frame of the page), "element", "parent", or "shadow": in the
    # shadow root of a component (a card) inside the parent
    lang: str | None
    article: int  # in the page's own API, article N has N ratings, and 31 none
    text: str
    label: str
    texts: str = ""  # attributes that give the texts, on the element or its parent


SWEDISH: Final = (
    'unrated-text="Inga betyg än" count-one="{count} betyg" count-other="{count} betyg" '
    'label-other="Betyg {value} av {top} från {count} läsare"'
)
RUSSIAN: Final = 'count-one="{count} оценка" count-few="{count} оценки" count-many="{count} оценок"'
MILLION: Final = 1000000
# fmt: off
LANGUAGES: Final = [
    Shown("html", "de-AT", 6, "4,8 (6 Bewertungen)", "Von 6 Lesern mit 4,8 von 5 bewertet"),
    Shown("html", "de-AT", 1, "5,0 (1 Bewertung)", "Von 1 Leser mit 5,0 von 5 bewertet"),
    Shown("html", "fr", 6, "4,8 (6 notes)", "Noté 4,8 sur 5 par 6 lecteurs"),
    Shown("html", "ja", MILLION, "4.8 (1,000,000件の評価)", "評価 4.8/5（1,000,000人）"),  # noqa: RUF001
    Shown("html", None, 6, "4.8 (6 ratings)", "Rated 4.8 out of 5 by 6 readers"),
    Shown("element", "en-GB", 1, "5.0 (1 rating)", "Rated 5.0 out of 5 by 1 reader"),
    Shown("element", "es", 6, "4,8 (6 valoraciones)", "Valorado con 4,8 de 5 por 6 lectores"),
    Shown("element", "fr", MILLION, "4,8 (1\u202f000\u202f000 de notes)", "Noté 4,8 sur 5 par 1\u202f000\u202f000 de lecteurs"),
    Shown("element", "pt-BR", 1, "5,0 (1 avaliação)", "Avaliado com 5,0 de 5 por 1 leitor"),
    Shown("element", "it", MILLION, "4,8 (1.000.000 di valutazioni)", "Valutato 4,8 su 5 da 1.000.000 di lettori"),
    Shown("element", "nl", 6, "4,8 (6 beoordelingen)", "Beoordeeld met 4,8 uit 5 door 6 lezers"),
    Shown("element", "fr", 31, "Pas encore noté", "Pas encore noté"),
    Shown("element", "no tag!", 6, "4.8 (6 ratings)", "Rated 4.8 out of 5 by 6 readers"),
    Shown("parent", "pl", 1, "5,0 (1 ocena)", "Ocena 5,0 na 5 od 1 czytelnika"),
    Shown("parent", "pl", 2, "4,8 (2 oceny)", "Ocena 4,8 na 5 od 2 czytelników"),
    Shown("parent", "pl", 5, "4,8 (5 ocen)", "Ocena 4,8 na 5 od 5 czytelników"),
    Shown("parent", "pt", 2, "4,8 (2 avaliações)", "Avaliado com 4,8 de 5 por 2 leitores"),
    Shown("parent", "ja", 31, "まだ評価がありません", "まだ評価がありません"),
    Shown("parent", "de", 31, "Noch nicht bewertet", "Noch nicht bewertet"),
    # The page's own texts, on a parent or the element, for any language.
    Shown("parent", "sv", 1, "5,0 (1 betyg)", "Betyg 5,0 av 5 från 1 läsare", SWEDISH),
    Shown("parent", "sv", 22, "4,8 (22 betyg)", "Betyg 4,8 av 5 från 22 läsare", SWEDISH),
    Shown("parent", "sv", 31, "Inga betyg än", "Inga betyg än", SWEDISH),
    Shown("parent", "sv", 6, "4,8 (6 ratings)", "Rated 4,8 out of 5 by 6 readers"),
    Shown("element", "en", 6, "4.8 (6 votes)", "Rated 4.8 out of 5 by 6 readers", 'count-other="{count} votes"'),
    # No built-in texts: English words in English plurals, the numbers and the page's own
    # texts in the page's language.
    Shown("element", "ru", 301, "4,8 (301 ratings)", "Rated 4,8 out of 5 by 301 readers"),
    Shown("parent", "ru", 21, "4,8 (21 оценка)", "Rated 4,8 out of 5 by 21 readers", RUSSIAN),
    # Inside a component's shadow root: the host's language and texts, from outside it.
    Shown("shadow", "de", 6, "4,8 (6 Bewertungen)", "Von 6 Lesern mit 4,8 von 5 bewertet"),
    Shown("shadow", "sv", 31, "Inga betyg än", "Inga betyg än", SWEDISH),
]
# fmt: on
FRAMES: Final = list(dict.fromkeys(row.lang or "-" for row in LANGUAGES if row.where == "html"))


def languages_page(frame: str | None) -> bytes:
    """The languages' page (``frame`` None), or its frame of the rows whose lang is <html lang>.

    The page's own <html lang> ("ko") and a <div lang="ja"> around the elements with a lang of
    their own are there to lose: the closest lang wins.
    """

    def element(row: Shown) -> str:
        lang = f' lang="{row.lang}" {row.texts}' if row.where == "element" else ""
        return f'<article-rating article-id="{row.article}"{lang}></article-rating>\n'

    def parent(row: Shown) -> str:
        return f'<p lang="{row.lang}" {row.texts}>{element(row)}</p>\n'

    def card(row: Shown) -> str:
        """A component holding the element in its shadow root (declarative: no script)."""
        inside = f'<template shadowrootmode="open">{element(row)}</template>'
        return f'<p lang="{row.lang}" {row.texts}><span data-card>{inside}</span></p>\n'

    if frame is None:
        lang = ' lang="ko"'
        rows = '<div lang="ja">' + "".join(element(r) for r in LANGUAGES if r.where == "element")
        rows += "</div>\n" + "".join(parent(r) for r in LANGUAGES if r.where == "parent")
        rows += "".join(card(r) for r in LANGUAGES if r.where == "shadow")
        rows += "".join(f'<iframe src="/languages/frame/{name}"></iframe>\n' for name in FRAMES)
    else:
        lang = "" if frame == "-" else f' lang="{frame}"'
        chosen = [r for r in LANGUAGES if r.where == "html" and (r.lang or "-") == frame]
        rows = "".join(element(r) for r in chosen)
    module = f'<script type="module" src="/languages/{EMBED_PATH}"></script>'
    return (
        f"<!doctype html>\n<html{lang}><head>{module}</head><body>\n{rows}</body></html>\n".encode()
    )


def document_of(article: int) -> bytes:
    """Article N of the languages' page: N ratings, of 5.0 for one, else 4.8; 31: none yet."""
    count = 0 if article == 31 else article
    value = "0.0" if count == 0 else "5.0" if count == 1 else "4.8"
    total = {"rating_sum": round(float(value) * count), "rating_count": count}
    return json.dumps({"id": article, **total, "rating_value": value}).encode()


HTML: Final = "text/html; charset=utf-8"
JS: Final = "text/javascript"
OWN: Final = "script-src 'self'; connect-src 'self'; frame-src 'self'; default-src 'none'"
NOT_FOUND: Final = (404, "application/json", b'{"detail": "Not found."}\n', "")
# The module below a folder whose API is broken: how the element meets a network failure
# (/gone/ closes the connection unanswered), an error status, or an answer not JSON.
BROKEN: Final = {
    "gone": NOT_FOUND,
    "fails": (500, "application/json", b'{"detail": "A server error occurred."}\n', ""),
    "html": (200, "text/html", b"<!doctype html><title>Welcome</title>\n", ""),
}


@dataclass
class Pages:
    """The pages' own server: what it answers at each path, and the paths asked of it."""

    origin: str
    routes: dict[str, tuple[int, str, bytes, str]]  # status, type, body, policy
    requests: list[str]


@contextmanager
def serve_pages(embed: bytes, api: str) -> Iterator[Pages]:
    """The host pages, ``page`` from the API at ``api``; the languages' page and the broken APIs
    with ``embed``, the module as the build writes it, from the pages' own origin."""
    pages = Pages("", {}, [])

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            pages.requests.append(self.path)
            kind = self.path.split("/")[1]
            if kind == "gone" and self.path != f"/gone/{EMBED_PATH}":
                self.close_connection = True  # no answer at all: a network error
                return
            status, type_, body, policy = pages.routes.get(self.path, BROKEN.get(kind, NOT_FOUND))
            self.send_response(status)
            self.send_header("Content-Type", type_)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Access-Control-Allow-Origin", "*")
            if policy:
                self.send_header("Content-Security-Policy", policy)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    pages.origin = origin = f"http://127.0.0.1:{server.server_address[1]}"
    articles = {row.article for row in LANGUAGES} | {3, 7}
    pages.routes = {
        "/page": (200, HTML, page(api), page_policy(api)),
        "/page.css": (200, "text/css", PAGE_CSS, ""),
        "/languages": (200, HTML, languages_page(None), OWN),
        f"/languages/{EMBED_PATH}": (200, JS, embed, ""),
        **{f"/languages/frame/{f}": (200, HTML, languages_page(f), OWN) for f in FRAMES},
        **{
            f"/languages/away/api/articles/{n}/rating/": (
                200,
                "application/json",
                document_of(n),
                "",
            )
            for n in articles
        },
        **{f"/broken/{k}": (200, HTML, page(f"{origin}/{k}"), page_policy(origin)) for k in BROKEN},
        **{f"/{kind}/{EMBED_PATH}": (200, JS, embed, "") for kind in BROKEN},
    }
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield pages
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    """The app, ``generate.py --serve``, on the contract's catalogue."""
    host = start_serve(tmp_path_factory.mktemp("embed-app"))
    try:
        yield host
    finally:
        host.stop()


@pytest.fixture(scope="module")
def driver(browser: Chrome) -> Iterator[Chrome]:
    """The browser, with a page's listener for the events on every page."""
    browser.set_window_size(WIDTH, HEIGHT)
    added = browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": LISTENER})
    yield browser
    browser.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", added)


@pytest.fixture(scope="module")
def pages(app: Host, driver: Chrome) -> Iterator[Pages]:
    # The module as the build writes it for the contract's scale, [1, 5].
    with serve_pages(embed_script((1, 5)), f"http://127.0.0.1:{app.port}") as state:
        yield state
        driver.get("about:blank")  # before the server stops: no fetch of its pages left to fail
        console(driver)


# Once on the document, as a page listens: what each element told it, by the element's place.
LISTENER: Final = """
window.heard = [];
for (const type of ["article-rating-load", "article-rating-error"]) {
  document.addEventListener(type, (event) => {
    const place = [...document.querySelectorAll("article-rating")].indexOf(event.target);
    window.heard.push([place, type, event.detail, event.composed]);
  });
}
"""
# Each element of the page, its frames and its cards' shadow roots, as a row: its id, state,
# the role and label of its rating, its text, the stars drawn and the width filled, and whether
# it takes no room at all (nothing shown).
SHOWN: Final = """
const frames = [...document.querySelectorAll("iframe")].map((frame) => frame.contentDocument);
const all = [document, ...frames].flatMap((page) =>
  [...page.querySelectorAll("article-rating, [data-card]")].map((e) =>
    e.matches("[data-card]") ? e.shadowRoot.querySelector("article-rating") : e));
return all.map((element) => {
  const part = (name) => element.shadowRoot && element.shadowRoot.querySelector(`[part~=${name}]`);
  const [rating, stars, filled, text] = ["rating", "stars", "filled", "text"].map(part);
  return [
    element.getAttribute("article-id"), element.state,
    rating && rating.getAttribute("role"), rating && rating.getAttribute("aria-label"),
    text && text.textContent, stars && stars.firstChild.textContent, filled && filled.style.width,
    element.getBoundingClientRect().width === 0,
  ];
});
"""
ASKED: Final = """
return performance.getEntriesByType("resource")
  .map((entry) => new URL(entry.name).pathname)
  .filter((path) => path.startsWith("/away/api/"));
"""


def heard(driver: Chrome) -> list[tuple[Any, ...]]:
    """The events the page heard on its document, by the place of their element, then in order."""
    events: list[list[Any]] = driver.execute_script("return window.heard;")
    return sorted(map(tuple, events), key=lambda event: event[0])


def shown(driver: Chrome, count: int = 1) -> list[tuple[Any, ...]]:
    """Every element's row, once there are ``count`` and none is loading."""

    def settled(driver: Chrome) -> list[list[Any]] | None:
        rows: list[list[Any]] = driver.execute_script(SHOWN)
        done = len(rows) >= count and all(row[1] not in (None, "loading") for row in rows)
        return rows if done else None

    return [tuple(row) for row in WebDriverWait(driver, WAIT_SECONDS).until(settled)]


def asked(driver: Chrome, count: int) -> list[str]:
    """The paths the page asked of the API, once ``count`` have answered, or after the wait.

    A response enters the page's timeline once its body has come: the element
    reads no body from a 404, so that entry may come a moment after the element shows.
    """
    try:
        WebDriverWait(driver, WAIT_SECONDS).until(lambda d: len(d.execute_script(ASKED)) >= count)
    except TimeoutException:
        pass  # the comparison that follows says what is missing
    paths: list[str] = driver.execute_script(ASKED)
    return sorted(paths)


LOAD, ERROR = "article-rating-load", "article-rating-error"
INVALID: Final = {"reason": "invalid-id", "status": None}


def events_of(rows: list[Row], failure: dict[str, Any], documents: dict[str, Any]) -> list[Any]:
    """What each element of ``rows`` tells the page: its document, or why it shows nothing."""

    def event(row: Row) -> tuple[str, Any]:
        if row[1] == "invalid":
            return (ERROR, INVALID)
        return (LOAD, documents[row[0]]) if row[0] in documents else (ERROR, failure)

    return [(place, *event(row), True) for place, row in enumerate(rows)]


def filled_in(script: bytes) -> list[str]:
    """The two values the build fills in: stars drawn, and the top of the scale."""
    return re.findall(r"^const (?:STARS|TOP) = ([^;]+);", script.decode(), re.MULTILINE)


def test_the_module_is_small_and_fills_in_the_scale() -> None:
    five = embed_script((1, 5))
    assert len(gzip.compress(five, 9)) <= MAX_GZIPPED
    assert filled_in(five) == ["5", "5"]
    assert filled_in(embed_script((0, 10))) == ["10", "10"]
    # A scale too wide for stars is shown as a number, out of its top; no scale, as a number.
    assert filled_in(embed_script((1, 100))) == ["null", "100"]
    assert filled_in(embed_script(None)) == ["null", "null"]
    assert embed_script((1, 5)) == five  # the same bytes every build
    # The labels say the scale in each language's words; without a scale, nothing.
    assert '"other":"Rated {value} out of {top} by {count} readers"' in five.decode()
    assert '"other":"Von {count} Lesern mit {value} bewertet"' in embed_script(None).decode()


@pytest.mark.parametrize(
    ("path", "kind"), [(EMBED_PATH, "text/javascript; charset=utf-8"), (TYPES_PATH, TEXT)]
)
def test_netlify_types_the_module_and_its_types(path: str, kind: str) -> None:
    """netlify dev types files itself, so only Netlify reads this: the JSON rule must not win.

    Of the rules whose path matches, the last that sets a Content-Type wins where
    later rules override, and comes last where values are joined, which is the
    one a browser takes (Fetch, "extract a MIME type").
    """
    with open(REPO / "netlify.toml", "rb") as file:
        rules = tomllib.load(file)["headers"]
    types = [
        rule["values"]["Content-Type"]
        for rule in rules
        if "Content-Type" in rule["values"] and fnmatch.fnmatchcase(f"/{path}", rule["for"])
    ]
    assert types == ["application/json", kind]


@pytest.mark.real_world
def test_the_element_from_the_app(driver: Chrome, app: Host, pages: Pages) -> None:
    host = app
    reply = request(host.port, "GET", f"/{EMBED_PATH}")
    assert (reply.status, reply.body) == (200, (host.site / EMBED_PATH).read_bytes())
    assert (reply.header("Content-Type") or "").replace('"', "") == "text/javascript; charset=utf-8"
    assert reply.header("Access-Control-Allow-Origin") == "*"  # a module from elsewhere needs it
    types = request(host.port, "GET", f"/{TYPES_PATH}")
    assert (types.status, types.body) == (200, (host.site / TYPES_PATH).read_bytes())
    assert (types.header("Content-Type") or "").replace('"', "") == TEXT  # charset="utf-8"

    console(driver)
    driver.get(f"{pages.origin}/page")
    assert shown(driver) == EXPECTED
    shows = {row[0] for row in EXPECTED if row[1] in ("rated", "unrated")}
    documents = {a: json.loads(request(host.port, "GET", ARTICLE.format(a)).body) for a in shows}
    missing = {"reason": "not-found", "status": 404}
    assert heard(driver) == events_of(EXPECTED, missing, documents)
    # One request for the module, one for each article, however many elements name it.
    assert asked(driver, 6) == sorted([f"/{EMBED_PATH}", *map(ARTICLE.format, VALID)])

    # A single-page app adds an element, and changes another's article.
    driver.execute_script(
        "const added = document.createElement('article-rating');"
        f"added.setAttribute('article-id', '{TOTALS}');"
        "document.body.append(added);"
        f"document.querySelector('article-rating').setAttribute('article-id', '{LATER}');"
        f"document.querySelectorAll('article-rating')[3].setAttribute('article-id', 'x');"
    )
    after = shown(driver)
    assert after[0] == rated(LATER, "4.0", 4, "80%")
    assert after[3] == nothing("x", "invalid")
    assert after[-1] == rated(TOTALS, "4.8", 6, "96%")
    assert asked(driver, 7) == sorted([f"/{EMBED_PATH}", *map(ARTICLE.format, (*VALID, LATER))])
    assert console(driver) == [not_found(f"http://127.0.0.1:{host.port}{ARTICLE.format(UNKNOWN)}")]


@pytest.mark.real_world
@pytest.mark.parametrize(
    ("kind", "error", "reason"),
    [
        ("gone", "net::ERR_EMPTY_RESPONSE", {"reason": "network", "status": None}),
        ("fails", "the server responded with a status of 500 (Internal Server Error)", {"reason": "server", "status": 500}),
        ("html", None, {"reason": "bad-response", "status": 200}),
    ],
)  # fmt: skip
def test_an_api_that_fails_shows_nothing_and_throws_nothing(
    kind: str, error: str | None, reason: dict[str, Any], pages: Pages, driver: Chrome
) -> None:
    console(driver)
    driver.get(f"{pages.origin}/broken/{kind}")
    rows = [nothing(row[0], "invalid" if row[1] == "invalid" else "failed") for row in EXPECTED]
    assert shown(driver) == rows
    assert heard(driver) == events_of(rows, reason, {})
    # A failure is not kept: an element added later asks again.
    driver.execute_script(
        "const added = document.createElement('article-rating');"
        f"added.setAttribute('article-id', '{RATED}');"
        "document.body.append(added);"
    )
    assert shown(driver)[-1] == nothing(RATED, "failed")
    assert pages.requests.count(f"/{kind}{ARTICLE.format(RATED)}") == 2
    failed = f"Failed to load resource: {error}"
    expected = [f"{pages.origin}/{kind}{ARTICLE.format(a)} - {failed}" for a in (*VALID, RATED)]
    assert sorted(message for _, _, message in console(driver)) == (
        sorted(expected) if error else []
    )


@pytest.mark.real_world
def test_each_language_from_the_element_a_parent_or_the_page(pages: Pages, driver: Chrome) -> None:
    """Value, count and plural in the closest lang, the built-in texts or the page's own."""
    console(driver)
    driver.get(f"{pages.origin}/languages")
    places = ["element", "parent", "shadow", "html"]  # the order of the page, then its frames
    order = sorted(LANGUAGES, key=lambda row: places.index(row.where))
    assert [row[4:2:-1] for row in shown(driver, len(order))] == [(r.text, r.label) for r in order]
    # The element's lang is watched: the same rating, shown again in the new language.
    driver.execute_script('document.querySelector("[lang=nl]").setAttribute("lang", "de")')
    dutch = order.index(next(r for r in order if r.lang == "nl"))
    assert shown(driver)[dutch][4:2:-1] == GERMAN[::-1]
    assert console(driver) == []


# An element added with article 7, then set to 3 and back to 7 in the same task: what it shows,
# and every event it fires, once its last fetch has long answered.
SEVEN_THREE_SEVEN: Final = """
const done = arguments[arguments.length - 1];
const element = document.createElement("article-rating");
const events = [];
element.addEventListener("article-rating-load", (event) => events.push(event.detail.id));
element.addEventListener("article-rating-error", (event) => events.push(event.detail.reason));
element.setAttribute("article-id", "7");
document.body.append(element);
element.setAttribute("article-id", "3");
element.setAttribute("article-id", "7");
const settled = () => element.state === "rated" ? setTimeout(() => done([element.state, element.shadowRoot.textContent, events]), 500) : setTimeout(settled, 20);
settled();
"""


@pytest.mark.real_world
def test_an_article_id_set_back_at_once_loads_once(pages: Pages, driver: Chrome) -> None:
    driver.get(f"{pages.origin}/languages")
    driver.set_script_timeout(WAIT_SECONDS)
    state, text, events = driver.execute_async_script(SEVEN_THREE_SEVEN)
    assert (state, events) == ("rated", [7])
    assert text.endswith("4.8 (7 ratings)")
