"""A headless chromium against the pages served over the replayed history (tests/support/browser.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

from tests.support.browser import DESKTOP, WATCH_SCRIPT, Browser, chromium_binaries
from tests.support.served import serve


@pytest.fixture(scope="module")
def browser(history) -> Iterator[Browser]:
    """A headless chromium against a server over the replayed history; skipped only without chromium."""
    found = chromium_binaries()
    if found is None:
        pytest.skip("chromium and chromedriver are not installed (apt-get install chromium chromium-driver; .ci/run does)")
    options = Options()
    options.binary_location = found[0]
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                f"--window-size={DESKTOP[0]},{DESKTOP[1]}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=found[1]))
    try:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH_SCRIPT})
        with serve(history.store()) as server:
            yield Browser(driver, server.url)
    finally:
        driver.quit()
