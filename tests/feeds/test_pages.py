"""HTML pages over real HTTP: what they show, and that upstream text never becomes markup."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.feeds.conftest import HOSTILE, LLAMA, Served


def _hostile_shas(served: Served) -> tuple[str, str]:
    newest, oldest = served.store.list_revisions(HOSTILE)
    return oldest.sha, newest.sha


def test_home_lists_repos_events_and_feeds(client: httpx.Client) -> None:
    """The home page links every repo's timeline and feeds, and announces the all-repos feed for discovery."""
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for repo_id in (HOSTILE, LLAMA):
        assert f'href="/repos/{repo_id}"' in page.text and f'href="/repos/{repo_id}/feed.atom"' in page.text
    assert '<link rel="alternate" type="application/atom+xml"' in page.text
    assert "config and chat template changed" in page.text


def test_timeline_shows_revisions_with_compare_links(client: httpx.Client, served: Served) -> None:
    """A repo's timeline lists its revisions newest first with their changes and links to compare with the parent."""
    page = client.get(f"/repos/{LLAMA}")
    shas = [r.sha for r in served.store.list_revisions(LLAMA)]
    positions = [page.text.index(f"/revisions/{sha}") for sha in shas]
    assert positions == sorted(positions)
    assert f"/compare/{shas[1]}...{shas[0]}" in page.text
    assert "eos_token_id" in page.text


@pytest.mark.parametrize("kind", ["timeline", "revision", "compare", "home"])
def test_hostile_text_is_escaped_on_every_page(client: httpx.Client, served: Served, kind: str) -> None:
    """Commit title, message, author, config values and template text show as text on every page, under a no-script CSP."""
    old, new = _hostile_shas(served)
    path = {
        "timeline": f"/repos/{HOSTILE}",
        "revision": f"/repos/{HOSTILE}/revisions/{new}",
        "compare": f"/repos/{HOSTILE}/compare/{old}...{new}",
        "home": "/",
    }[kind]
    page = client.get(path)
    assert page.status_code == 200
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert not re.search(r"<(script|img|i>|b>)", page.text), "upstream markup reached the page"
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f]", page.text), "a control character reached the page"
    if kind == "home":
        return  # the home page shows event titles only, which hubwatch writes
    if kind != "compare":
        assert "&lt;script&gt;alert(&#39;title&#39;)&lt;/script&gt;" in page.text
    if kind in ("revision", "compare"):
        assert "&lt;script&gt;alert(&#39;config&#39;)&lt;/script&gt;" in page.text
        assert "&lt;script&gt;alert(&#39;template&#39;)&lt;/script&gt;" in page.text
    if kind == "revision":
        assert "&lt;img src=x onerror=alert(&#39;message&#39;)&gt;" in page.text and "&lt;i&gt;mallory&lt;/i&gt;" in page.text


def test_revision_page_shows_the_chat_template_diff_and_prompts(client: httpx.Client, served: Served) -> None:
    """A chat-template change shows its unified diff and the rendered prompt before and after."""
    revisions = served.store.list_revisions(LLAMA)
    changed = next(r for r in revisions if r.title == "Update tokenizer_config.json")
    page = client.get(f"/repos/{LLAMA}/revisions/{changed.sha[:12]}").text
    assert "--- a/tokenizer_config.json: chat_template" in page
    assert "Rendered prompt, sample <code>tool_call_round_trip</code>" in page
    assert "before:" in page and "after:" in page


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/repos/nobody/nothing", 404),
        (f"/repos/{LLAMA}/revisions/deadbeef", 404),
        (f"/repos/{LLAMA}/revisions/not-hex", 404),
        (f"/repos/{LLAMA}/compare/abc", 404),
        (f"/repos/{LLAMA}/compare/deadbeef...cafebabe", 404),
        (f"/repos/{LLAMA}?page=0", 422),
    ],
)
def test_unknown_pages_say_what_is_missing(client: httpx.Client, path: str, status: int) -> None:
    """Unknown repos, revisions and malformed compare ranges get an error page that says why."""
    page = client.get(path)
    assert page.status_code == status
    assert page.text.strip()
