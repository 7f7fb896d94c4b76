"""The daemon at scale: watch changes noticed by a version, not a reload; a Hub webhook's acknowledgement
reads one repo's watches; overdue polls shown on /healthz and /metrics; a warm-up that leaves requests
alone; an unchanged poll that costs one guarded UPDATE."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from feeds.http.app import ServerOptions, ServerThread, create_app
from storage.db import create_db_engine, migrate
from storage.event_log import NewEvent
from storage.front import Storage
from storage.models import Watch
from tracker.cli.app import App
from tracker.polling.scheduler import Scheduler

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too

SECRET = "hub-secret-for-scale-tests"


class _Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def store(database_url: str) -> Iterator[Storage]:
    engine = create_db_engine(database_url)
    migrate(engine)
    yield Storage(engine, clock=_Clock(datetime(2026, 1, 1, tzinfo=UTC)))
    engine.dispose()


class _Statements:
    """The SQL statements an engine runs while recording."""

    def __init__(self, engine: sa.Engine) -> None:
        self.seen: list[str] = []
        self.recording = False
        sa.event.listen(engine, "before_cursor_execute", self._record)

    def _record(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if self.recording:
            self.seen.append(" ".join(statement.split()))


def test_the_watch_list_version_moves_with_every_change_and_only_then(store: Storage) -> None:
    """Adding, re-timing and removing a watch each move the version; polls do not; a reused id is told apart."""
    versions = [store.watches.watch_list_version()]

    def moved() -> bool:
        versions.append(store.watches.watch_list_version())
        return versions[-1] != versions[-2]

    store.watches.add_watch("org/a", "main", 900)
    assert moved()
    store.watches.add_watch("org/b", "main", 900)
    assert moved()
    watch = store.watches.get_watch("org/b")
    assert watch is not None and watch.id is not None
    store.watches.record_poll_ok(watch.id)
    assert not moved()
    store.watches.sync_config_watches([("org/a", "main", 600)])
    assert moved()
    store.watches.remove_watch("org/b")
    assert moved()
    store.clock.now += timedelta(seconds=1)  # type: ignore[attr-defined]
    store.watches.add_watch("org/c", "main", 900)  # SQLite may hand org/b's id to org/c: the count and sums match again
    assert moved()
    assert [(w.repo_id, w.interval_s) for w in store.watches.watch_schedule()] == [("org/a", 600), ("org/c", 900)]


def _hub_payload(repo_id: str, new: str) -> bytes:
    return json.dumps({"event": {"action": "update", "scope": "repo.content"},
                       "repo": {"type": "model", "name": repo_id, "headSha": new},
                       "updatedRefs": [{"ref": "refs/heads/main", "oldSha": None, "newSha": new}]}).encode()


def test_a_hub_webhook_reads_one_repos_watches_not_the_list(store: Storage) -> None:
    """The acknowledgement looks up the one repo's watches by repo id (indexed), then triggers; it never reads every watch."""
    for i in range(30):
        store.watches.add_watch(f"org/m{i:02d}", "main", 900)
    store.watches.add_watch("org/m07", "dev", 900)
    triggered: list[tuple[str, str | None]] = []

    def trigger(repo_id: str, branch: str | None, head_sha: str | None = None) -> bool:
        triggered.append((repo_id, branch))
        return True

    statements = _Statements(store.engine)
    app = create_app(store, options=ServerOptions(hub_webhook_secret=SECRET), trigger=trigger)
    with ServerThread(app, "127.0.0.1", 0) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        statements.recording = True
        response = client.post("/hooks/hub", content=_hub_payload("org/m07", "a" * 40),
                               headers={"x-webhook-secret": SECRET, "content-type": "application/json"})
        statements.recording = False
    assert response.status_code == 202, response.text
    assert triggered == [("org/m07", "main")]
    watch_reads = [s for s in statements.seen if "FROM watch" in s]
    assert watch_reads and all("WHERE watch.repo_id =" in s for s in watch_reads), watch_reads
    if store.engine.dialect.name == "sqlite":
        with store.engine.connect() as conn:
            plan = " ".join(str(row[-1]) for row in conn.exec_driver_sql(
                "EXPLAIN QUERY PLAN " + watch_reads[0].replace("?", "'org/m07'")))
        assert "USING INDEX" in plan, plan


