"""A followed derivative's own history, without a watch row: its baseline stored from what the family pass read,
its later commits ingested by the watch's pipeline (each one, oldest first), shown by `history`, its feed and a
webhook subscribed to it; a watched derivative left to its watch; a failed ingest named, nothing half-written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import feedparser
import pytest
from standardwebhooks import Webhook

from tests.support.cli import cli_json, run_cli, signed_webhook_section, write_config
from tests.support.derivative_repos import AWQ, BASE, FINETUNE, GGUF, REUPLOADED, following_app, write_family, write_reuploads
from tests.support.served import serve
from tests.support.webhooks import SECRET, Receiver
from tracker.cli.app import App
from tracker.family.derivative_history import NOT_READ
from tracker.standins.replay.control import BUNDLED_ROOT, ReplayServer

pytestmark = pytest.mark.postgres

ENV = {"TEST_HOOK_SECRET": SECRET}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ReplayServer]:
    write_family(tmp_path / "family")
    write_reuploads(tmp_path / "family")
    server = ReplayServer(roots=[BUNDLED_ROOT, tmp_path / "family"])
    server.set_head(BASE, 3)  # the template fix is the base's head
    server.set_head(GGUF, 1)
    server.set_head(REUPLOADED, 1)  # quantized from the old template
    with server:
        yield server


@pytest.fixture
def app(served: ReplayServer, database_url: str) -> Iterator[App]:
    with following_app(served.endpoint, database_url) as app:
        yield app


def _poll(app: App) -> None:
    for outcome in app.poller.poll():
        assert not outcome.failed, outcome.error


def _shas(app: App, repo_id: str) -> list[str]:
    return [r.sha for r in app.store.history.list_revisions(repo_id)]


def _row(app: App, repo_id: str):
    return next(d for d in app.store.derivatives.derivatives(BASE) if d.repo_id == repo_id)


def _ok(result) -> str:
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_a_reupload_is_the_derivatives_own_revision_in_history_feed_and_webhook(
    served: ReplayServer, receiver: Receiver, database_url: str, tmp_path: Path
) -> None:
    """First pass: the derivative's baseline at its head (files it did not read say so); its two new commits then
    become two revisions, the template fix one with its own chat template change, in `history --json`, its RSS
    feed and a signed webhook subscribed to it alone. It never becomes a watch."""
    hook = signed_webhook_section(receiver.url, ("chat_template",)) + f'repos = ["{REUPLOADED}"]\n'
    config = write_config(tmp_path / "hubwatch.toml", served.endpoint, database_url, hook)
    _ok(run_cli("watch", "add", BASE, "--derivatives", "quantized", config=config, env=ENV))
    _ok(run_cli("poll", config=config, env=ENV))
    [baseline] = cli_json("history", REUPLOADED, config=config, env=ENV)
    assert baseline["sha"] == served.head_sha(REUPLOADED) and baseline["baseline"] is True
    shown = cli_json("show", REUPLOADED, baseline["sha"], config=config, env=ENV)
    notes = {f["path"]: f["note"] for f in shown["files"]}
    assert notes["README.md"] == NOT_READ and notes["tokenizer_config.json"] is None  # a part file: read

    served.set_head(REUPLOADED, 3)
    _ok(run_cli("poll", config=config, env=ENV))
    fixed, card, first = cli_json("history", REUPLOADED, config=config, env=ENV)
    commits = served.commits(REUPLOADED)
    assert [fixed["sha"], card["sha"], first["sha"]] == [c.sha for c in reversed(commits)]
    assert (card["parent_sha"], fixed["parent_sha"]) == (first["sha"], card["sha"])  # each commit, oldest first
    assert [c["kind"] for c in card["changes"]] == ["files"] and card["changes"][0]["path"] == "README.md"
    [template] = [c for c in fixed["changes"] if c["kind"] == "chat_template"]
    assert "chat template" in template["summary"] or "chat_template" in template["summary"]

    watched = cli_json("watch", "list", config=config, env=ENV)
    assert [w["repo_id"] for w in watched] == [BASE]
    tree = cli_json("tree", BASE, config=config, env=ENV)
    row = next(r for r in tree["derivatives"] if r["repo_id"] == REUPLOADED)
    assert row["head_sha"] == fixed["sha"] and row["parts"]["chat_template"]["status"] == "carries"

    feed = feedparser.parse(_ok(run_cli("feed", REUPLOADED, "--format", "rss", config=config, env=ENV)))
    assert not feed.bozo and any(fixed["sha"][:12] in e.link or fixed["sha"] in e.link for e in feed.entries)

    queued = cli_json("deliveries", "list", config=config, env=ENV)
    assert {d["event"]["repo_id"] for d in queued} == {REUPLOADED}  # subscribed to the derivative alone
    [delivery] = [d for d in queued if d["event"]["sha"] == fixed["sha"]]
    _ok(run_cli("deliveries", "redeliver", delivery["id"], config=config, env=ENV))
    payload = json.dumps(Webhook(SECRET).verify(receiver.accepted[-1].body, receiver.accepted[-1].headers))
    assert REUPLOADED in payload and "chat_template" in payload


def test_a_later_pass_with_nothing_moved_stores_nothing_and_costs_one_request_each(app: App, served: ReplayServer) -> None:
    """Once baselines are stored, a pass where no derivative moved adds no revision and asks one head each."""
    _poll(app)
    stored = {d.repo_id: _shas(app, d.repo_id) for d in app.store.derivatives.derivatives(BASE)}
    assert stored[REUPLOADED] == [served.head_sha(REUPLOADED)] and stored[AWQ] and stored[FINETUNE]
    served.reset_requests()
    _poll(app)
    assert {d.repo_id: _shas(app, d.repo_id) for d in app.store.derivatives.derivatives(BASE)} == stored
    family = [r for r in served.requests if not r.path.startswith(f"/api/models/{BASE}")]
    assert len(family) == 2 + len(stored)  # the two listings, one head check each
    assert app.store.derivatives.get_follow(BASE).last_report["requests"] == len(family)


def test_the_requests_of_a_moved_derivatives_ingest_count_in_the_pass_report(app: App, served: ReplayServer) -> None:
    """The budget plans a family at its last pass's `requests`: the ingest of a moved derivative's commits (its
    commit list, each commit's tree and new files) is counted there, as the replay counts it."""
    _poll(app)
    served.set_head(REUPLOADED, 3)
    served.reset_requests()
    _poll(app)
    family = [r for r in served.requests if not r.path.startswith(f"/api/models/{BASE}")]
    moved = [r for r in family if REUPLOADED in r.path]
    assert any("/commits/" in r.path for r in moved) and sum("/tree/" in r.path for r in moved) == 2
    assert app.store.derivatives.get_follow(BASE).last_report["requests"] == len(family)


def test_the_api_and_diff_serve_a_derivatives_revisions(app: App, served: ReplayServer) -> None:
    """The API lists the derivative's revisions and compares its baseline with its re-upload, as for a watch."""
    _poll(app)
    served.set_head(REUPLOADED, 3)
    _poll(app)
    first, _, fixed = (c.sha for c in served.commits(REUPLOADED))
    with serve(app.store) as server, server.client() as client:
        page = client.get(f"/api/v1/repos/{REUPLOADED}/revisions").json()
        diff = client.get(f"/api/v1/repos/{REUPLOADED}/diff", params={"from": first, "to": fixed})
        missing = client.get(f"/api/v1/repos/{REUPLOADED}-not-followed/revisions")
    assert [r["sha"] for r in page["items"]] == [c.sha for c in reversed(served.commits(REUPLOADED))]
    assert diff.status_code == 200, diff.text
    assert "chat_template" in {c["kind"] for c in diff.json()["changes"]}
    assert missing.status_code == 404


def test_a_watched_derivative_is_left_to_its_watch(app: App, served: ReplayServer) -> None:
    """The user watches the derivative too: a family pass before the watch's poll stores none of its history but
    checks its parts; its revisions are the watch's (whole files, none stored twice)."""
    app.store.watches.add_watch(REUPLOADED, "main", 900)
    app.poller.poll([BASE])  # the family pass runs before the derivative's own watch is polled
    assert _shas(app, REUPLOADED) == []
    assert _row(app, REUPLOADED).lineage["chat_template"]["status"] == "diverged"  # checked (the base keeps its head only)
    _poll(app)
    served.set_head(REUPLOADED, 3)
    app.poller.poll([BASE])
    assert _shas(app, REUPLOADED) == [served.commits(REUPLOADED)[0].sha]
    row = _row(app, REUPLOADED)
    assert row.head_sha == served.head_sha(REUPLOADED) and row.lineage["chat_template"]["status"] == "carries"
    _poll(app)
    history = app.store.history
    shas = _shas(app, REUPLOADED)
    assert shas == [c.sha for c in reversed(served.commits(REUPLOADED))] and len(set(shas)) == 3
    for revision in history.list_revisions(REUPLOADED):
        assert all(f.note != NOT_READ for f in history.revision_files(revision.id))  # no family baseline among them
    assert sorted(w.repo_id for w in app.store.watches.list_watches()) == sorted([BASE, REUPLOADED])


def test_a_failed_ingest_is_named_writes_nothing_of_it_and_the_next_pass_resumes(app: App, served: ReplayServer) -> None:
    """A Hub fault on the derivative's last new commit: the commit before it is stored, nothing of the failed one,
    the derivative is named with its last head kept, the others are still checked; the next pass finishes."""
    _poll(app)
    baseline_sha = served.head_sha(REUPLOADED)
    served.set_head(REUPLOADED, 3)
    card_sha, fixed_sha = (c.sha for c in served.commits(REUPLOADED)[1:])
    served.inject(403, path=f"/tree/{fixed_sha}", method="GET", times=100)  # not retried by the library
    _poll(app)
    assert _shas(app, REUPLOADED) == [card_sha, baseline_sha]
    assert not [e for e in app.store.history.list_events(REUPLOADED) if e.sha == fixed_sha]
    report = app.store.derivatives.get_follow(BASE).last_report
    [named] = [p for p in report["problems"] if p.startswith(REUPLOADED)]
    assert "not ingested" in named and "403" in named
    assert report["checked"] == 5  # every other derivative (the gated one aside) still checked
    row = _row(app, REUPLOADED)
    assert row.head_sha == baseline_sha and "not ingested" in (row.problem or "")

    served.clear_faults()
    _poll(app)
    assert _shas(app, REUPLOADED) == [fixed_sha, card_sha, baseline_sha]
    row = _row(app, REUPLOADED)
    assert row.head_sha == fixed_sha and row.problem is None and row.lineage["chat_template"]["status"] == "carries"
