"""The ``<article-rating>`` element in headless Chromium, embedded from the app (``--serve``).

A page of another origin (``localhost`` for the app's ``127.0.0.1``), under a strict
Content-Security-Policy, holds the two documented lines once for each state, each language and
each place its language may be set (the elements and what each shows: embed-page.txt); a
script error or a refusal by the policy fails. The app serves the page too, over a site built
from a catalogue of its own; the failures of an API are a small server's. No suite checks the
hosts' own ``embed.js`` in a browser. The module's own bytes, and Netlify's types for it, are
test_embed_types.py's.
"""

from __future__ import annotations

import html
import http.server
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

import pytest
from selenium.webdriver import Chrome
from selenium.webdriver.support.ui import WebDriverWait

from ratings_api.embed import EMBED_PATH
from tests.browser import console, not_found
from tests.contract import RATINGS, Host, data_lines, request
from tests.hosts import start_serve
from tests.test_embed_types import TYPED

WIDTH: Final = 560
HEIGHT: Final = 600
WAIT_SECONDS: Final = 15.0
ARTICLE: Final = "/away/api/articles/{}/rating/"
# Added to every document: it listens as a page would, and reads the page for the test.
HERE: Final = Path(__file__).parent
PAGE_SCRIPT: Final = (HERE / "embed-page.js").read_text(encoding="utf-8")
PAGE_CSS: Final = HERE / "embed-page.css"  # the host page's own sheet
# The contract's catalogue (7 rated one by one, 12 given as totals: the same 4.8 of 6; 31 not
# rated yet; 1000000 rated once; 1 four times; no article 2), and articles of as many ratings
# as a language's plural needs: article N has N ratings, but for 8 (2) and 2000000 (a million).
CATALOGUE: Final = RATINGS + "".join(
    f"  {article}: {{sum: {total}, count: {count}}}\n"
    for article, total, count in [
        (3, 12, 3), (5, 24, 5), (6, 29, 6), (8, 9, 2), (9, 43, 9), (21, 101, 21),
        (22, 106, 22), (301, 1445, 301), (2000000, 4800000, 1000000),
    ]
)  # fmt: skip


@dataclass(frozen=True)
class Shown:
    """An element of the page: a line of embed-page.txt, which says what each field is."""

    where: str
    article: str = ""  # none: no article-id
    text: str = ""
    label: str = ""
    attributes: str = ""
    note: str = ""


ROWS: Final = [
    Shown(*map(str.strip, line.split("|"))) for line in data_lines(HERE / "embed-page.txt")
]
FRAMES: Final = list(dict.fromkeys(row.attributes for row in ROWS if row.where == "html"))
ON_PAGE: Final = [row for row in ROWS if row.where != "html"]
HEARD: Final = [row for row in ON_PAGE if row.where != "shadow"]  # the document's own elements
ID: Final = re.compile(r"[1-9][0-9]*")  # an article id, as the element reads one
# The articles the page asks for: each once, however many elements name it.
ASKED: Final = {row.article for row in ON_PAGE if ID.fullmatch(row.article)}


def page(api: str, rows: list[Shown], frames: list[str], root: str = 'lang="en"') -> str:
    """A page of ``rows`` and ``frames`` (by their <html> attributes), with the module of ``api``,
    under a policy that lets the API's origin run a script and answer a fetch, nothing else."""

    def markup(row: Shown) -> str:
        article = f'article-id="{row.article}"' if row.article else ""
        own = row.attributes if row.where == "element" else ""
        caption = f"{row.attributes} {article}".strip() or "(no article-id)"
        caption = html.escape(f"{caption} ({row.note})" if row.note else caption)
        inside = f"<code>{caption}</code> <article-rating {article} {own}></article-rating>"
        if row.where == "element":
            return f'<div lang="ja"><p>{inside}</p></div>\n'
        if row.where == "shadow":  # declarative: no script
            inside = f'<span data-card><template shadowrootmode="open">{inside}</template></span>'
        return f"<p {row.attributes}>{inside}</p>\n"

    origin = "/".join(api.split("/")[:3])
    policy = (
        f"default-src 'none'; script-src {origin}; connect-src {origin}; style-src 'self'; "
        "frame-src 'self'; require-trusted-types-for 'script'; trusted-types 'none'; "
        "base-uri 'none'"
    )
    body = "".join(map(markup, rows))
    body += "".join(f'<iframe src="/frame/{n}/"></iframe>\n' for n in range(len(frames)))
    return (
        f'<!doctype html>\n<html {root}><head><meta charset="utf-8"><title>Embedded</title>\n'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n'
        f'<link rel="stylesheet" href="/page.css">\n'
        f'<script type="module" src="{api}/{EMBED_PATH}"></script>\n'
        "</head><body>\n<h1>&lt;article-rating&gt; on another site</h1>\n"
        f"{body}</body></html>\n"
    )


