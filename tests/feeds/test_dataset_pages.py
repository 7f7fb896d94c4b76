"""A dataset's history on the pages: the evolving dataset polled through the real client from the replay, then
served: the revision page's configs/splits table (rows before -> after, delta) and schema diff, its licence,
gate and conversion notes; the timeline's one-line dataset summary per revision; the feed entries and the
webhook payloads (generic `dataset` object, Slack/Discord short text). Cells read with lxml."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import feedparser
import httpx
import lxml.html
import pytest

from feeds.webhooks import Links, discord, generic, slack
from tests.support.databases import fresh_database
from tests.support.dataset_repos import DATASET_ID, SCRIPT_ONLY_ID, evolving_dataset, script_only_dataset
from tests.support.served import Served, serve
from tests.support.settings import settings_for
from tracker.cli.app import App
from tracker.standins.replay.control import ReplayServer


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, list[str], list[str]]]:
    """Both datasets, every commit ingested once for the module, and served; with each one's shas, oldest first."""
    folder: Path = tmp_path_factory.mktemp("dataset-pages")
    with ReplayServer(roots=[]) as hub, fresh_database(folder / "history.db") as url:
        hub.add_repo(evolving_dataset())
        hub.add_repo(script_only_dataset())
        app = App(settings_for(hub.endpoint, url))  # type: ignore[arg-type]
        for repo_id in (DATASET_ID, SCRIPT_ONLY_ID):
            app.store.watches.add_watch(repo_id, "main", 3600, backfill=100)
        outcomes = app.poller.poll()
        assert not any(o.failed for o in outcomes), [o.error for o in outcomes]
        shas = [c.sha for c in hub.repo(DATASET_ID).commits]
        scripted = [c.sha for c in hub.repo(SCRIPT_ONLY_ID).commits]
        with serve(app.store) as served:
            yield served, shas, scripted


@pytest.fixture
def client(ingested: tuple[Served, list[str], list[str]]) -> Iterator[httpx.Client]:
    with ingested[0].client() as c:
        yield c


def _page(client: httpx.Client, path: str) -> lxml.html.HtmlElement:
    response = client.get(path)
    assert response.status_code == 200, response.text
    return lxml.html.fromstring(response.text)


def _table(page: lxml.html.HtmlElement, table_id: str) -> list[list[str]]:
    [table] = page.xpath(f'//table[@id="{table_id}"]')
    return [[" ".join(cell.text_content().split()) for cell in row.xpath("./td")] for row in table.xpath(".//tr")[1:]]


def test_rows_removed_show_before_after_and_delta(client: httpx.Client, ingested) -> None:
    """The revision that removed 5 test rows: every config and split with its rows before and after, the delta
    on the one that moved; no column changed."""
    _, shas, _ = ingested
    page = _page(client, f"/repos/{DATASET_ID}/revisions/{shas[2]}")
    assert _table(page, "dataset-splits") == [
        ["default", "train", "100", "100", "", "same"],
        ["default", "test", "20", "15", "-5", "same"],
        ["extra", "train", "30", "30", "", "same"],
    ]
    assert not page.xpath('//table[@id="dataset-schema"]')
    assert "No column added, removed or retyped." in page.text_content()
    assert "2 configs, 3 splits, 145 rows (-5)" in page.text_content()


def test_a_column_added_is_in_the_schema_diff(client: httpx.Client, ingested) -> None:
    """The revision where default/train gained `source`: the schema diff names it, its HF type and its split."""
    _, shas, _ = ingested
    page = _page(client, f"/repos/{DATASET_ID}/revisions/{shas[1]}")
    [row] = _table(page, "dataset-schema")
    assert row[:3] == ["default", "source", "added"] and row[3] == "—" and "string" in row[4] and row[5] == "train"
    assert "1 column change" in page.text_content()


def test_licence_change_and_conversion_state(client: httpx.Client, ingested) -> None:
    """The relicensed head: the licence now, the note saying what it was, and the conversion that lags the head."""
    _, shas, _ = ingested
    text = _page(client, f"/repos/{DATASET_ID}/revisions/{shas[3]}").text_content()
    assert "Licence: mit" in text and "licence changed: apache-2.0 -> mit" in text
    assert "The viewer's Parquet conversion: lags the head: made from" in text


