"""The front page in headless Chromium, as ``generate.py --serve`` serves it.

Text is read as a person sees it; the console is kept, so a stray request, a script error or a
refusal by the policy fails. docs/front-page.png is made by scripts/screenshots, never by a test.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any, Final

import pytest
from selenium.webdriver import Chrome
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser import console, not_found
from tests.sample import SAMPLE, SAMPLE_BEST
from tests.served import Served, serving

pytestmark = pytest.mark.real_world

WIDTH: Final = 1000
HEIGHT: Final = 1200
WAIT_SECONDS: Final = 10.0
CURL: Final = "curl https://ratings.example.com/away/api/articles/3/rating/"
NOT_JSON: Final = "<!doctype html><title>Welcome</title>"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    # base_url is in the sample: the page shows https://ratings.example.com in
    # its curl line, as a deployed site would, while it fetches from 127.0.0.1.
    with serving(tmp_path_factory.mktemp("front-page"), SAMPLE) as site:
        # As a misconfigured host might answer for article 12: not JSON.
        (site.site / "away/api/articles/12/rating/index.json").write_text(f"{NOT_JSON}\n")
        yield site


def drawn(driver: Chrome) -> bool:
    """Whether the page's script has run: it has drawn the stars of the table."""
    return len(driver.find_elements(By.CSS_SELECTOR, ".best .stars.drawn")) == len(SAMPLE_BEST)


@pytest.fixture(scope="module")
def page(served: Served, browser: Chrome) -> Chrome:
    """The front page, loaded; the console while it loaded is left to read."""
    browser.set_window_size(WIDTH, HEIGHT)
    browser.get("about:blank")  # the pages of another module stop, and what they logged goes
    console(browser)
    browser.get(f"{served.address}/")
    WebDriverWait(browser, WAIT_SECONDS).until(drawn)
    return browser


def find(driver: Chrome | WebElement, selector: str) -> WebElement:
    return driver.find_element(By.CSS_SELECTOR, selector)


def look_up(driver: Chrome, text: str) -> WebElement:
    """Type ``text`` in the lookup, press the button, and wait for the outcome; the result box."""
    field = find(driver, "#article-id")
    field.clear()
    field.send_keys(text)
    # The click runs the form's handler, which clears the last outcome at once.
    find(driver, "#lookup-form button[type=submit]").click()
    result = find(driver, "#result")
    WebDriverWait(driver, WAIT_SECONDS).until(lambda _: result.get_attribute("data-outcome"))
    return result


def test_the_page_loads_cleanly_and_says_what_the_api_is(page: Chrome, served: Served) -> None:
    assert console(page) == []  # no error, no refused resource, no policy violation
    assert page.title == find(page, "h1").text == "Article ratings API"
    assert find(page, "header .lead").text == (
        "The reader ratings of 12 articles (362 ratings, on a scale of 1 to 5), published as a "
        "read-only JSON API of static files: one document per article, ready for any web page to fetch."
    )
    endpoint = "GET https://ratings.example.com/away/api/articles/{id}/rating/"
    assert find(page, ".endpoint").text == endpoint
    assert find(page, "#curl").text == CURL
    link = find(page, "#openapi-link")
    assert link.text == "away/api/openapi.json"
    assert link.get_attribute("href") == f"{served.address}/away/api/openapi.json"
    # The best-rated table: a row's cells, its stars (an average on the scale of 5 fills a fifth
    # of a star's width: 4.8 is 96%) and its link.
    rows = page.find_elements(By.CSS_SELECTOR, ".best tbody tr")
    for row, best in zip(rows, SAMPLE_BEST, strict=True):
        assert tuple(td.text.split()[-1] for td in row.find_elements(By.TAG_NAME, "td")) == best
        stars, width = find(row, ".stars"), int(Decimal(best[2]) * 20)
        assert stars.get_attribute("aria-label") == f"{best[2]} out of 5 stars"
        assert find(stars, ".stars-full").get_attribute("style") == f"width: {width}%;"
        url = f"{served.address}/away/api/articles/{best[1]}/rating/"
        assert find(row, "a").get_attribute("href") == url


