"""The ``<article-rating>`` element in headless Chromium, embedded from every host of the contract.

A page of another origin, under a strict Content-Security-Policy, holds the two documented lines;
a script error or a refusal by the policy fails. docs/embed.png is rewritten only on new pixels.
"""

from __future__ import annotations

import fnmatch
import gzip
import http.server
import re
import threading
import tomllib
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
from selenium.common.exceptions import TimeoutException
from selenium.webdriver import Chrome
from selenium.webdriver.support.ui import WebDriverWait

from ratings_api.embed import EMBED_PATH, MAX_GZIPPED, embed_script
from tests.browser import chromium, console, install_test_tools, not_found, save_screenshot
from tests.contract import Host, request
from tests.edges import start_nginx_edge, start_worker
from tests.hosts import (
    install_host_tools,
    start_netlify_dev,
    start_nginx,
    start_serve,
    start_wrangler,
)

REPO: Final = Path(__file__).resolve().parent.parent
SCREENSHOT: Final = REPO / "docs" / "embed.png"
WIDTH: Final = 560
HEIGHT: Final = 600
WAIT_SECONDS: Final = 15.0
STARTERS: Final[dict[str, Callable[[Path], Host]]] = {
    "generate --serve": start_serve,
    "nginx": start_nginx,
    "netlify dev": start_netlify_dev,
    "wrangler pages dev": start_wrangler,
    "nginx → S3": start_nginx_edge,
    "Worker → R2": start_worker,
}
# In tests.contract.RATINGS: 7 rated one by one, 12 given as totals (the same
# 4.8), 31 not rated yet, 1000000 rated once; no article 2.
RATED, TOTALS, UNRATED, ONCE, UNKNOWN, LATER = "7", "12", "31", "1000000", "2", "1"
JAVASCRIPT: Final = ("text/javascript", "application/javascript")
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


def page(api: str) -> bytes:
    """The host page: the two documented lines, once for each state, and the styled example."""

    def row(label: str, article: str | None) -> str:
        attribute = "" if article is None else f' article-id="{article}"'
        return f"<p><code>{label}</code> <article-rating{attribute}></article-rating></p>\n"

    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>Embedded</title>\n'
        '<link rel="stylesheet" href="/page.css">\n'
        f'<script type="module" src="{api}/{EMBED_PATH}"></script>\n'
        "</head><body>\n<h1>&lt;article-rating&gt; on another site</h1>\n"
        + row(f'article-id="{RATED}"', RATED)
        + row(f'article-id="{TOTALS}"', TOTALS)
        + row(f'article-id="{ONCE}"', ONCE)
        + row(f'article-id="{UNRATED}"', UNRATED)
        + row(f'article-id="{UNKNOWN}" (no such article)', UNKNOWN)
        + row('article-id="07" (not an id)', "07")
        + row("(no article-id)", None)
        + row(f'article-id="{RATED}" again', RATED)
        + '<div class="styled">'
        + row("styled from outside", RATED)
        + "</div>\n</body></html>\n"
    ).encode()


# The module served by the page's own server, below a folder whose API is broken:
# how the element meets a network failure, an error status, or an answer not JSON.
BROKEN: Final = ("gone", "fails", "html")


@dataclass
class PageServer:
    port: int
    embed: bytes  # the module, as the build writes it for the contract's scale
    requests: list[str]

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def serve_pages(embed: bytes) -> tuple[http.server.ThreadingHTTPServer, PageServer]:
    state = PageServer(0, embed, [])

    class Pages(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.requests.append(self.path)
            if self.path.startswith("/page/"):
                api = f"http://127.0.0.1:{self.path.removeprefix('/page/')}"
                self.answer(200, "text/html; charset=utf-8", page(api), page_policy(api))
            elif self.path.startswith("/broken/"):
                api = f"{state.origin}/{self.path.removeprefix('/broken/')}"
                self.answer(200, "text/html; charset=utf-8", page(api), page_policy(state.origin))
            elif self.path == "/page.css":
                self.answer(200, "text/css", PAGE_CSS)
            else:
                self.broken(self.path.split("/")[1])

        def broken(self, kind: str) -> None:
            if kind not in BROKEN:
                self.answer(404, "text/plain", b"no such page\n")
            elif self.path == f"/{kind}/{EMBED_PATH}":
                self.answer(200, "text/javascript", state.embed)
            elif kind == "gone":
                self.close_connection = True  # no answer at all: a network error
            elif kind == "fails":
                self.answer(500, "application/json", b'{"detail": "A server error occurred."}\n')
            else:
                self.answer(200, "text/html", b"<!doctype html><title>Welcome</title>\n")

        def answer(self, status: int, kind: str, body: bytes, policy: str = "") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Access-Control-Allow-Origin", "*")
            if policy:
                self.send_header("Content-Security-Policy", policy)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    state.port = server.server_address[1]
    return server, state


@pytest.fixture(scope="module")
def starting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[Host]]]:
    """Every host, started at the same time (a start is mostly waiting), stopped at the end."""
    install_host_tools()  # once, before the threads: it is cached, but not locked
    folders = {name: tmp_path_factory.mktemp("embed-host") for name in STARTERS}
    pool = ThreadPoolExecutor(len(STARTERS))
    futures = {name: pool.submit(STARTERS[name], folders[name]) for name in STARTERS}
    pool.shutdown(wait=False)
    try:
        yield futures
    finally:
        for future in futures.values():
            if future.exception() is None:  # waits for the start to end
                future.result().stop()