def test_baseline_lists_every_split_with_no_before(client: httpx.Client, ingested) -> None:
    _, shas, _ = ingested
    rows = _table(_page(client, f"/repos/{DATASET_ID}/revisions/{shas[0]}"), "dataset-splits")
    assert rows == [["default", "train", "—", "100", "", "added"], ["default", "test", "—", "20", "", "added"],
                    ["extra", "train", "—", "30", "", "added"]]


def test_script_only_is_said_and_the_split_removed(client: httpx.Client, ingested) -> None:
    """Only the loading script left: the note says it cannot be loaded, the split shows as removed."""
    _, _, scripted = ingested
    page = _page(client, f"/repos/{SCRIPT_ONLY_ID}/revisions/{scripted[1]}")
    notes = [li.text_content() for li in page.xpath('//ul[@class="dataset-notes"]/li')]
    assert any("only a loading script (scripted-corpus.py)" in n for n in notes)
    assert _table(page, "dataset-splits") == [["default", "train", "3", "—", "", "removed"]]


def test_timeline_lists_one_line_per_revision(client: httpx.Client, ingested) -> None:
    """The dataset's timeline: each revision's one-line summary, newest first."""
    page = _page(client, f"/repos/{DATASET_ID}")
    lines = [p.text_content() for p in page.xpath('//p[@class="dataset-line"]')]
    assert lines == ["2 configs, 3 splits, 145 rows", "2 configs, 3 splits, 145 rows (-5)",
                     "2 configs, 3 splits, 150 rows; 1 column change", "2 configs, 3 splits, 150 rows"]


def test_no_table_no_section() -> None:
    """An event without a table (a model's, or one ingested before tables) or with a malformed one: no section."""
    from feeds.views.dataset_view import dataset_view

    assert dataset_view({"summaries": []}) is None and dataset_view(None) is None
    assert dataset_view({"dataset": "not a table"}) is None


def _revision_event(served: Served, sha: str):
    revision = served.store.history.find_revision(DATASET_ID, sha)
    [event] = [e for e in served.app.state.services.queries.events_for_revision(revision.id) if e.kind == "revision.ingested"]
    return event


def test_feed_entry_carries_the_tables(client: httpx.Client, ingested) -> None:
    """The dataset's Atom feed: the entry of the rows-removed revision holds the splits table (its cells) and its
    plain summary the moved split."""
    served, shas, _ = ingested
    feed = feedparser.parse(client.get(f"/repos/{DATASET_ID}/feed.atom").content)
    entries = [e for e in feed.entries if "revision.ingested" in {t.term for t in e.tags}]
    [entry] = [e for e in entries if e.link.endswith(shas[2])]
    html = lxml.html.fromstring(entry.content[0].value)
    assert _table(html, "dataset-splits")[1] == ["default", "test", "20", "15", "-5", "same"]
    assert "default/test: 20 -> 15 (-5)" in entry.summary
    [added] = [e for e in entries if e.link.endswith(shas[1])]
    assert _table(lxml.html.fromstring(added.content[0].value), "dataset-schema")[0][:3] == ["default", "source", "added"]


def test_generic_payload_has_the_dataset_object(ingested) -> None:
    """The generic webhook's `data.dataset`: the same rows before/after and schema diff as the page."""
    served, shas, _ = ingested
    data = json.loads(generic.render(_revision_event(served, shas[2]), Links()))["data"]
    test = [s for s in data["dataset"]["splits"] if s["split"] == "test"]
    assert test == [{"config": "default", "split": "test", "before": 20, "after": 15, "delta": -5, "state": "same",
                     "columns": 3}]
    assert data["dataset"]["schema"] == [] and data["dataset"]["line"] == "2 configs, 3 splits, 145 rows (-5)"
    added = json.loads(generic.render(_revision_event(served, shas[1]), Links()))["data"]["dataset"]["schema"]
    assert [(c["column"], c["change"], c["before"], c["splits"]) for c in added] == [("source", "added", None, ["train"])]
    relicensed = json.loads(generic.render(_revision_event(served, shas[3]), Links()))["data"]["dataset"]
    assert relicensed["licence"] == {"before": "apache-2.0", "after": "mit"} and relicensed["conversion"]["lagging"]


