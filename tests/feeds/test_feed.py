"""RSS and Atom over real HTTP: valid documents, stable entries, conditional GET, private feeds, escaping."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import feedparser
import pytest
from lxml import etree

from storage.event_log import NewEvent
from tests.support.cli import run_cli
from tests.support.served import HOSTILE, LLAMA, READ_TOKEN, SCHEMAS, History, Served, serve

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

ATOM = "{http://www.w3.org/2005/Atom}"
FEEDS = [
    f"/repos/{HOSTILE}/feed.atom",
    f"/repos/{HOSTILE}/feed.rss",
    f"/repos/{LLAMA}/feed.atom",
    f"/repos/{LLAMA}/feed.rss?kind=chat_template&min_severity=warning",
    "/orgs/meta-llama/feed.atom",
    "/orgs/meta-llama/feed.rss",
    "/feeds/all.atom",
    "/feeds/all.rss",
    "/feeds/security.atom?limit=2",
    "/feeds/security.rss",
    "/feeds/all.atom?kind=revision.ingested&kind=weights",
]


@pytest.fixture(scope="module")
def atom_schema() -> etree.RelaxNG:
    return etree.RelaxNG(etree.parse(str(SCHEMAS / "atom.rng")))


@pytest.fixture
def writable(history: History, tmp_path: Path) -> Iterator[Served]:
    """A server over a private copy of the history, with a public URL configured."""
    with serve(history.copy_to(tmp_path).store(), public_url="https://hubwatch.example.org") as server:
        yield server


def _entries(body: bytes) -> dict[str, bytes]:
    """Atom entry id -> the entry's serialised XML."""
    root = etree.fromstring(body)
    return {e.findtext(f"{ATOM}id"): etree.tostring(e) for e in root.iter(f"{ATOM}entry")}


@pytest.mark.parametrize("path", FEEDS)
def test_every_feed_parses_and_atom_validates(client, atom_schema: etree.RelaxNG, path: str) -> None:
    """Each feed parses with feedparser without bozo (also given the served headers); Atom ones pass RFC 4287's RELAX NG schema."""
    response = client.get(path)
    assert response.status_code == 200, response.text
    parsed = feedparser.parse(response.content, response_headers=dict(response.headers))
    assert not parsed.bozo, parsed.get("bozo_exception")
    assert parsed.entries, "every feed here has entries"
    assert all(e.id.startswith("urn:uuid:") for e in parsed.entries)
    if path.split("?")[0].endswith(".atom"):
        assert response.headers["content-type"].startswith("application/atom+xml")
        assert atom_schema.validate(etree.fromstring(response.content)), atom_schema.error_log.last_error
    else:
        assert response.headers["content-type"].startswith("application/rss+xml")


def test_filters_narrow_the_feed(client) -> None:
    """kind and min_severity keep only matching events; the security feed only security-relevant ones."""
    everything = feedparser.parse(client.get(f"/repos/{LLAMA}/feed.atom").content).entries
    templates = feedparser.parse(client.get(f"/repos/{LLAMA}/feed.atom?kind=chat_template").content).entries
    warnings = feedparser.parse(client.get(f"/repos/{LLAMA}/feed.atom?min_severity=warning").content).entries
    security = feedparser.parse(client.get("/feeds/security.atom").content).entries
    assert 0 < len(templates) < len(everything) and 0 < len(warnings) < len(everything)
    assert all("chat_template" in {t.term for t in e.tags} for e in templates)
    assert all({t.term for t in e.tags} & {"severity:warning", "severity:critical"} for e in warnings)
    assert security and all("security" in {t.term for t in e.tags} for e in security)


def test_entry_content_shows_what_changed(client) -> None:
    """Entry HTML carries changed keys old -> new, the chat-template diff with rendered prompts, and the estimate delta."""
    def content(path: str) -> str:
        return "".join(etree.fromstring(client.get(path).content).xpath("//*[local-name()='content']/text()"))

    html = content(f"/repos/{LLAMA}/feed.atom")
    assert "<code>eos_token_id</code></td><td><code>128009</code></td><td><code>[128001, 128008, 128009]</code>" in html
    assert "--- a/tokenizer_config.json: chat_template" in html and "Rendered prompt, sample" in html
    estimate = content(f"/repos/{LLAMA}/feed.atom?kind=estimate")
    assert "<code>memory at batch 1 (full finetune)</code>" in estimate and "<code>parameters</code>" in estimate


