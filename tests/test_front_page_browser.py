"""The front page in a real browser: headless Chromium on the page ``generate.py --serve`` serves.

What a person sees is read as Selenium reads it: visible text only. The
browser's console is kept, so a request the page should not make, a script
error or anything the Content-Security-Policy refuses shows up as a failure.
A test saves the screenshot docs/api-description.md shows, docs/front-page.png,
rewriting it only when the pixels changed.
"""

from __future__ import annotations

import base64
import http.client
import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

import pytest
from selenium.webdriver import Chrome
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from ratings_api.describe import FRONT_PAGE_CSP
from tests.browser import chromium, install_test_tools
from tests.sample import SAMPLE, SAMPLE_BEST
from tests.served import REPO, Served, serving

WIDTH: Final = 1000
HEIGHT: Final = 1200
WAIT_SECONDS: Final = 10.0
SCREENSHOT: Final = REPO / "docs" / "front-page.png"
PNG_SIGNATURE: Final = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="session")
def browser_tools() -> str:
    """Chromium and chromedriver from Debian, installed once a session: a failure fails, never skips."""
    return install_test_tools()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    # base_url is in the sample: the page shows https://ratings.example.com in
    # its curl line, as a deployed site would, while it fetches from 127.0.0.1.
    with serving(tmp_path_factory.mktemp("front-page"), SAMPLE) as site:
        yield site


def browser_log(driver: Chrome) -> list[dict[str, Any]]:
    """The console's entries since the last call; reading them empties the buffer."""
    entries: list[dict[str, Any]] = driver.get_log("browser")  # type: ignore[no-untyped-call]
    return entries


@dataclass
class Browser:
    driver: Chrome
    address: str
    loading: list[dict[str, Any]]  # the console while the page loaded

    def console(self) -> list[tuple[str, str, str]]:
        """The console's new entries since the last call: (level, source, message)."""
        return [(e["level"], e["source"], e["message"]) for e in browser_log(self.driver)]

    def find(self, selector: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def find_all(self, selector: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, selector)


@pytest.fixture(scope="module")
def browser(
    browser_tools: str, served: Served, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Browser]:
    profile = tmp_path_factory.mktemp("chromium") / "profile"
    with chromium(profile, WIDTH, HEIGHT) as driver:
        driver.get(f"{served.address}/")
        # The script has run when it has drawn the stars of the table.
        WebDriverWait(driver, WAIT_SECONDS).until(
            lambda d: (
                len(d.find_elements(By.CSS_SELECTOR, ".best .stars.drawn")) == len(SAMPLE_BEST)
            )
        )
        yield Browser(driver, served.address, browser_log(driver))


def look_up(browser: Browser, text: str) -> WebElement:
    """Type ``text`` in the lookup, press the button, and wait for the outcome; the result box."""
    field = browser.find("#article-id")
    field.clear()
    field.send_keys(text)
    # The click runs the form's handler, which clears the last outcome at once.
    browser.find("#lookup-form button[type=submit]").click()
    result = browser.find("#result")
    WebDriverWait(browser.driver, WAIT_SECONDS).until(
        lambda _: result.get_attribute("data-outcome")
    )
    return result


def not_found_in_console(browser: Browser, article_id: int) -> tuple[str, str, str]:
    # Chromium notes every 4xx a page fetches; this one is the lookup's own.
    return (
        "SEVERE",
        "network",
        (
            f"{browser.address}/away/api/articles/{article_id}/rating/ - Failed to load resource: "
            "the server responded with a status of 404 (Not Found)"
        ),
    )


def test_the_page_loads_cleanly(browser: Browser) -> None:
    assert browser.driver.title == "Article ratings API"
    assert browser.loading == []  # no error, no refused resource, no policy violation


def test_the_page_says_what_the_api_is_and_how_to_call_it(browser: Browser) -> None:
    assert browser.find("h1").text == "Article ratings API"
    assert browser.find("header .lead").text == (
        "The reader ratings of 12 articles (362 ratings, on a scale of 1 to 5), published as a "
        "read-only JSON API of static files: one document per article, ready for any web page to fetch."
    )
    assert (
        browser.find(".endpoint").text
        == "GET https://ratings.example.com/away/api/articles/{id}/rating/"
    )
    assert (
        browser.find("#curl").text == "curl https://ratings.example.com/away/api/articles/3/rating/"
    )


def test_the_copy_button_copies_the_curl_line(browser: Browser) -> None:
    browser.driver.execute_cdp_cmd(
        "Browser.grantPermissions",
        {
            "origin": browser.address,
            "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"],
        },
    )
    button = browser.find("button.copy")
    button.click()
    WebDriverWait(browser.driver, WAIT_SECONDS).until(lambda _: button.text == "Copied")
    pasted = browser.driver.execute_async_script(
        "const done = arguments[0]; navigator.clipboard.readText().then(done, (e) => done(`${e}`));"
    )
    assert pasted == "curl https://ratings.example.com/away/api/articles/3/rating/"
    WebDriverWait(browser.driver, WAIT_SECONDS).until(lambda _: button.text == "Copy")
    assert browser.console() == []