def test_chat_messages_say_it_short(ingested) -> None:
    """Slack: a Data section; Discord: a Data field; each with the line and the split whose rows moved."""
    served, shas, _ = ingested
    event = _revision_event(served, shas[2])
    blocks = json.loads(slack.render(event, Links()))["blocks"]
    [data] = [b["text"]["text"] for b in blocks if b["type"] == "section" and b["text"]["text"].startswith("*Data*")]
    assert data == "*Data*\n2 configs, 3 splits, 145 rows (-5)\ndefault/test: 20 -&gt; 15 (-5)"  # escaped for Slack
    [embed] = json.loads(discord.render(event, Links()))["embeds"]
    [field] = [f for f in embed["fields"] if f["name"] == "Data"]
    assert field["value"] == "2 configs, 3 splits, 145 rows \\(\\-5\\)\ndefault/test\\: 20 \\-\\> 15 \\(\\-5\\)"  # escaped


def test_a_model_event_carries_no_dataset(ingested) -> None:
    """A revision event without a table (a model's) gets no `dataset` object and no Data section."""
    served, shas, _ = ingested
    event = _revision_event(served, shas[2])
    event = event.model_copy(update={"payload": {k: v for k, v in event.payload.items() if k != "dataset"}})
    assert "dataset" not in json.loads(generic.render(event, Links()))["data"]
    assert "*Data*" not in slack.render(event, Links()).decode()


def test_upstream_names_stay_text() -> None:
    """Config, split and column names come from upstream files: the template engine escapes them."""
    from feeds.views.dataset_view import dataset_view
    from feeds.views.view_models import render

    hostile = "<script>alert(1)</script>"
    table = {"line": hostile, "splits": [{"config": hostile, "split": "<b>x</b>", "before": 1, "after": 2, "delta": 1,
                                          "state": "same"}],
             "schema": [{"config": "c", "column": hostile, "change": "added", "before": None, "after": "<i>t</i>",
                         "splits": ["train"]}], "notes": [hostile], "licence": {"after": hostile}, "gated": {}}
    page = lxml.html.fromstring(f"<div>{render('_dataset.html', dataset=dataset_view({'dataset': table}))}</div>")
    assert not page.xpath("//script | //b | //i")
    assert _table(page, "dataset-splits") == [[hostile, "<b>x</b>", "1", "2", "+1", "same"]]
    assert _table(page, "dataset-schema")[0][1] == hostile


def test_dataset_events_carry_the_table_to_webhooks(ingested) -> None:
    """A subscription to `dataset.*` kinds: the dataset.rows_removed event's generic payload has the same table."""
    served, shas, _ = ingested
    revision = served.store.history.find_revision(DATASET_ID, shas[2])
    [event] = [e for e in served.app.state.services.queries.events_for_revision(revision.id)
               if e.kind == "dataset.rows_removed"]
    data = json.loads(generic.render(event, Links()))["data"]
    assert data["dataset"] == json.loads(generic.render(_revision_event(served, shas[2]), Links()))["data"]["dataset"]
    assert any(b["text"]["text"].startswith("*Data*") for b in json.loads(slack.render(event, Links()))["blocks"]
               if b["type"] == "section")



def _licence_mentions(text: str) -> int:
    """How often a text says the licence changed: each saying names the old licence."""
    return text.count("apache")