def test_entries_are_stable_and_never_rewritten(writable: Served) -> None:
    """Entry ids survive re-rendering; a new event adds one entry and leaves every old one byte for byte."""
    path = f"/repos/{LLAMA}/feed.atom"
    with writable.client() as c:
        first = c.get(path)
    # another server over the same rows renders every entry from scratch
    with serve(writable.store, public_url="https://hubwatch.example.org") as fresh, fresh.client() as c:
        again = c.get(path)
    assert _entries(first.content) == _entries(again.content)
    assert again.headers["etag"] == first.headers["etag"]
    with writable.client() as c:
        writable.store.history.add_event(LLAMA, NewEvent("0f0e0d0c-0b0a-4909-8807-060504030201", "advisory.published",
                                                 "Llama-3.1-8B-Instruct: advisory published (warning)", "warning",
                                                 security=True, payload={"advisory": "GHSA-test", "ids": ["GHSA-test", "CVE-2099-1"],
                                                                         "summary": "a test advisory", "source": "osv"}))
        after = c.get(path)
    old, new = _entries(first.content), _entries(after.content)
    added = set(new) - set(old)
    assert added == {"urn:uuid:0f0e0d0c-0b0a-4909-8807-060504030201"}
    assert all(new[i] == old[i] for i in old), "an old entry was rewritten"
    assert after.headers["etag"] != first.headers["etag"]
    assert b"GHSA-test</strong> (CVE-2099-1): a test advisory" in after.content.replace(b"&lt;/strong&gt;", b"</strong>")


def test_conditional_get_cache_control_and_self_link(writable: Served) -> None:
    """Strong ETag and Last-Modified are served; either one unchanged gets a bodiless 304; rel=self is the public URL asked for."""
    path = f"/repos/{HOSTILE}/feed.rss?min_severity=notice"
    with writable.client() as c:
        response = c.get(path)
        etag, modified = response.headers["etag"], response.headers["last-modified"]
        assert etag.startswith('"') and not etag.startswith("W/")
        assert response.headers["cache-control"] == "public, max-age=300"
        by_tag = c.get(path, headers={"If-None-Match": etag})
        by_date = c.get(path, headers={"If-Modified-Since": modified})
        stale = c.get(path, headers={"If-None-Match": '"something-else"'})
        other_format = c.get(path.replace(".rss", ".atom"), headers={"If-None-Match": etag})
    assert by_tag.status_code == 304 and by_tag.content == b"" and by_tag.headers["etag"] == etag
    assert by_date.status_code == 304
    assert stale.status_code == 200 and other_format.status_code == 200
    rss = etree.fromstring(response.content)
    self_link = rss.find("channel/{http://www.w3.org/2005/Atom}link[@rel='self']")
    assert self_link is not None
    assert self_link.get("href") == f"https://hubwatch.example.org/repos/{HOSTILE}/feed.rss?min_severity=notice"


def test_private_feed_needs_the_token(history: History, tmp_path: Path) -> None:
    """With a read token set, a feed answers 401 without it and 200 with the bearer header or ?token=, which rel=self keeps."""
    path = f"/repos/{LLAMA}/feed.atom"
    with serve(history.store(), read_token=READ_TOKEN) as served, served.client() as c:
        refused = c.get(path)
        wrong = c.get(path, params={"token": "guess"})
        by_header = c.get(path, headers={"Authorization": f"Bearer {READ_TOKEN}"})
        by_query = c.get(path, params={"token": READ_TOKEN})
        health = c.get("/healthz")
    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
    assert wrong.status_code == 401
    assert by_header.status_code == 200 and by_header.headers["cache-control"].startswith("private")
    assert by_query.status_code == 200
    root = etree.fromstring(by_query.content)
    self_href = root.find(f"{ATOM}link[@rel='self']").get("href")
    assert self_href.endswith(f"/repos/{LLAMA}/feed.atom?token={READ_TOKEN}")
    assert health.status_code == 200