def test_the_copy_button_copies_the_curl_line(page: Chrome, served: Served) -> None:
    permissions = ["clipboardReadWrite", "clipboardSanitizedWrite"]
    grant = {"origin": served.address, "permissions": permissions}
    page.execute_cdp_cmd("Browser.grantPermissions", grant)
    button = find(page, "button.copy")
    button.click()
    WebDriverWait(page, WAIT_SECONDS).until(lambda _: button.text == "Copied")
    pasted = page.execute_async_script(
        "const done = arguments[0]; navigator.clipboard.readText().then(done, (e) => done(`${e}`));"
    )
    assert pasted == CURL
    WebDriverWait(page, WAIT_SECONDS).until(lambda _: button.text == "Copy")
    assert console(page) == []


DOCUMENT_7: Final = (
    '{\n  "article_url": "https://ratings.example.com/away/api/articles/7/",\n  "id": 7,\n'
    '  "rating_sum": 29,\n  "rating_count": 6,\n  "rating_value": "4.8"\n}'
)
INVALID: Final = {
    "#result-message": "An article id is a whole number from 1 up, such as 7.",
    "#result-json": "",
}
# What a lookup shows: the outcome, texts by selector, the stars (label, width) or none.
LOOKUPS: Final[list[tuple[str, str, dict[str, str], tuple[str, str] | None]]] = [
    ("4", "missing", {
        "#result-message": "No article has the id 4: the API answered 404 Not Found.",
        ".request": "GET /away/api/articles/4/rating/ 404 Not Found",
        "#result-json": '{\n  "detail": "Not found."\n}',
    }, None),
    ("7", "found", {
        "#result-message": "Article 7: 4.8 out of 5 from 6 ratings.",
        "#result-average": "4.8",
        ".request": "GET /away/api/articles/7/rating/ 200 OK",
        "#result-json": DOCUMENT_7,
    }, ("4.8 out of 5 stars", "width: 96%;")),
    ("31", "found", {"#result-message": "Article 31 is listed but not rated yet."}, ("not rated yet", "width: 0%;")),
    # The page says so instead of failing silently.
    ("12", "error", {
        "#result-message": "The API answered 200 OK, but not with JSON.", "#result-json": NOT_JSON,
    }, None),
    # Refused without a request.
    *((text, "invalid", INVALID, None) for text in ["07", "abc", "-1", "0", "7.0", "", "1" * 20]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("typed", "outcome", "texts", "stars"), LOOKUPS, ids=[f"{row[1]}-{row[0]}" for row in LOOKUPS]
)
def test_looking_up_an_id(
    page: Chrome, served: Served, typed: str, outcome: str, texts: dict[str, str], stars: Any
) -> None:
    console(page)
    requests = served.log.read_text().count("GET /away/api/articles/")
    result = look_up(page, typed)
    assert result.get_attribute("data-outcome") == outcome
    assert {selector: find(page, selector).text for selector in texts} == texts
    label = find(page, "#result-rating .stars").get_attribute("aria-label")
    drawn = (label, find(page, "#result-rating .stars-full").get_attribute("style"))
    assert (drawn if find(page, "#result-rating").is_displayed() else None) == stars
    if outcome == "invalid":
        assert served.log.read_text().count("GET /away/api/articles/") == requests
    # The lookup's own 404, and nothing else.
    url = f"{served.address}/away/api/articles/{typed}/rating/"
    assert console(page) == ([not_found(url)] if outcome == "missing" else [])


def test_the_policy_is_in_force(page: Chrome) -> None:
    console(page)
    ran = page.execute_script(
        "const s = document.createElement('script');"
        "s.textContent = 'window.inlineRan = true';"
        "document.body.append(s);"
        "return window.inlineRan === true;"
    )
    assert ran is False
    # One refusal for each policy in force: the page's <meta>, and the server's header.
    refusal = (
        "Executing inline script violates the following Content Security Policy directive "
        "'script-src 'self''"
    )
    entries = console(page)
    assert [(level, source) for level, source, _ in entries] == [("SEVERE", "security")] * 2
    assert all(refusal in message for _, _, message in entries), entries