def test_a_licence_change_is_said_once(client: httpx.Client, ingested) -> None:
    """The relicensing commit changed README.md's `license`: the event list, the feed entry's changes and the
    webhook payloads say it once, as "licence changed: apache-2.0 -> mit" (dataset.licence_changed); the card's
    own change is the file changed, its licence keys left to that change; the own advisory is still published."""
    served, shas, _ = ingested
    event = _revision_event(served, shas[3])
    assert event.title == "evolving-qa (dataset): licence and files changed (warning)" and event.security
    assert event.payload["summaries"] == ["README.md changed", "licence changed: apache-2.0 -> mit"]
    generic_data = json.loads(generic.render(event, Links()))["data"]
    assert generic_data["summaries"] == ["README.md changed", "licence changed: apache-2.0 -> mit"]
    [changes] = [b["text"]["text"] for b in json.loads(slack.render(event, Links()))["blocks"]
                 if b["type"] == "section" and "README.md" in b["text"]["text"]]
    assert _licence_mentions(changes) == 1
    [embed] = json.loads(discord.render(event, Links()))["embeds"]
    assert _licence_mentions(embed["description"]) == 1
    feed = feedparser.parse(client.get(f"/repos/{DATASET_ID}/feed.atom").content)
    [entry] = [e for e in feed.entries if e.link.endswith(shas[3]) and "revision.ingested" in {t.term for t in e.tags}]
    listed = lxml.html.fromstring(entry.content[0].value).xpath('//div[contains(@class, "change")]')
    assert [" ".join(d.text_content().split()) for d in listed] == [
        "[info] files README.md changed", "[warning] dataset licence changed: apache-2.0 -> mit (security)"]
    events = client.get("/api/v1/events", params={"repo": DATASET_ID}).json()["items"]
    at_head = [(e["kind"], e["title"]) for e in events if e["sha"] == shas[3]]
    assert sum(_licence_mentions(title) for kind, title in at_head if kind != "advisory.published") == 1
    assert ("dataset.licence_changed", "evolving-qa (dataset): licence changed: apache-2.0 -> mit (warning)") in at_head
    assert any(kind == "advisory.published" and "license or gating changed" in title for kind, title in at_head)
    [card] = [c for c in served.store.history.changes_by_revision([served.store.history.find_revision(
        DATASET_ID, shas[3]).id]).popitem()[1] if c.path == "README.md" and c.kind == "files"]
    assert card.severity == "info" and not card.security and card.detail["metadata"] == []
    assert card.detail["licence_metadata"] == [{"key": "license", "old": "apache-2.0", "new": "mit", "topic": "license"}]


def test_compare_page_shows_the_table_between_the_two(client: httpx.Client, ingested) -> None:
    """A...B of a dataset: the differ's changes and, built by the same code as a revision's, the splits table of B
    against A (rows at A and at B), the schema diff across both, and the licence note."""
    _, shas, _ = ingested
    page = _page(client, f"/repos/{DATASET_ID}/compare/{shas[0]}...{shas[3]}")
    assert _table(page, "dataset-splits") == [
        ["default", "train", "100", "100", "", "same"],
        ["default", "test", "20", "15", "-5", "same"],
        ["extra", "train", "30", "30", "", "same"],
    ]
    [row] = _table(page, "dataset-schema")
    assert row[:3] == ["default", "source", "added"] and row[5] == "train"
    text = page.text_content()
    assert f"before: revision {shas[0][:12]}" in text and "licence changed: apache-2.0 -> mit" in text
    assert "2 configs, 3 splits, 145 rows (-5); 1 column change" in text
    assert "Nothing tracked differs." not in text  # the differ's changes stay


def test_compare_api_carries_the_table(client: httpx.Client, ingested) -> None:
    """GET .../diff?from=A&to=B: `dataset` is the same table the compare page shows, as data."""
    _, shas, _ = ingested
    response = client.get(f"/api/v1/repos/{DATASET_ID}/diff", params={"from": shas[1], "to": shas[2]})
    assert response.status_code == 200, response.text
    body = response.json()
    assert [(s["split"], s["before"], s["after"], s["delta"]) for s in body["dataset"]["splits"]] == [
        ("train", 100, 100, 0), ("test", 20, 15, -5), ("train", 30, 30, 0)]
    assert body["dataset"]["schema"] == [] and body["dataset"]["line"] == "2 configs, 3 splits, 145 rows (-5)"
    assert any(c["path"].endswith(".parquet") for c in body["changes"])  # the differ's changes, as before