@pytest.mark.parametrize("fmt", ["atom", "rss"])
def test_hostile_commit_and_file_content_come_out_escaped(client, fmt: str) -> None:
    """HTML, script tags and control characters from a commit and its files are text in the feed, never markup."""
    body = client.get(f"/repos/{HOSTILE}/feed.{fmt}").content
    assert b"<script" not in body and b"<img" not in body and b"<b>" not in body and b"<i>" not in body
    root = etree.fromstring(body)  # lxml refuses control characters: parsing at all proves they are gone
    html = "".join(root.xpath("//*[local-name()='content' or local-name()='encoded']/text()"))
    assert "&lt;script&gt;alert(&#39;title&#39;)&lt;/script&gt;" in html  # commit title
    assert "&lt;script&gt;alert(&#39;config&#39;)&lt;/script&gt;" in html  # config value, old -> new
    assert "&lt;script&gt;alert(&#39;template&#39;)&lt;/script&gt;" in html  # chat template diff
    assert "&lt;img src=x onerror=alert(&#39;message&#39;)&gt;" in html  # commit message
    assert "&lt;i&gt;mallory&lt;/i&gt;" in html  # author
    assert "\u2407bell\u241b[31m \u2400nul" in html  # BEL, ESC and NUL shown as control pictures
    assert "<script" not in html and "<img" not in html


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        (f"/repos/{LLAMA}/feed.atom?kind=bogus", 422, "kind"),
        (f"/repos/{LLAMA}/feed.atom?kind=<script>", 422, "chat_template|"),
        (f"/repos/{LLAMA}/feed.atom?min_severity=loud", 422, "min_severity"),
        (f"/repos/{LLAMA}/feed.rss?limit=0", 422, "limit"),
        (f"/repos/{LLAMA}/feed.rss?limit=many", 422, "limit"),
        ("/feeds/all.atom?limit=100000", 422, "limit"),
        ("/repos/nobody/nothing/feed.atom", 404, "not watched"),
        ("/orgs/nobody/feed.rss", 404, "nobody"),
        ("/repos/bad..org/x/feed.atom", 404, ""),
        ("/feeds/everything.atom", 404, ""),
    ],
)
def test_bad_feed_requests_get_clear_answers(client, path: str, status: int, message: str) -> None:
    """Bad query parameters are 422s naming the parameter, unknown repos and orgs 404s saying so, as JSON, never HTML."""
    response = client.get(path)
    assert response.status_code == status
    assert message in response.text
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-content-type-options"] == "nosniff"


def test_cli_feed_prints_the_servers_document(history: History, tmp_path: Path) -> None:
    """`hubwatch feed` prints byte for byte what the server answers at the configured public URL."""
    copy = history.copy_to(tmp_path)
    config = tmp_path / "hubwatch.toml"
    config.write_text(
        f'[storage]\nurl = "{copy.url}"\n\n[server]\npublic_url = "https://feeds.example.org/hw"\n', encoding="utf-8"
    )
    printed_repo = run_cli("feed", LLAMA, "--format", "rss", "--kind", "chat_template", config=config)
    printed_all = run_cli("feed", "--all", config=config)
    unknown = run_cli("feed", "nobody/nothing", config=config)
    assert printed_repo.returncode == 0, printed_repo.stderr
    with serve(copy.store(), public_url="https://feeds.example.org/hw") as served, served.client() as c:
        assert c.get(f"/repos/{LLAMA}/feed.rss?kind=chat_template").text == printed_repo.stdout
        assert c.get("/feeds/all.atom").text == printed_all.stdout
    assert unknown.returncode == 3 and "not watched" in unknown.stderr


def test_warm_renders_each_new_entry_once(history) -> None:
    """Warming renders the entries no feed has asked for yet, once; a second warm has nothing to do."""
    from feeds.views.feed import FeedBuilder

    store = history.store()
    builder = FeedBuilder(store)
    made = builder.warm()
    assert made == len(store.history.list_events(limit=1000)) and made > 0
    assert builder.warm() == 0
    store.engine.dispose()