@pytest.fixture(scope="module")
def hosts(starting: dict[str, Future[Host]]) -> dict[str, Host]:
    """The running hosts; the first that failed to start fails the test, with its output."""
    return {name: future.result() for name, future in starting.items()}


@pytest.fixture(scope="module")
def driver(
    starting: dict[str, Future[Host]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Chrome]:
    """Chromium, started while the hosts start."""
    install_test_tools()
    with chromium(tmp_path_factory.mktemp("embed-chromium") / "profile", WIDTH, HEIGHT) as browser:
        yield browser


@pytest.fixture(scope="module")
def pages() -> Iterator[PageServer]:
    # The module as the build writes it for the contract's scale, [1, 5].
    server, state = serve_pages(embed_script((1, 5)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


SHOWN: Final = """
return [...document.querySelectorAll("article-rating")].map((element) => {
  const root = element.shadowRoot;
  const rating = root && root.querySelector("[part~=rating]");
  const stars = root && root.querySelector("[part~=stars]");
  const filled = root && root.querySelector("[part~=filled]");
  const text = root && root.querySelector("[part~=text]");
  return {
    id: element.getAttribute("article-id"),
    state: element.state,
    role: rating && rating.getAttribute("role"),
    label: rating && rating.getAttribute("aria-label"),
    text: text && text.textContent,
    stars: stars && stars.firstChild.textContent,
    filled: filled && filled.style.width,
    width: element.getBoundingClientRect().width,
  };
});
"""
SETTLED: Final = (
    'return [...document.querySelectorAll("article-rating")]'
    '.every((element) => element.state && element.state !== "loading");'
)
ASKED: Final = """
return performance.getEntriesByType("resource")
  .map((entry) => new URL(entry.name).pathname)
  .filter((path) => path.startsWith("/away/api/"));
"""


def shown(driver: Chrome) -> list[dict[str, Any]]:
    WebDriverWait(driver, WAIT_SECONDS).until(lambda d: d.execute_script(SETTLED))
    result: list[dict[str, Any]] = driver.execute_script(SHOWN)
    return result


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


def rated(article: str, value: str, count: int, filled: str) -> dict[str, Any]:
    ratings, readers = ("rating", "reader") if count == 1 else ("ratings", "readers")
    return {
        "id": article,
        "state": "rated",
        "role": "img",
        "label": f"Rated {value} out of 5 by {count} {readers}",
        "text": f"{value} ({count} {ratings})",
        "stars": "☆☆☆☆☆",
        "filled": filled,
    }


def nothing(article: str | None, state: str) -> dict[str, Any]:
    empty = {"role": None, "label": None, "text": None, "stars": None, "filled": None}
    return {"id": article, "state": state, **empty, "width": 0}


EXPECTED: Final = [
    rated(RATED, "4.8", 6, "96%"),
    rated(TOTALS, "4.8", 6, "96%"),
    rated(ONCE, "5.0", 1, "100%"),
    {
        "id": UNRATED,
        "state": "unrated",
        "role": "img",
        "label": "Not rated yet",
        "text": "Not rated yet",
        "stars": None,
        "filled": None,
    },
    nothing(UNKNOWN, "missing"),
    nothing("07", "invalid"),
    nothing(None, "invalid"),
    rated(RATED, "4.8", 6, "96%"),
    rated(RATED, "4.8", 6, "96%"),
]


def without_width(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows, with the width kept only where it must be 0: nothing shown."""
    return [
        row if row.get("width") == 0 else {k: v for k, v in row.items() if k != "width"}
        for row in rows
    ]


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


def test_netlify_types_the_module_as_javascript() -> None:
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
        if "Content-Type" in rule["values"] and fnmatch.fnmatchcase(f"/{EMBED_PATH}", rule["for"])
    ]
    assert types == ["application/json", "text/javascript; charset=utf-8"]


@pytest.mark.parametrize("name", list(STARTERS))
def test_the_element_from_each_host(
    name: str, driver: Chrome, hosts: dict[str, Host], pages: PageServer
) -> None:
    host = hosts[name]
    reply = request(host.port, "GET", f"/{EMBED_PATH}")
    assert reply.status == 200
    assert reply.body == (host.site / EMBED_PATH).read_bytes()
    kind = reply.header("Content-Type") or ""
    assert kind.split(";")[0] in JAVASCRIPT, f"{name}: {kind}"
    assert reply.header("Access-Control-Allow-Origin") == "*"  # a module from elsewhere needs it
    assert reply.header("X-Content-Type-Options") == "nosniff"
    host.holds("`Cache-Control` of a file (200, 206, 304)", f"`{reply.header('Cache-Control')}`")

    console(driver)
    driver.get(f"{pages.origin}/page/{host.port}")
    assert without_width(shown(driver)) == EXPECTED
    # One request for the module, one for each article, however many elements name it.
    assert asked(driver, 6) == sorted(
        [
            f"/{EMBED_PATH}",
            *(f"/away/api/articles/{a}/rating/" for a in (RATED, TOTALS, ONCE, UNRATED, UNKNOWN)),
        ]
    )

    # A single-page app adds an element, and changes another's article.
    driver.execute_script(
        "const added = document.createElement('article-rating');"
        f"added.setAttribute('article-id', '{TOTALS}');"
        "document.body.append(added);"
        f"document.querySelector('article-rating').setAttribute('article-id', '{LATER}');"
        f"document.querySelectorAll('article-rating')[3].setAttribute('article-id', 'x');"
    )
    after = without_width(shown(driver))
    assert after[0] == rated(LATER, "4.0", 4, "80%")
    assert after[3] == nothing("x", "invalid")
    assert after[-1] == rated(TOTALS, "4.8", 6, "96%")
    paths = asked(driver, 7)
    assert paths.count(f"/away/api/articles/{LATER}/rating/") == 1
    assert paths.count(f"/away/api/articles/{TOTALS}/rating/") == 1
    assert len(paths) == 7
    api = f"http://127.0.0.1:{host.port}/away/api/articles"
    assert console(driver) == [not_found(f"{api}/{UNKNOWN}/rating/")]


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("gone", "net::ERR_EMPTY_RESPONSE"),
        ("fails", "the server responded with a status of 500 (Internal Server Error)"),
        ("html", None),
    ],
)
def test_an_api_that_fails_shows_nothing_and_throws_nothing(
    kind: str, error: str | None, pages: PageServer, driver: Chrome
) -> None:
    console(driver)
    driver.get(f"{pages.origin}/broken/{kind}")
    articles = (RATED, TOTALS, ONCE, UNRATED, UNKNOWN)
    failed = {article: nothing(article, "failed") for article in articles}
    assert shown(driver) == [
        *(failed[a] for a in articles),
        nothing("07", "invalid"),
        nothing(None, "invalid"),
        failed[RATED],
        failed[RATED],
    ]
    # A failure is not kept: an element added later asks again.
    driver.execute_script(
        f"document.body.append(Object.assign(document.createElement('article-rating'), {{}}));"
        f"document.body.lastChild.setAttribute('article-id', '{RATED}');"
    )
    assert shown(driver)[-1] == failed[RATED]
    path = f"/{kind}/away/api/articles/{RATED}/rating/"
    assert pages.requests.count(path) == 2
    api = f"{pages.origin}/{kind}/away/api/articles"
    expected = (
        []
        if error is None
        else [(f"{api}/{a}/rating/ - Failed to load resource: {error}") for a in (*articles, RATED)]
    )
    assert sorted(message for _, _, message in console(driver)) == sorted(expected)


def test_the_screenshot(driver: Chrome, hosts: dict[str, Host], pages: PageServer) -> None:
    driver.get(f"{pages.origin}/page/{hosts['generate --serve'].port}")
    shown(driver)
    height = driver.execute_script(
        "return Math.ceil(document.body.getBoundingClientRect().bottom) + 16"
    )
    save_screenshot(driver, WIDTH, height, SCREENSHOT)