def expected(row: Shown, documents: dict[str, Any], failure: str = "missing") -> list[Any]:
    """What ``row`` shows: its id, state, the role and label of its rating, its text, the stars
    drawn and the width filled, and whether it takes no room at all (nothing shown)."""
    document = documents.get(row.article)
    if document is None:  # an id the API failed, or no id at all
        state = failure if ID.fullmatch(row.article) else "invalid"
        return [row.article or None, state, None, None, None, None, None, True]
    if document["rating_count"] == 0:
        return [row.article, "unrated", "img", row.label, row.text, None, None, False]
    width = f"{int(Decimal(document['rating_value']) * 20)}%"
    return [row.article, "rated", "img", row.label, row.text, "☆☆☆☆☆", width, False]


# How the element meets a network failure, an error status, or an answer not JSON: the module
# below a folder of a server whose API is broken; its answer (None: the connection closed
# unanswered), what Chromium logs, and what the element tells the page.
BROKEN: Final = {
    "gone": (None, "net::ERR_EMPTY_RESPONSE", {"reason": "network", "status": None}),
    "fails": ((500, "application/json", b'{"detail": "A server error occurred."}\n'), "the server responded with a status of 500 (Internal Server Error)", {"reason": "server", "status": 500}),
    "html": ((200, "text/html", b"<!doctype html><title>Welcome</title>\n"), None, {"reason": "bad-response", "status": 200}),
}  # fmt: skip


def write(site: Path, files: dict[str, str]) -> None:
    """Write each of ``files`` (text by path) into the site folder ``site``."""
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, browser: Chrome) -> Iterator[Host]:
    """The app on the catalogue, serving the pages too; the browser listening on every page."""
    host = start_serve(tmp_path_factory.mktemp("embed-app"), CATALOGUE)
    api = f"http://127.0.0.1:{host.port}"
    files = {"page.css": PAGE_CSS.read_text(encoding="utf-8")}
    files["page/index.html"] = page(api, ON_PAGE, FRAMES)
    for number, root in enumerate(FRAMES):
        chosen = [row for row in ROWS if row.where == "html" and row.attributes == root]
        files[f"frame/{number}/index.html"] = page(api, chosen, [], root)
    write(host.site, files)
    browser.set_window_size(WIDTH, HEIGHT)
    script = {"source": PAGE_SCRIPT}
    added = browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", script)
    try:
        yield host
    finally:
        browser.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", added)
        host.stop()


@pytest.fixture(scope="module")
def broken(app: Host, browser: Chrome) -> Iterator[tuple[str, list[str]]]:
    """The broken server's origin, and the paths asked of it; the app serves its pages."""
    requests: list[str] = []
    module = (app.site / EMBED_PATH).read_bytes()

    class Broken(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requests.append(self.path)
            kind = self.path.split("/")[1]
            own = self.path == f"/{kind}/{EMBED_PATH}"  # the module: served well
            answer = (200, "text/javascript", module) if own else BROKEN[kind][0]
            if answer is None:
                return  # the connection closed unanswered
            status, type_, body = answer
            self.send_response(status)
            self.send_header("Content-Type", type_)
            self.send_header("Access-Control-Allow-Origin", "*")
            self.end_headers()
            self.wfile.write(body)

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Broken) as server:
        origin = f"http://127.0.0.1:{server.server_address[1]}"
        pages = {f"broken/{k}/index.html": page(f"{origin}/{k}", ON_PAGE, []) for k in BROKEN}
        write(app.site, pages)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield origin, requests
        finally:
            browser.get("about:blank")  # before it stops: no fetch of its pages left to fail
            console(browser)
            server.shutdown()  # once its loop has stopped


def heard(driver: Chrome) -> list[list[Any]]:
    """The events the page heard from its own elements, by their place, then in order."""
    return sorted(driver.execute_script("return heard;"), key=lambda event: event[0])


def shown(driver: Chrome, count: int = 1) -> list[list[Any]]:
    """Every element's row, as ``expected`` says, once there are ``count`` and none is loading."""
    script = "return shown(arguments[0]);"
    return WebDriverWait(driver, WAIT_SECONDS).until(lambda d: d.execute_script(script, count))


def asked(driver: Chrome, count: int) -> list[str]:
    """The paths the page asked of the API, once ``count`` have answered."""
    wait = WebDriverWait(driver, WAIT_SECONDS)
    script = "return asked(arguments[0]);"
    return sorted(wait.until(lambda d: d.execute_script(script, count), f"fewer than {count}"))


