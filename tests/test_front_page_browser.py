"""The front page in headless Chromium, as ``generate.py --serve`` serves it.

Text is read as a person sees it; the console is kept, so a stray request, a script error or a
refusal by the policy fails. docs/front-page.png is made by scripts/screenshots, never by a test.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

import pytest
from selenium.webdriver import Chrome
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser import chromium, console, install_test_tools, not_found
from tests.sample import SAMPLE, SAMPLE_BEST
from tests.served import Served, serving

pytestmark = pytest.mark.real_world

WIDTH: Final = 1000
HEIGHT: Final = 1200
WAIT_SECONDS: Final = 10.0
CURL: Final = "curl https://ratings.example.com/away/api/articles/3/rating/"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    # base_url is in the sample: the page shows https://ratings.example.com in
    # its curl line, as a deployed site would, while it fetches from 127.0.0.1.
    with serving(tmp_path_factory.mktemp("front-page"), SAMPLE) as site:
        yield site


@dataclass
class Browser:
    driver: Chrome
    address: str
    loading: list[tuple[str, str, str]]  # the console while the page loaded

    def find(self, selector: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def find_all(self, selector: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, selector)


@pytest.fixture(scope="module")
def browser(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    install_test_tools()  # a failure fails, never skips
    with chromium(tmp_path_factory.mktemp("chromium") / "profile", WIDTH, HEIGHT) as driver:
        driver.get(f"{served.address}/")
        # The script has run when it has drawn the stars of the table.
        WebDriverWait(driver, WAIT_SECONDS).until(
            lambda d: (
                len(d.find_elements(By.CSS_SELECTOR, ".best .stars.drawn")) == len(SAMPLE_BEST)
            )
        )
        browser = Browser(driver, served.address, [])
        browser.loading = console(browser.driver)
        yield browser


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


def test_the_page_loads_cleanly_and_says_what_the_api_is(browser: Browser) -> None:
    assert browser.loading == []  # no error, no refused resource, no policy violation
    assert browser.driver.title == "Article ratings API"
    assert browser.find("h1").text == "Article ratings API"
    assert browser.find("header .lead").text == (
        "The reader ratings of 12 articles (362 ratings, on a scale of 1 to 5), published as a "
        "read-only JSON API of static files: one document per article, ready for any web page to fetch."
    )
    endpoint = "GET https://ratings.example.com/away/api/articles/{id}/rating/"
    assert browser.find(".endpoint").text == endpoint
    assert browser.find("#curl").text == CURL


def test_the_copy_button_copies_the_curl_line(browser: Browser) -> None:
    permissions = ["clipboardReadWrite", "clipboardSanitizedWrite"]
    browser.driver.execute_cdp_cmd(
        "Browser.grantPermissions", {"origin": browser.address, "permissions": permissions}
    )
    button = browser.find("button.copy")
    button.click()
    WebDriverWait(browser.driver, WAIT_SECONDS).until(lambda _: button.text == "Copied")
    pasted = browser.driver.execute_async_script(
        "const done = arguments[0]; navigator.clipboard.readText().then(done, (e) => done(`${e}`));"
    )
    assert pasted == CURL
    WebDriverWait(browser.driver, WAIT_SECONDS).until(lambda _: button.text == "Copy")
    assert console(browser.driver) == []


def test_the_best_rated_table(browser: Browser) -> None:
    rows = [
        tuple(cell.text.split()[-1] for cell in row.find_elements(By.TAG_NAME, "td"))
        for row in browser.find_all(".best tbody tr")
    ]
    assert rows == SAMPLE_BEST
    stars = browser.find_all(".best .stars")
    # An average on the scale of 5 fills a fifth of the width a star: 4.8 is 96%.
    assert [
        (s.find_element(By.CSS_SELECTOR, ".stars-full").get_attribute("style")) for s in stars
    ] == [f"width: {int(Decimal(row[2]) * 20)}%;" for row in SAMPLE_BEST]
    assert [s.get_attribute("aria-label") for s in stars] == [
        f"{row[2]} out of 5 stars" for row in SAMPLE_BEST
    ]
    links = [a.get_attribute("href") for a in browser.find_all(".best tbody a")]
    assert links == [f"{browser.address}/away/api/articles/{row[1]}/rating/" for row in SAMPLE_BEST]


def test_the_openapi_link(browser: Browser) -> None:
    link = browser.find("#openapi-link")
    assert link.text == "away/api/openapi.json"
    assert link.get_attribute("href") == f"{browser.address}/away/api/openapi.json"


DOCUMENT_7: Final = (
    '{\n  "article_url": "https://ratings.example.com/away/api/articles/7/",\n  "id": 7,\n'
    '  "rating_sum": 29,\n  "rating_count": 6,\n  "rating_value": "4.8"\n}'
)


# What a lookup shows: the outcome, texts by selector, the stars (label, width) or none.
@pytest.mark.parametrize(
    ("typed", "outcome", "texts", "stars"),
    [
        pytest.param(
            "4",
            "missing",
            {
                "#result-message": "No article has the id 4: the API answered 404 Not Found.",
                ".request": "GET /away/api/articles/4/rating/ 404 Not Found",
                "#result-json": '{\n  "detail": "Not found."\n}',
            },
            None,
            id="missing",
        ),
        pytest.param(
            "7",
            "found",
            {
                "#result-message": "Article 7: 4.8 out of 5 from 6 ratings.",
                "#result-average": "4.8",
                ".request": "GET /away/api/articles/7/rating/ 200 OK",
                "#result-json": DOCUMENT_7,
            },
            ("4.8 out of 5 stars", "width: 96%;"),
            id="rated",
        ),
        pytest.param(
            "31",
            "found",
            {"#result-message": "Article 31 is listed but not rated yet."},
            (None, "width: 0%;"),
            id="not-rated-yet",
        ),
    ],
)
def test_looking_up_an_id(
    browser: Browser,
    typed: str,
    outcome: str,
    texts: dict[str, str],
    stars: tuple[str | None, str] | None,
) -> None:
    console(browser.driver)
    result = look_up(browser, typed)
    assert result.get_attribute("data-outcome") == outcome
    assert {selector: browser.find(selector).text for selector in texts} == texts
    shown = browser.find("#result-rating .stars")
    assert browser.find("#result-rating").is_displayed() == (stars is not None)
    if stars is not None:
        label, width = stars
        if label is not None:
            assert shown.get_attribute("aria-label") == label
        assert shown.find_element(By.CSS_SELECTOR, ".stars-full").get_attribute("style") == width
    # The lookup's own 404, and nothing else.
    url = f"{browser.address}/away/api/articles/{typed}/rating/"
    assert console(browser.driver) == ([not_found(url)] if outcome == "missing" else [])


def test_an_answer_that_is_not_json(browser: Browser, served: Served) -> None:
    # As a misconfigured host might answer: the page says so instead of failing silently.
    path = served.site / "away/api/articles/12/rating/index.json"
    good = path.read_bytes()
    path.write_bytes(b"<!doctype html><title>Welcome</title>\n")
    try:
        console(browser.driver)
        result = look_up(browser, "12")
    finally:
        path.write_bytes(good)
    assert result.get_attribute("data-outcome") == "error"
    assert browser.find("#result-message").text == "The API answered 200 OK, but not with JSON."
    assert browser.find("#result-json").text == "<!doctype html><title>Welcome</title>"
    assert console(browser.driver) == []


@pytest.mark.parametrize("text", ["07", "abc", "-1", "0", "7.0", "", "1" * 20])
def test_a_malformed_id_is_refused_without_a_request(
    browser: Browser, served: Served, text: str
) -> None:
    console(browser.driver)
    requests = served.log.read_text().count("GET /away/api/articles/")
    result = look_up(browser, text)
    assert result.get_attribute("data-outcome") == "invalid"
    message = "An article id is a whole number from 1 up, such as 7."
    assert browser.find("#result-message").text == message
    assert browser.find("#result-json").text == ""
    assert served.log.read_text().count("GET /away/api/articles/") == requests
    assert console(browser.driver) == []


def test_the_policy_is_in_force(browser: Browser) -> None:
    console(browser.driver)
    ran = browser.driver.execute_script(
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
    entries = console(browser.driver)
    assert [(level, source) for level, source, _ in entries] == [("SEVERE", "security")] * 2
    assert all(refusal in message for _, _, message in entries), entries
