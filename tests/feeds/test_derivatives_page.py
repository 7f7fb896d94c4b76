"""A followed base's family where people read it: the derivatives page and its JSON route, the reach line
and list on the base's revision page, and the same list in its feed entry and in each webhook format."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import feedparser
import pytest

from feeds.webhooks import Links, render
from tests.support.databases import copy_sqlite
from tests.support.derivative_repos import AWQ, BASE, FINETUNE, GATED, GGUF, write_family
from tests.support.served import Served, serve
from tests.support.settings import settings_for
from tracker.cli.app import App
from tracker.standins.replay.control import BUNDLED_ROOT, ReplayServer

HOSTILE_REPO = "evil/Llama-3.1-8B-Instruct-<script>alert(1)</script>"


@contextmanager
def _polled_family(folder: Path, database_url: str) -> Iterator[tuple[App, ReplayServer]]:
    """The family polled twice: before the base's template fix, then after it (the reach event written)."""
    write_family(folder / "family")
    hub = ReplayServer(roots=[BUNDLED_ROOT, folder / "family"])
    hub.set_head(BASE, 2)
    hub.set_head(GGUF, 1)
    with hub:
        app = App(settings_for(hub.endpoint, database_url))  # type: ignore[arg-type]
        app.store.watches.add_watch(BASE, "main", 900)
        app.store.derivatives.follow(BASE, ("quantized", "finetune"), 100)
        for head in (2, 3):
            hub.set_head(BASE, head)
            [outcome] = app.poller.poll()
            assert not outcome.failed, outcome.error
        yield app, hub
        app.store.engine.dispose()


@pytest.fixture(scope="module")
def family(tmp_path_factory: pytest.TempPathFactory, module_database_url: str) -> Iterator[tuple[App, ReplayServer]]:
    """The polled family, once a module: its tests only read it (`own_family` for one that writes)."""
    with _polled_family(tmp_path_factory.mktemp("family"), module_database_url) as polled:
        yield polled


@pytest.fixture(scope="module")
def site(family) -> Iterator[Served]:
    app, _ = family
    with serve(app.store) as served:
        yield served


@pytest.fixture
def own_family(family, tmp_path: Path, database_url: str) -> Iterator[tuple[App, ReplayServer]]:
    """A copy of the polled family a test may write to (on SQLite the module's database copied; on PostgreSQL
    the family polled again into the test's own database)."""
    app, hub = family
    url = app.store.engine.url
    if url.get_backend_name() != "sqlite":
        with _polled_family(tmp_path, database_url) as polled:
            yield polled
        return
    own = App(settings_for(hub.endpoint, copy_sqlite(Path(url.database), tmp_path / "own.db")))  # type: ignore[arg-type]
    yield own, hub
    own.store.engine.dispose()


@pytest.fixture
def own_site(own_family) -> Iterator[Served]:
    app, _ = own_family
    with serve(app.store) as served:
        yield served


def _reach_event(app: App) -> Any:
    [event] = [e for e in app.store.history.list_events(BASE) if e.kind == "derivatives.reached"]
    return event


def test_derivatives_page_shows_the_tree_table(site: Served, family) -> None:
    """The page lists each derivative with relation, publisher, downloads and per part carries/behind (with the
    base revision it matches, linked) or diverged; the repo page links to it."""
    app, _ = family
    fix, before = app.store.history.list_revisions(BASE)[:2]
    with site.client() as client:
        page = client.get(f"/repos/{BASE}/derivatives")
        timeline = client.get(f"/repos/{BASE}")
    assert page.status_code == 200 and "default-src 'none'" in page.headers["content-security-policy"]
    assert f'href="/repos/{BASE}/derivatives"' in timeline.text
    rows = {m.group(1): m.group(0) for m in re.finditer(r"<tr><th scope=\"row\"><code>([^<]+)</code>.*?</tr>", page.text, re.S)}
    assert set(rows) >= {GGUF, AWQ, FINETUNE, GATED}
    assert "<td>quantized</td><td>bartowski</td><td class=\"num\">6,000</td>" in rows[GGUF]
    assert f'behind by 1 (matches <a href="/repos/{BASE}/revisions/{before.sha}">' in rows[GGUF]
    assert fix.sha not in rows[GGUF]
    assert "carries (after whitespace normalisation)" in rows[FINETUNE] and "diverged" in rows[FINETUNE]
    assert "gated" in rows[GATED]
    assert '<td class="part-not_in_format">not in this format</td>' in rows[GGUF]  # a GGUF has no generation defaults
    assert '<td class="part-not_in_format">' not in rows[AWQ]


