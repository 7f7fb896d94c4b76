"""The pages in a real browser: what a reader sees, where links lead, and that hostile text runs nothing."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from tests.support.browser import DESKTOP, PHONE, Browser
from tests.support.served import HOSTILE, LLAMA

_NO_ISSUES = {"violations": [], "alerts": []}


@pytest.fixture(scope="module")
def revisions(history) -> dict[str, list]:
    """Each repo's revisions, newest first."""
    store = history.store()
    try:
        return {repo: store.history.list_revisions(repo) for repo in (HOSTILE, LLAMA)}
    finally:
        store.engine.dispose()


def _paths(revisions: dict[str, list]) -> dict[str, str]:
    llama = revisions[LLAMA]
    template = next(r for r in llama if r.title == "Update tokenizer_config.json")
    hostile_new, hostile_old = revisions[HOSTILE][0], revisions[HOSTILE][-1]
    return {
        "home": "/",
        "timeline": f"/repos/{LLAMA}",
        "timeline-filtered": f"/repos/{LLAMA}?kind=chat_template&min_severity=warning",
        "revision": f"/repos/{LLAMA}/revisions/{template.sha}",
        "compare": f"/repos/{LLAMA}/compare/{template.parent_sha}...{template.sha}",
        "estimates": f"/repos/{LLAMA}/estimates",
        "hostile-timeline": f"/repos/{HOSTILE}",
        "hostile-revision": f"/repos/{HOSTILE}/revisions/{hostile_new.sha}",
        "hostile-compare": f"/repos/{HOSTILE}/compare/{hostile_old.sha}...{hostile_new.sha}",
        "hostile-estimates": f"/repos/{HOSTILE}/estimates",
    }


PAGES = ["home", "timeline", "timeline-filtered", "revision", "compare", "estimates",
         "hostile-timeline", "hostile-revision", "hostile-compare", "hostile-estimates"]


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
@pytest.mark.parametrize("page", PAGES)
def test_page_renders_under_the_csp_at_desktop_and_phone_width(browser: Browser, revisions, page: str, size) -> None:
    """Each page loads with a heading, runs no script, trips no CSP report, and fits the screen's width."""
    browser.driver.get_log("browser")  # drop what earlier pages logged
    browser.open(_paths(revisions)[page], size)
    driver = browser.driver
    assert driver.find_element(By.TAG_NAME, "h1").is_displayed()
    assert browser.report() == _NO_ISSUES
    assert browser.console_errors() == []
    assert driver.execute_script("return document.scripts.length") == 0
    handlers = driver.execute_script(
        "return [...document.querySelectorAll('*')].flatMap(e => [...e.attributes].map(a => a.name)).filter(n => n.startsWith('on'))")
    assert handlers == []
    overflow = driver.execute_script("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 1, f"the page is {overflow}px wider than the screen"
    for table in driver.find_elements(By.TAG_NAME, "table"):
        assert table.find_elements(By.TAG_NAME, "th"), "a table without header cells"
    browser.screenshot(f"{page}-{'phone' if size == PHONE else 'desktop'}")


def test_hostile_text_shows_as_text_and_runs_nothing(browser: Browser, revisions) -> None:
    """Script tags in a commit title, a config value and a chat template are shown literally and never run."""
    paths = _paths(revisions)
    browser.open(paths["hostile-revision"])
    body = browser.driver.find_element(By.TAG_NAME, "body").text
    assert "<script>alert('title')</script>" in body
    assert "<script>alert('config')</script>" in body
    assert "<script>alert('template')</script>" in body
    assert browser.report() == _NO_ISSUES
    inserted = [e.text for e in browser.driver.find_elements(By.CSS_SELECTOR, ".pdiff ins")]
    assert any("<script>alert('template')</script>" in t for t in inserted), inserted


def test_rendered_prompt_diff_marks_only_what_changed(browser: Browser, revisions) -> None:
    """A chat-template fix shows the inserted prompt text marked with <ins>, not two copies of the prompt."""
    browser.open(_paths(revisions)["revision"])
    driver = browser.driver
    inserted = " ".join(e.text for e in driver.find_elements(By.CSS_SELECTOR, ".pdiff ins"))
    assert "Environment" in inserted and "ipython" in inserted
    assert driver.find_elements(By.CSS_SELECTOR, ".pdiff .tok"), "control tokens are not marked"
    assert driver.find_elements(By.CSS_SELECTOR, ".pdiff .skip"), "unchanged lines are not folded"
    assert "before:" not in driver.find_element(By.TAG_NAME, "main").text
    template_diff = driver.find_element(By.CSS_SELECTOR, "pre.udiff")
    assert template_diff.is_displayed() and "+{%- if not tools is defined %}" in template_diff.text


def test_reader_follows_timeline_revision_compare_and_estimates(browser: Browser, revisions) -> None:
    """From home, a reader reaches a repo's timeline, a revision, its comparison, the estimates and back to a revision."""
    driver = browser.driver
    browser.open("/")
    driver.find_element(By.CSS_SELECTOR, f'a[href="/repos/{LLAMA}"]').click()
    assert driver.find_element(By.TAG_NAME, "h1").text == LLAMA
    hub_links = driver.find_elements(By.PARTIAL_LINK_TEXT, "commit on the Hub")
    assert hub_links and hub_links[0].get_attribute("href").startswith(f"https://huggingface.co/{LLAMA}/commit/")
    driver.find_element(By.LINK_TEXT, "chat template").click()
    assert "kind=chat_template" in driver.current_url
    sections = driver.find_elements(By.CSS_SELECTOR, "main section")
    assert 0 < len(sections) < len(revisions[LLAMA])
    sections[0].find_element(By.CSS_SELECTOR, "h2 a").click()
    assert "/revisions/" in driver.current_url and driver.find_element(By.ID, "advisories").is_displayed()
    driver.find_element(By.PARTIAL_LINK_TEXT, "Compare with parent").click()
    assert "/compare/" in driver.current_url and "change(s)" in driver.find_element(By.TAG_NAME, "main").text
    driver.find_element(By.CSS_SELECTOR, "h1 a").click()
    driver.find_element(By.LINK_TEXT, "Estimates over time").click()
    charts = driver.find_elements(By.CSS_SELECTOR, "svg.chart")
    assert len(charts) == 2 and all(c.is_displayed() for c in charts)
    assert "Parameters by tower" in driver.find_element(By.TAG_NAME, "main").text
    browser.screenshot("walk-estimates")
    point = driver.find_element(By.CSS_SELECTOR, "svg.chart a")
    sha = point.get_dom_attribute("href").rsplit("/", 1)[-1]
    point.find_element(By.TAG_NAME, "circle").click()
    assert driver.current_url.endswith(f"/revisions/{sha}")
    assert browser.report() == _NO_ISSUES


def test_revision_page_lists_advisories_with_relevance(browser: Browser, revisions) -> None:
    """A revision's OSV matches link to OSV and say whether each concerns this model."""
    browser.open(_paths(revisions)["revision"])
    rows = browser.driver.find_elements(By.CSS_SELECTOR, "#advisories ~ .scroll table tr")
    text = " ".join(r.text for r in rows)
    assert "https://osv.dev/vulnerability/" in (rows[1].find_element(By.TAG_NAME, "a").get_attribute("href") if len(rows) > 1 else "")
    assert "relevant" in text