LOAD, ERROR = "article-rating-load", "article-rating-error"


def events_of(rows: list[Shown], failure: dict[str, Any], documents: dict[str, Any]) -> list[Any]:
    """What each element of ``rows`` tells the page: its document, or why it shows nothing."""

    def event(row: Shown) -> tuple[str, Any]:
        if not ID.fullmatch(row.article):
            return (ERROR, {"reason": "invalid-id", "status": None})
        return (LOAD, documents[row.article]) if row.article in documents else (ERROR, failure)

    return [[place, *event(row), True] for place, row in enumerate(rows)]


@pytest.mark.real_world
def test_the_element_from_the_app(browser: Chrome, app: Host) -> None:
    for path, kind in TYPED:  # the type's charset="utf-8" read as a browser does
        reply = request(app.port, "GET", f"/{path}")
        assert (reply.status, reply.body) == (200, (app.site / path).read_bytes())
        assert (reply.header("Content-Type") or "").replace('"', "") == kind
        assert reply.header("Access-Control-Allow-Origin") == "*"  # a module from elsewhere

    console(browser)
    browser.get(f"http://localhost:{app.port}/page/")  # another origin
    replies = {a: request(app.port, "GET", ARTICLE.format(a)) for a in (*ASKED, "1")}
    documents = {a: json.loads(r.body) for a, r in replies.items() if r.status == 200}
    assert shown(browser, len(ROWS)) == [expected(row, documents) for row in ROWS]
    assert heard(browser) == events_of(HEARD, {"reason": "not-found", "status": 404}, documents)
    # One request for the module, one for each article, however many elements name it.
    paths = [f"/{EMBED_PATH}", *map(ARTICLE.format, ASKED)]
    assert asked(browser, len(paths)) == sorted(paths)

    # A single-page app changes an element's article, and another's, and adds an element; an
    # element's lang is watched: the same rating, shown again in the new language.
    browser.execute_script(
        "const all = document.querySelectorAll('article-rating');"
        "all[0].setAttribute('article-id', '1'); all[3].setAttribute('article-id', 'x');"
        "add('12', document.querySelector('p'));"
        'document.querySelector("[lang=nl]").setAttribute("lang", "de");'
    )
    rows = [*ROWS]
    rows[0] = Shown("parent", "1", "4.0 (4 ratings)", "Rated 4.0 out of 5 by 4 readers")
    rows[3] = Shown("parent", "x")
    nl = [row.attributes for row in ROWS].index('lang="nl"')  # now German
    rows[nl] = Shown("element", "6", "4,8 (6 Bewertungen)", "Von 6 Lesern mit 4,8 von 5 bewertet")
    rows.insert(1, ROWS[1])  # the element added, beside the first: article 12
    assert shown(browser, len(rows)) == [expected(row, documents) for row in rows]
    assert asked(browser, len(paths) + 1) == sorted([*paths, ARTICLE.format(1)])
    assert console(browser) == [not_found(f"http://127.0.0.1:{app.port}{ARTICLE.format(2)}")]

    # An element added with article 3, then set to 9 and back to 3 in the same task: what it
    # shows, and every event it fires, once its last fetch has long answered.
    browser.set_script_timeout(WAIT_SECONDS)
    state, text, events = browser.execute_async_script("setBack('3', '9', arguments[0]);")
    assert (state, events) == ("rated", [3])
    assert text.endswith("4.0 (3 ratings)")


@pytest.mark.real_world
@pytest.mark.parametrize("kind", BROKEN)
def test_an_api_that_fails_shows_nothing_and_throws_nothing(
    kind: str, app: Host, broken: tuple[str, list[str]], browser: Chrome
) -> None:
    _, error, reason = BROKEN[kind]
    origin, requests = broken
    console(browser)
    browser.get(f"http://localhost:{app.port}/broken/{kind}/")
    assert shown(browser, len(ON_PAGE)) == [expected(row, {}, "failed") for row in ON_PAGE]
    assert heard(browser) == events_of(HEARD, reason, {})
    # A failure is not kept: an element added later asks again.
    browser.execute_script("add('7', document.body);")
    assert shown(browser)[-1] == expected(Shown("parent", "7"), {}, "failed")
    assert requests.count(f"/{kind}{ARTICLE.format(7)}") == 2
    failed = f"Failed to load resource: {error}"
    urls = [f"{origin}/{kind}{ARTICLE.format(a)}" for a in (*ASKED, "7")]
    assert sorted(message for _, _, message in console(browser)) == (
        sorted(f"{url} - {failed}" for url in urls) if error else []
    )