def test_derivatives_page_of_an_unfollowed_repo_says_how_to_follow(own_site: Served, own_family) -> None:
    """A known repo whose family is not followed gets a sentence with the command, not an error; the API says 404."""
    app, _ = own_family
    app.store.derivatives.unfollow(BASE)
    with own_site.client() as client:
        page = client.get(f"/repos/{BASE}/derivatives")
        api = client.get(f"/api/v1/repos/{BASE}/derivatives")
    assert page.status_code == 200 and f"hubwatch watch add {BASE} --derivatives" in page.text
    assert api.status_code == 404 and "not followed" in api.json()["detail"]


def test_derivatives_api_returns_the_tree(site: Served) -> None:
    """The JSON route answers what `hubwatch tree --json` prints: each derivative's parts and the last report."""
    with site.client() as client:
        tree = client.get(f"/api/v1/repos/{BASE}/derivatives").json()
    by_repo = {d["repo_id"]: d for d in tree["derivatives"]}
    assert by_repo[GGUF]["parts"]["chat_template"]["status"] == "behind"
    assert by_repo[GGUF]["parts"]["chat_template"]["behind"] == 1
    assert by_repo[FINETUNE]["parts"]["chat_template"]["status"] == "carries"
    assert by_repo[GATED]["problem"].startswith("gated:")
    assert tree["report"]["followed"] == 6 and tree["relations"] == ["finetune", "quantized"]


def test_hostile_derivative_names_are_escaped(own_site: Served, own_family) -> None:
    """A problem text carrying markup shows as text on the derivatives page."""
    app, _ = own_family
    from storage.derivatives import CheckedDerivative

    bad = CheckedDerivative(AWQ, "quantized", 1, None, problem="<script>alert('x')</script>")
    app.store.derivatives.record_pass(BASE, [bad], {"problems": ["<img src=x onerror=alert(1)>"]}, [], None)
    with own_site.client() as client:
        page = client.get(f"/repos/{BASE}/derivatives")
    assert not re.search(r"<(script|img)", page.text)
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page.text


def test_revision_page_shows_the_reach_line_and_list(site: Served, family) -> None:
    """The base revision that fixed the template says how many derivatives carry it and lists them, the behind first."""
    app, hub = family
    fix = hub.head_sha(BASE)
    with site.client() as client:
        page = client.get(f"/repos/{BASE}/revisions/{fix}")
    assert page.status_code == 200
    assert "Derivatives: reached 1 of 5; 4 still behind" in page.text
    section = page.text[page.text.index('id="derivatives"'):page.text.index("<h3>Changes</h3>")]
    listed = re.findall(r"<th scope=\"row\"><code>([^<]+)</code></th><td>[a-z]+</td><td>([a-z]+)</td>", section)
    assert listed[-1] == (FINETUNE, "carries") and {v for _, v in listed[:-1]} == {"behind"}
    assert (GGUF, "behind") in listed and (AWQ, "behind") in listed


def test_feed_entry_and_webhooks_carry_the_list(site: Served, family) -> None:
    """The reach event's feed entry and its generic, Slack and Discord messages hold the line and each derivative."""
    app, hub = family
    event = _reach_event(app)
    with site.client() as client:
        feed = feedparser.parse(client.get(f"/repos/{BASE}/feed.atom").content)
    [entry] = [e for e in feed.entries if "reached" in e.title]
    assert entry.title.endswith("reached 1 of 5 derivatives; 4 still behind")
    body = entry.content[0].value
    assert f"{GGUF} (quantized): behind: chat template behind by 1" in body and f"{FINETUNE} (finetune): carries" in body
    links = Links(hub.endpoint, site.url)
    generic = json.loads(render(event, "generic", links))["data"]
    assert generic["title"] == event.title and generic["summaries_total"] == 5
    assert generic["summaries"][0].startswith(f"{GGUF} (quantized): behind") and "chat_template" in generic["change_kinds"]
    assert generic["links"]["page"].endswith(f"/revisions/{hub.head_sha(BASE)}")
    for name in ("slack", "discord"):  # their markup escapes (backslashes, zero-width spaces) taken out
        text = json.dumps(json.loads(render(event, name, links)), ensure_ascii=False).replace("\\", "").replace("\u200b", "")
        assert "reached 1 of 5 derivatives; 4 still behind" in text and GGUF in text and FINETUNE in text