def test_healthz_and_metrics_show_overdue_polls(store: Storage) -> None:
    """/healthz and /metrics report how many polls are overdue and how late the oldest is, from the scheduler."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    clock = _Clock(now)
    watches = [Watch(repo_id=f"org/m{i}", branch="main", interval_s=600, last_polled_at=now - timedelta(seconds=5))
               for i in range(3)]
    scheduler = Scheduler(lambda: watches, lambda repo_id, branch: None, jitter_s=0, clock=clock)
    scheduler.sync()
    app = create_app(store, poll_state=scheduler.poll_state)
    with ServerThread(app, "127.0.0.1", 0) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        fresh = client.get("/healthz").json()
        clock.now = now + timedelta(seconds=595 + 60 + 40)  # due at +595 s, grace 60 s: 40 s overdue
        late = client.get("/healthz").json()
        metrics = client.get("/metrics").text
    assert (fresh["polls_scheduled"], fresh["polls_overdue"], fresh["oldest_overdue_s"]) == (3, 0, 0.0)
    assert (late["polls_overdue"], late["oldest_overdue_s"]) == (3, 40.0)
    assert "hubwatch_polls_overdue 3\n" in metrics and "hubwatch_oldest_overdue_seconds 40\n" in metrics


def test_the_feed_warm_up_goes_in_pieces_and_requests_are_answered_between(store: Storage) -> None:
    """The warm-up renders a few entries at a time; between pieces a feed request is answered; it stops when all are made."""
    for i in range(23):
        store.history.add_event(f"org/m{i}", NewEvent(f"ev-{i}", "revision.ingested", f"org/m{i}: changed", "notice"), sha=f"{i:040x}")
    app = create_app(store)
    answered: list[int] = []
    with ServerThread(app, "127.0.0.1", 0) as server, httpx.Client(base_url=server.url, timeout=30) as client:

        def pause(_seconds: float) -> None:
            answered.append(client.get("/feeds/all.atom?limit=3").status_code)

        made = server.warm_feeds(limit=1000, piece=5, pause=pause)
        assert server.warm_feeds(limit=1000, piece=5, pause=pause) == 0  # all made: one look, no pause
    assert made == 23
    assert answered == [200] * 5  # pieces of 5, 5, 5, 5, 3 with a request answered after each


def test_an_unchanged_poll_is_one_guarded_update_and_yields_to_another_writer(app: App, replay) -> None:
    """After a first poll reads the watch, the next unchanged one runs one UPDATE; when another writer
    touched the watch meanwhile, the guard misses and the poll reads and records in full."""
    repo_id = "hubwatch-tests/broken-model"
    replay.set_head(repo_id, 1)
    app.store.watches.add_watch(repo_id, "main", 3600)
    app.poller.poll()
    assert app.poller.poll_if_due(repo_id, "main").stamped  # reads the watch (a start), stamps in place
    statements = _Statements(app.store.engine)
    statements.recording = True
    outcome = app.poller.poll_if_due(repo_id, "main")
    statements.recording = False
    assert outcome.status == "unchanged" and outcome.stamped
    assert len(statements.seen) == 1 and statements.seen[0].startswith("UPDATE watch SET last_polled_at="), statements.seen
    watch = app.store.watches.get_watch(repo_id)
    app.store.watches.record_poll_error(watch.id, "seen failing elsewhere", None)  # another worker's poll
    outcome = app.poller.poll_if_due(repo_id, "main")
    assert outcome.status == "unchanged" and not outcome.stamped  # the guard missed: recorded in full
    assert app.store.watches.get_watch(repo_id).last_error is None
    replay.set_head(repo_id, 2)
    assert app.poller.poll_if_due(repo_id, "main").stamped is False  # a moved head reads the stored watch first
    assert app.poller.poll_if_due(repo_id, "main").status == "unchanged"
