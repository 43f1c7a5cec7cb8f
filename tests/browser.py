"""Headless Chromium for the tests: Debian's chromium and chromedriver, driven by Selenium.

Selenium is given both paths, so its Selenium Manager, which would download them, never runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from tests.contract import run_installer

REPO: Final = Path(__file__).resolve().parent.parent
INSTALL: Final = REPO / "scripts" / "install-test-tools"
INSTALL_SECONDS: Final = 900  # apt-get update and ~100 MB of packages on a slow mirror
# The browser itself, not Debian's /usr/bin/chromium wrapper script, which
# adds flags of its own from /etc/chromium.d.
CHROMIUM: Final = "/usr/lib/chromium/chromium"
CHROMEDRIVER: Final = "/usr/bin/chromedriver"
FLAGS: Final = (
    *("--headless", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-dev-shm-usage"),
    "--no-sandbox",  # the tests may run as root, where the sandbox cannot start
    # No calls home: on a closed network each one is a refused connection, retried.
    *("--disable-background-networking", "--disable-component-update", "--disable-sync"),
    # The same pixels on every machine: for the screenshots docs/ shows (scripts/screenshots).
    *("--force-device-scale-factor=1", "--hide-scrollbars", "--lang=en-US"),
)


def install_test_tools() -> None:
    """Run scripts/install-test-tools."""
    run_installer(INSTALL, timeout=INSTALL_SECONDS)


@contextmanager
def chromium(profile: Path, width: int, height: int) -> Iterator[webdriver.Chrome]:
    """A fresh headless Chromium, with a profile of its own and its console kept for the test."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(
        executable_path=CHROMEDRIVER, log_output=str(profile.parent / "chromedriver.log")
    )
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    """One Chromium for the browser tests: each module sets the window size it needs."""
    install_test_tools()  # a failure fails, never skips
    with chromium(tmp_path_factory.mktemp("chromium") / "profile", 800, 600) as driver:
        yield driver


def console(driver: webdriver.Chrome) -> list[tuple[str, str, str]]:
    """The console's entries since the last call (reading empties it): level, source, text."""
    entries: list[dict[str, Any]] = driver.get_log("browser")  # type: ignore[no-untyped-call]
    return [(entry["level"], entry["source"], entry["message"]) for entry in entries]


def not_found(url: str) -> tuple[str, str, str]:
    """The entry Chromium writes for each 404 a page fetches (the page itself writes nothing)."""
    failed = "Failed to load resource: the server responded with a status of 404 (Not Found)"
    return ("SEVERE", "network", f"{url} - {failed}")