def test_a_table_made_on_read_is_the_one_made_at_ingest(ingested) -> None:
    """For every revision, the table made from the stored summaries (what a revision ingested before events
    carried one shows) is the table its event carried."""
    served, shas, _ = ingested
    services = served.app.state.services
    for sha in shas:
        revision = served.store.history.find_revision(DATASET_ID, sha)
        assert services.dataset_table(None, revision) == _revision_event(served, sha).payload["dataset"], sha


@pytest.fixture
def without_tables(ingested):
    """The rows-removed revision's events as a revision ingested before events carried tables has them (no
    `dataset` in their payloads); put back afterwards."""
    import sqlalchemy as sa

    from storage.models.history import Event

    served, shas, _ = ingested
    revision = served.store.history.find_revision(DATASET_ID, shas[2])
    table = Event.__table__
    with served.store.engine.begin() as db:
        kept = dict(db.execute(sa.select(table.c.seq, table.c.payload).where(table.c.revision_id == revision.id)).all())

    def put(payloads: dict) -> None:
        with served.store.engine.begin() as db:
            for seq, payload in payloads.items():
                db.execute(sa.update(table).where(table.c.seq == seq).values(payload=payload))

    put({i: {k: v for k, v in p.items() if k != "dataset"} for i, p in kept.items()})
    try:
        yield served, shas
    finally:
        put(kept)


def test_a_revision_ingested_before_tables_gets_one_on_read(client: httpx.Client, without_tables) -> None:
    """No table in its event: the revision page and the timeline make it from the stored summaries."""
    served, shas = without_tables
    assert all("dataset" not in e.payload for e in served.app.state.services.queries.events_for_revision(
        served.store.history.find_revision(DATASET_ID, shas[2]).id))
    page = _page(client, f"/repos/{DATASET_ID}/revisions/{shas[2]}")
    assert _table(page, "dataset-splits")[1] == ["default", "test", "20", "15", "-5", "same"]
    assert "not recorded" not in page.text_content()
    lines = [p.text_content() for p in _page(client, f"/repos/{DATASET_ID}").xpath('//p[@class="dataset-line"]')]
    assert lines[1] == "2 configs, 3 splits, 145 rows (-5)"


def test_a_table_that_cannot_be_made_is_said(client: httpx.Client, without_tables, monkeypatch) -> None:
    """No table in the event and none to be made (the reader finds no summary of the parent): the page says the
    rows, splits and schema are not recorded for this revision, never an empty section."""
    served, shas = without_tables
    services = served.app.state.services
    monkeypatch.setattr(services, "tables", lambda a, b: None)
    monkeypatch.setattr(services, "_tables", {})
    page = _page(client, f"/repos/{DATASET_ID}/revisions/{shas[2]}")
    assert not page.xpath('//table[@id="dataset-splits"]')
    [said] = page.xpath('//p[@class="dataset-unrecorded"]')
    assert "not recorded for this revision" in said.text_content()
    compare = _page(client, f"/repos/{DATASET_ID}/compare/{shas[1]}...{shas[2]}")
    assert compare.xpath('//p[@class="dataset-unrecorded"]')


def test_stored_table_without_a_parent_to_compare_with(ingested) -> None:
    """A revision whose parent is neither summarized nor stored: None (said as not recorded); a model: None; a
    baseline: against nothing."""
    from storage.models import Revision
    from tracker.pipeline.dataset_revision import stored_table

    served, shas, _ = ingested
    stored = served.store.history.find_revision(DATASET_ID, shas[1])
    orphan = stored.model_copy(update={"parent_sha": "ab" * 20})
    assert stored_table(served.store, orphan) is None
    assert stored_table(served.store, Revision(repo_id="org/model", sha="cd" * 20)) is None
    baseline = stored_table(served.store, served.store.history.find_revision(DATASET_ID, shas[0]))
    assert {s["state"] for s in baseline["splits"]} == {"added"}
