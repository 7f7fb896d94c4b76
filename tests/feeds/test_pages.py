"""HTML pages over real HTTP: what they show, and that upstream text never becomes markup."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.support.served import HOSTILE, LLAMA, Served, serve

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)


def _hostile_shas(served: Served) -> tuple[str, str]:
    newest, oldest = served.store.history.list_revisions(HOSTILE)
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
    shas = [r.sha for r in served.store.history.list_revisions(LLAMA)]
    positions = [page.text.index(f"/revisions/{sha}") for sha in shas]
    assert positions == sorted(positions)
    assert f"/compare/{shas[1]}...{shas[0]}" in page.text
    assert "eos_token_id" in page.text


@pytest.mark.parametrize("kind", ["timeline", "revision", "compare", "home", "estimates"])
def test_hostile_text_is_escaped_on_every_page(client: httpx.Client, served: Served, kind: str) -> None:
    """Commit title, message, author, config values and template text show as text on every page, under a no-script CSP."""
    old, new = _hostile_shas(served)
    path = {
        "timeline": f"/repos/{HOSTILE}",
        "revision": f"/repos/{HOSTILE}/revisions/{new}",
        "compare": f"/repos/{HOSTILE}/compare/{old}...{new}",
        "home": "/",
        "estimates": f"/repos/{HOSTILE}/estimates",
    }[kind]
    page = client.get(path)
    assert page.status_code == 200
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert not re.search(r"<(script|img|i>|b>)", page.text), "upstream markup reached the page"
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f]", page.text), "a control character reached the page"
    if kind in ("home", "estimates"):
        return  # the home page shows event titles only, which hubwatch writes
    if kind != "compare":
        assert "&lt;script&gt;alert(&#39;title&#39;)&lt;/script&gt;" in page.text
    if kind in ("revision", "compare"):
        assert "&lt;script&gt;alert(&#39;config&#39;)&lt;/script&gt;" in page.text
        assert "&lt;script&gt;alert(&#39;template&#39;)&lt;/script&gt;" in page.text
    if kind == "revision":
        assert "&lt;img src=x onerror=alert(&#39;message&#39;)&gt;" in page.text and "&lt;i&gt;mallory&lt;/i&gt;" in page.text


def test_revision_page_shows_the_chat_template_diff_and_prompts(client: httpx.Client, served: Served) -> None:
    """A chat-template change shows its unified diff beside the rendered prompt's diff, not two full copies."""
    revisions = served.store.history.list_revisions(LLAMA)
    changed = next(r for r in revisions if r.title == "Update tokenizer_config.json")
    page = client.get(f"/repos/{LLAMA}/revisions/{changed.sha[:12]}").text
    assert "--- a/tokenizer_config.json: chat_template" in page
    assert "Rendered prompt, sample <code>tool_call_round_trip</code>: 21 character(s) inserted, 0 deleted" in page
    assert '<ins>Environment:</ins><ins><span class="ws">\u00b7</span></ins><ins>ipython</ins>' in page
    assert '<span class="tok">&lt;|begin_of_text|&gt;</span>' in page
    assert "before:" not in page


def test_timeline_filters_by_kind_severity_and_security(client: httpx.Client, served: Served) -> None:
    """Kind, severity and security filters narrow the timeline with plain links that keep the other filters."""
    every = client.get(f"/repos/{LLAMA}").text
    chat = client.get(f"/repos/{LLAMA}", params={"kind": "chat_template"}).text
    chat_warning = client.get(f"/repos/{LLAMA}", params={"kind": "chat_template", "min_severity": "warning"}).text
    security = client.get(f"/repos/{LLAMA}", params={"security": "1"}).text
    count = lambda page: page.count("<section>")  # noqa: E731 - a one-line helper
    assert count(every) == 7 and count(chat) == 3 and count(chat_warning) == 2 and count(security) == 2
    assert '<a href="?kind=chat_template&amp;min_severity=warning" aria-current="true">warning and above</a>' in chat_warning
    assert '<a href="?kind=chat_template" aria-current="true">any severity</a>' not in chat_warning
    assert client.get(f"/repos/{LLAMA}", params={"kind": "nonsense"}).status_code == 422


def test_timeline_and_revision_link_the_commit_on_the_hub(client: httpx.Client, served: Served) -> None:
    """Each revision links to its commit on the Hub from the timeline and from its own page."""
    newest = served.store.history.list_revisions(LLAMA)[0]
    link = f'href="https://huggingface.co/{LLAMA}/commit/{newest.sha}"'
    assert link in client.get(f"/repos/{LLAMA}").text
    assert link in client.get(f"/repos/{LLAMA}/revisions/{newest.sha}").text


def test_commit_links_follow_the_hub_endpoint(history) -> None:
    """A server pointed at a Hub mirror ([hub] endpoint) links commits there, not to huggingface.co."""
    with serve(history.store(), hub_url="https://hub.mirror.example") as server, server.client() as client:
        newest = server.store.history.list_revisions(LLAMA)[0]
        page = client.get(f"/repos/{LLAMA}/revisions/{newest.sha}").text
    assert f'href="https://hub.mirror.example/{LLAMA}/commit/{newest.sha}"' in page
    assert "https://huggingface.co/" not in page


