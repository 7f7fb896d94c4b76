"""Webhooks end to end: revisions ingested through the real pipeline get their deliveries in the same
transaction, `hubwatch deliveries list/redeliver` (in-process) and `hubwatch run` (in a subprocess) deliver them."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from standardwebhooks import Webhook

from feeds.webhooks.dispatcher import DeliveryOptions, Dispatcher
from tests.support.cli import cli_json, run_cli, write_config
from tests.support.waiting import read_stderr_until
from tests.support.webhooks import LINKS, SECRET, Receiver, Reply
from tracker.cli.app import App

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

BROKEN = "hubwatch-tests/broken-model"
HOSTILE = "hubwatch-tests/hostile-model"


def _deliveries_by_event(app: App) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {e.event_id: [] for e in app.store.history.list_events(limit=10_000)}
    for item in app.store.outbox.list_deliveries(limit=10_000):
        out[item.event.event_id].append(item.delivery.id)
    return out


def test_every_ingested_revision_gets_its_delivery_and_a_failed_ingest_none(app: App, replay, receiver: Receiver) -> None:
    """Polling writes each revision's event with its Delivery rows; a revision aborted mid-ingest writes neither."""
    app.store.subscriptions.add_subscription(receiver.url, "slack", min_severity="info")
    app.store.watches.add_watch(BROKEN, "main", 900)
    replay.set_head(BROKEN, 1)
    app.poller.poll()
    replay.set_head(BROKEN, 3)
    replay.inject(500, path=f"/resolve/{replay.commits(BROKEN)[1].sha}/config.json$", method="GET", times=100)
    [outcome] = app.poller.poll()
    assert outcome.failed
    assert [len(ids) for ids in _deliveries_by_event(app).values()] == [1]
    replay.clear_faults()
    app.poller.poll()
    by_event = _deliveries_by_event(app)
    events = app.store.history.list_events(limit=10_000)
    # three revisions, and the own advisory of commit 2, whose malformed config.json took its eos id out of the stop set
    # (and which the verifier finds unreadable: lint.appeared)
    assert sorted(e.kind for e in events) == ["advisory.published", "lint.appeared"] + ["revision.ingested"] * 3
    assert [e.payload["class"] for e in events if e.kind == "advisory.published"] == ["stop-token-dropped"]
    assert len(by_event) == 5 and all(len(ids) == 1 for ids in by_event.values())


def test_hostile_commit_titles_reach_slack_and_discord_escaped(app: App, replay, make_receiver) -> None:
    """A commit title with HTML, a script tag and control characters arrives escaped in Slack and Discord."""
    slack_hook, discord_hook = make_receiver(), make_receiver()
    app.store.subscriptions.add_subscription(slack_hook.url, "slack", min_severity="info")
    app.store.subscriptions.add_subscription(discord_hook.url, "discord", min_severity="info")
    app.store.watches.add_watch(HOSTILE, "main", 900)
    replay.set_head(HOSTILE, 2)
    app.poller.poll(backfill=1)
    dispatcher = Dispatcher(app.store.outbox, DeliveryOptions(allow_private_targets=True), links=LINKS)
    try:
        report = dispatcher.run_once()
    finally:
        dispatcher.close()
    assert report.delivered == 2 * len(app.store.history.list_events()) >= 4
    slack_texts = [json.loads(r.body)["blocks"][0]["text"]["text"] for r in slack_hook.accepted]
    assert any("&lt;script&gt;alert('title')&lt;/script&gt;" in t for t in slack_texts)
    discord_texts = [json.loads(r.body)["embeds"][0]["description"] for r in discord_hook.accepted]
    assert any("\\<script\\>alert\\(" in t for t in discord_texts)
    assert not any("<" in t for t in slack_texts) and not any(re.search(r"(?<!\\)<", t) for t in discord_texts)
    for text in slack_texts + discord_texts:
        assert "\x07" not in text and "\x1b" not in text and "\x00" not in text and "\u241b" in "".join(slack_texts)


@pytest.fixture
def hook_config(replay, receiver: Receiver, database_url: str, tmp_path: Path) -> Path:
    extra = f"""
[server]
port = 0

[delivery]
allow_private_targets = true
poll_interval_s = 0.1
timeout_s = 5.0

[[webhooks]]
url = "{receiver.url}"
format = "generic"
secret_env = "TEST_HOOK_SECRET"
min_severity = "info"
"""
    return write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url, extra)


ENV = {"TEST_HOOK_SECRET": SECRET}


def test_deliveries_list_and_redeliver(replay, receiver: Receiver, hook_config: Path) -> None:
    """`deliveries list` shows the log; `redeliver ID` sends it now with the same webhook-id, signed."""
    replay.set_head(BROKEN, 1)
    assert run_cli("watch", "add", BROKEN, config=hook_config, env=ENV).returncode == 0
    assert run_cli("poll", config=hook_config, env=ENV).returncode == 0
    [pending] = cli_json("deliveries", "list", config=hook_config, env=ENV)
    assert pending["status"] == "pending" and pending["attempts"] == 0 and pending["event"]["repo_id"] == BROKEN
    assert pending["subscription"]["url"] == f"http://127.0.0.1:{receiver.port}/…"
    for _ in (1, 2):
        result = run_cli("deliveries", "redeliver", pending["id"], config=hook_config, env=ENV)
        assert result.returncode == 0, result.stderr
        assert f"{pending['id']} delivered (204" in result.stdout
        got = receiver.accepted[-1]
        assert got.headers["webhook-id"] == pending["id"]
        Webhook(SECRET).verify(got.body, got.headers)
    assert len(receiver.accepted) == 2
    [delivered] = cli_json("deliveries", "list", "--status", "delivered", config=hook_config, env=ENV)
    assert delivered["attempts"] == 2
    text = run_cli("deliveries", "list", config=hook_config, env=ENV)
    assert pending["id"] in text.stdout and "delivered" in text.stdout and SECRET not in text.stdout + text.stderr
    receiver.default = Reply(503, body=b"down for maintenance")
    failed = run_cli("deliveries", "redeliver", pending["id"], config=hook_config, env=ENV)
    assert failed.returncode == 1 and "not delivered: 503: down for maintenance; next try" in failed.stderr
    unknown = run_cli("deliveries", "redeliver", "msg_nope", config=hook_config, env=ENV)
    assert unknown.returncode == 3 and "no delivery msg_nope" in unknown.stderr
    assert cli_json("deliveries", "list", "--status", "dead", config=hook_config, env=ENV) == []


def test_run_delivers_webhooks_and_stops_cleanly(replay, receiver: Receiver, hook_config: Path) -> None:
    """`hubwatch run` polls, delivers the new revision's webhook, and SIGTERM stops the dispatcher cleanly."""
    replay.set_head(BROKEN, 1)
    run_cli("watch", "add", BROKEN, "--interval", "1h", config=hook_config, env=ENV)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracker", "--config", str(hook_config), "run"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **ENV},
    )
    try:
        read_stderr_until(proc, '"webhook_delivered"', timeout_s=60)
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=30)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, rest
    assert "dispatcher_stopped" in rest and SECRET not in rest
    [got] = receiver.accepted
    payload = Webhook(SECRET).verify(got.body, got.headers)
    assert payload["data"]["repo_id"] == BROKEN and payload["data"]["sha"] == replay.head_sha(BROKEN)
    [item] = cli_json("deliveries", "list", config=hook_config, env=ENV)
    assert item["status"] == "delivered" and item["id"] == got.headers["webhook-id"]