def test_the_best_rated_table(browser: Browser) -> None:
    rows = [
        tuple(cell.text.split()[-1] for cell in row.find_elements(By.TAG_NAME, "td"))
        for row in browser.find_all(".best tbody tr")
    ]
    assert rows == SAMPLE_BEST
    stars = browser.find_all(".best .stars")
    widths = [
        star.find_element(By.CSS_SELECTOR, ".stars-full").get_attribute("style") for star in stars
    ]
    # An average on the scale of 5 fills a fifth of the width a star: 4.8 is 96%.
    assert widths == [f"width: {int(Decimal(row[2]) * 20)}%;" for row in SAMPLE_BEST]
    assert [star.get_attribute("aria-label") for star in stars] == [
        f"{row[2]} out of 5 stars" for row in SAMPLE_BEST
    ]
    # Each id links to its document, served by the API.
    links = [a.get_attribute("href") for a in browser.find_all(".best tbody a")]
    assert links == [f"{browser.address}/away/api/articles/{row[1]}/rating/" for row in SAMPLE_BEST]


def test_the_openapi_link(browser: Browser) -> None:
    link = browser.find("#openapi-link")
    assert link.text == "away/api/openapi.json"
    url = link.get_attribute("href") or ""
    assert url == f"{browser.address}/away/api/openapi.json"
    status, headers, body = get(browser.address, "/away/api/openapi.json")
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body)["openapi"] == "3.1.0"


def test_looking_up_a_missing_id(browser: Browser) -> None:
    browser.console()
    result = look_up(browser, "4")
    assert result.get_attribute("data-outcome") == "missing"
    assert (
        browser.find("#result-message").text
        == "No article has the id 4: the API answered 404 Not Found."
    )
    assert browser.find(".request").text == "GET /away/api/articles/4/rating/ 404 Not Found"
    assert browser.find("#result-json").text == '{\n  "detail": "Not found."\n}'
    assert not browser.find("#result-rating").is_displayed()
    assert browser.console() == [not_found_in_console(browser, 4)]


def test_looking_up_an_existing_id(browser: Browser) -> None:
    browser.console()
    result = look_up(browser, "7")
    assert result.get_attribute("data-outcome") == "found"
    assert browser.find("#result-message").text == "Article 7: 4.8 out of 5 from 6 ratings."
    assert browser.find("#result-average").text == "4.8"
    stars = browser.find("#result-rating .stars")
    assert stars.is_displayed()
    assert stars.get_attribute("aria-label") == "4.8 out of 5 stars"
    assert (
        stars.find_element(By.CSS_SELECTOR, ".stars-full").get_attribute("style") == "width: 96%;"
    )
    assert browser.find(".request").text == "GET /away/api/articles/7/rating/ 200 OK"
    assert browser.find("#result-json").text == (
        '{\n  "article_url": "https://ratings.example.com/away/api/articles/7/",\n  "id": 7,\n'
        '  "rating_sum": 29,\n  "rating_count": 6,\n  "rating_value": "4.8"\n}'
    )
    assert browser.console() == []


def test_looking_up_an_article_not_rated_yet(browser: Browser) -> None:
    browser.console()
    result = look_up(browser, "31")
    assert result.get_attribute("data-outcome") == "found"
    assert browser.find("#result-message").text == "Article 31 is listed but not rated yet."
    stars = browser.find("#result-rating .stars")
    assert stars.find_element(By.CSS_SELECTOR, ".stars-full").get_attribute("style") == "width: 0%;"
    assert browser.console() == []