def test_home_shows_each_watch_poll_state(client: httpx.Client) -> None:
    """The home page lists every watch with its last poll and whether it is failing."""
    page = client.get("/").text
    assert "<h2>Polling</h2>" in page
    assert page.count('<span class="status-ok">ok</span>') == 2


def test_revision_page_shows_advisories_with_relevance(client: httpx.Client, served: Served) -> None:
    """OSV matches link to OSV and are marked relevant or not relevant to the model, with the reason; advice is listed."""
    newest = served.store.history.list_revisions(LLAMA)[0]
    page = client.get(f"/repos/{LLAMA}/revisions/{newest.sha}").text
    assert 'href="https://osv.dev/vulnerability/' in page
    assert "<strong>relevant</strong>" in page and "not relevant to this model: about" in page
    assert "Loader advice" in page and "to load this safely you need transformers" in page


def test_estimates_page_has_tables_and_a_linked_svg_chart(client: httpx.Client, served: Served) -> None:
    """The estimates page shows parameters by tower, memory per card and mode, and an inline SVG whose points link to revisions."""
    page = client.get(f"/repos/{LLAMA}/estimates")
    assert page.status_code == 200 and "default-src 'none'" in page.headers["content-security-policy"]
    text = page.text
    assert "<h2>Parameters by tower</h2>" in text and "8,030,261,248" in text
    assert "<h2>Memory per card and mode</h2>" in text and "does not fit" in text
    assert text.count("<svg ") == 2 and "<script" not in text
    estimated = [r for r in served.store.history.list_revisions(LLAMA) if served.store.history.estimate_for(r.id) is not None]
    assert estimated and all(f'<a href="revisions/{r.sha}"><title>{r.sha[:12]}: ' in text for r in estimated)
    assert "H200" in text  # the card capacities are drawn as reference lines


def test_estimates_page_without_estimates_says_so(client: httpx.Client) -> None:
    """A repo whose estimator never produced figures says why there is no chart, without failing."""
    page = client.get(f"/repos/{HOSTILE}/estimates")
    assert page.status_code == 200
    assert "<svg" not in page.text


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


def _serving_rows(html: str) -> dict[str, list[str]]:
    """The serving table's rows: card -> its cells as text."""
    section = html[html.index('id="serving"'):]
    table = section[: section.index("</table>")]
    rows = re.findall(r'<tr><th scope="row">([^<]+)</th>(.*?)</tr>', table)
    return {card: [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", cells)] for card, cells in rows}


def test_estimates_page_shows_serving_per_card(client: httpx.Client, served: Served) -> None:
    """Per card: loads or not, the longest context and the sequences at 8k, 32k and the full context, as stored;
    the KV cache per runtime, the weights, the allowance and the usable fraction with their sources."""
    history = served.store.history
    stored = next(e for r in history.list_revisions(LLAMA) if (e := history.estimate_for(r.id)) is not None)
    text = client.get(f"/repos/{LLAMA}/estimates").text
    serving = stored.result["serving"]
    rows = _serving_rows(text)
    assert set(rows) == set(serving["cards"])
    for card, row in serving["cards"].items():
        loads, longest, *counts = rows[card]
        assert (loads == "loads") == row["loads"]
        assert longest == f"{row['longest_context']:,}"
        assert counts == [f"{row['concurrency'][str(c)]:,}" for c in serving["contexts"]]
    assert "sequences at 8k" in text and "sequences at 32k" in text and "sequences at 128k (full)" in text
    per_token = serving["kv_cache"]["vllm"]["bytes_per_token"]
    assert "transformers (DynamicCache)" in text and f"vLLM (paged cache)</th><td class=\"num\">{per_token:,} B" in text
    assert serving["weights"]["source"].replace("'", "&#39;") in text and "CUDA context" in text and "gpu_memory_utilization" in text


def test_revision_page_shows_its_estimate_serving_figures(client: httpx.Client, served: Served) -> None:
    """An estimated revision's page carries its serving table; a revision with no estimate of its own has none."""
    history = served.store.history
    revisions = history.list_revisions(LLAMA)
    estimated = [r for r in revisions if history.estimate_for(r.id) is not None]
    plain = [r for r in revisions if history.estimate_for(r.id) is None]
    assert estimated and plain
    for revision in estimated:
        page = client.get(f"/repos/{LLAMA}/revisions/{revision.sha}").text
        cards = history.estimate_for(revision.id).result["serving"]["cards"]
        assert set(_serving_rows(page)) == set(cards)
    assert 'id="serving"' not in client.get(f"/repos/{LLAMA}/revisions/{plain[0].sha}").text


def test_revision_page_says_what_the_verifier_finds(client: httpx.Client, served: Served) -> None:
    """The revision page's verifier section names the lint, its evidence and fix; a clean revision says so."""
    newest = served.store.history.list_revisions(LLAMA)[0]
    page = client.get(f"/repos/{LLAMA}/revisions/{newest.sha}").text
    assert '<h3 id="verifier">What the verifier says</h3>' in page
    assert "<code>rope-scaling-version</code>" in page and "<code>transformers_version</code>: 4.42.3" in page
    old, _ = _hostile_shas(served)
    assert "What the verifier says" in client.get(f"/repos/{HOSTILE}/revisions/{old}").text