def test_an_answer_that_is_not_json(browser: Browser, served: Served) -> None:
    # As a misconfigured host might answer: the page says so instead of failing silently.
    path = served.site / "away/api/articles/12/rating/index.json"
    good = path.read_bytes()
    path.write_bytes(b"<!doctype html><title>Welcome</title>\n")
    try:
        browser.console()
        result = look_up(browser, "12")
    finally:
        path.write_bytes(good)
    assert result.get_attribute("data-outcome") == "error"
    assert browser.find("#result-message").text == "The API answered 200 OK, but not with JSON."
    assert browser.find("#result-json").text == "<!doctype html><title>Welcome</title>"
    assert browser.console() == []


@pytest.mark.parametrize("text", ["07", "abc", "-1", "0", "7.0", "", "1" * 20])
def test_a_malformed_id_is_refused_without_a_request(
    browser: Browser, served: Served, text: str
) -> None:
    browser.console()
    requests = served.log.read_text().count("GET /away/api/articles/")
    result = look_up(browser, text)
    assert result.get_attribute("data-outcome") == "invalid"
    assert (
        browser.find("#result-message").text
        == "An article id is a whole number from 1 up, such as 7."
    )
    assert browser.find("#result-json").text == ""
    assert served.log.read_text().count("GET /away/api/articles/") == requests
    assert browser.console() == []


def test_the_policy_is_in_force(browser: Browser) -> None:
    browser.console()
    ran = browser.driver.execute_script(
        "const s = document.createElement('script');"
        "s.textContent = 'window.inlineRan = true';"
        "document.body.append(s);"
        "return window.inlineRan === true;"
    )
    assert ran is False
    # One refusal for each policy in force: the page's <meta>, and the header once the server sends it.
    _, headers, _ = get(browser.address, "/")
    policies = 2 if "Content-Security-Policy" in headers else 1
    refusal = "Executing inline script violates the following Content Security Policy directive 'script-src 'self''"
    entries = browser.console()
    assert len(entries) == policies, entries
    for level, source, message in entries:
        assert (level, source) == ("SEVERE", "security")
        assert refusal in message


def get(address: str, path: str) -> tuple[int, dict[str, str], bytes]:
    host, port = address.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/assets/front-page.js", 'text/javascript; charset="utf-8"'),
        ("/assets/front-page.css", 'text/css; charset="utf-8"'),
        ("/assets/star.svg", "image/svg+xml"),
        ("/", 'text/html; charset="utf-8"'),
    ],
)
def test_the_page_and_its_files_are_served_with_their_types(
    served: Served, path: str, content_type: str
) -> None:
    status, headers, _ = get(served.address, path)
    assert status == 200
    assert headers["Content-Type"] == content_type
    assert headers["X-Content-Type-Options"] == "nosniff"  # so a wrong type would be refused


@pytest.mark.parametrize("path", ["/", "/index.html"])
def test_the_server_sends_the_policy_with_the_front_page(served: Served, path: str) -> None:
    """Needs the server change in the report: until then the page's <meta> policy alone holds."""
    _, headers, _ = get(served.address, path)
    assert headers.get("Content-Security-Policy") == FRONT_PAGE_CSP


def test_the_screenshot(browser: Browser) -> None:
    look_up(browser, "7")
    # No caret blinking in the field, no button left in its hover or focus state.
    browser.driver.execute_script("document.activeElement.blur(); window.scrollTo(0, 0);")
    height = browser.driver.execute_script("return document.documentElement.scrollHeight")
    shot = browser.driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": WIDTH, "height": height, "scale": 1},
        },
    )
    png = base64.b64decode(shot["data"], validate=True)
    assert png.startswith(PNG_SIGNATURE)
    assert png_size(png) == (WIDTH, height)
    SCREENSHOT.parent.mkdir(exist_ok=True)
    if not SCREENSHOT.exists() or SCREENSHOT.read_bytes() != png:
        SCREENSHOT.write_bytes(png)


def png_size(png: bytes) -> tuple[int, int]:
    width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk comes first
    return width, height


def test_the_page_needs_no_file_from_elsewhere(browser: Browser) -> None:
    """Every resource the page loaded came from its own site."""
    urls = browser.driver.execute_script(
        "return performance.getEntriesByType('resource').map((entry) => entry.name);"
    )
    assert urls, "the page loaded nothing: its script and style sheet are missing"
    assert all(url.startswith(f"{browser.address}/") for url in urls), urls
    assert set(urls) >= {
        f"{browser.address}/assets/front-page.js",
        f"{browser.address}/assets/front-page.css",
    }
