"""A database that cannot be written pauses polling (no Hub request), reports itself on /healthz and
resumes by itself; two processes racing on one commit store it once. Faults are real SQLite errors,
raised at the engine by a test hook, never by patching the pipeline."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from structlog.testing import capture_logs

from feeds.http.app import create_app
from storage.db import create_db_engine
from storage.front import Storage
from storage.history import HistoryStore
from storage.models import Revision
from tests.support.cli import run_cli, write_config
from tests.support.settings import settings_for
from tracker.cli.app import App
from tracker.hub.client import HubClient
from tracker.pipeline.ingest import Ingestor

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

BROKEN = "hubwatch-tests/broken-model"
REWRITTEN = "hubwatch-tests/rewritten-model"


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class DiskFull:
    """While `on`, every write statement on the engine fails as SQLite does on a full disk."""

    def __init__(self, engine: sa.Engine, prefixes: tuple[str, ...] = ("INSERT", "UPDATE", "DELETE")) -> None:
        self.on = False
        self.prefixes = prefixes
        sa.event.listen(engine, "before_cursor_execute", self._refuse)

    def _refuse(self, _conn, _cursor, statement: str, *_args) -> None:
        if self.on and statement.lstrip().upper().startswith(self.prefixes):
            raise sqlite3.OperationalError("database or disk is full")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sqlite_app(replay, tmp_path: Path, clock: FakeClock) -> Iterator[App]:
    app = App(settings_for(replay.endpoint, tmp_path / "hubwatch.db"), clock=clock)  # type: ignore[arg-type]
    yield app
    app.store.engine.dispose()


def _health(app: App) -> dict:
    client = TestClient(create_app(app.store, storage_state=app.poller.gate.state))
    response = client.get("/healthz")
    assert response.status_code == 200
    return response.json()


def test_a_full_disk_pauses_polling_until_writes_work_again(sqlite_app: App, replay, clock: FakeClock) -> None:
    """Disk full: the poll that hit it fails quietly, then no Hub request at all until a probe succeeds; then polling resumes."""
    app = sqlite_app
    for repo in (BROKEN, REWRITTEN):
        replay.set_head(repo, 1)
        app.store.watches.add_watch(repo, "main", 60)
    assert not any(o.failed for o in app.poller.poll())
    replay.set_head(BROKEN, 2)
    disk = DiskFull(app.store.engine)
    disk.on = True
    with capture_logs() as logs:
        outcome = app.poller.poll_if_due(BROKEN, "main")  # the last write was just now: no probe, the poll finds out
        assert outcome is not None and outcome.failed and "database or disk is full" in outcome.storage_error
        health = _health(app)
        assert health["status"] == "ok" and health["storage"] == "failing" and health["polling_paused"] is True
        assert "database or disk is full" in health["error"] and health["since"]
        replay.reset_requests()
        for _ in range(30):  # 30 minutes of scheduled polls, probes backing off: 1, 2, 4, 8, 16 min
            clock.advance(60)
            assert app.poller.poll_if_due(BROKEN, "main") is None
            assert app.poller.poll_if_due(REWRITTEN, "main") is None
        assert replay.count_requests() == 0
    assert [e["event"] for e in logs if e["event"].startswith("storage_")][:2] == ["storage_failed", "storage_probe_failed"]
    assert not [e for e in logs if "exc_info" in e or e["event"] == "repo_poll_crashed"]
    disk.on = False
    clock.advance(16 * 60)
    outcome = app.poller.poll_if_due(BROKEN, "main")
    assert outcome is not None and outcome.status == "ingested"
    assert _health(app)["storage"] == "ok" and _health(app)["polling_paused"] is False
    assert app.poller.poll_if_due(REWRITTEN, "main").status == "unchanged"


def test_hubwatch_poll_with_a_full_disk_makes_no_hub_request(sqlite_app: App, replay) -> None:
    """A poll pass that starts with the database refusing writes probes it first and polls nothing."""
    app = sqlite_app
    replay.set_head(BROKEN, 1)
    app.store.watches.add_watch(BROKEN, "main", 60)
    app.store.watches.add_watch(REWRITTEN, "main", 60)
    DiskFull(app.store.engine).on = True
    replay.reset_requests()
    outcomes = app.poller.poll()
    assert [o.failed for o in outcomes] == [True, True]
    assert all("database or disk is full" in o.error for o in outcomes)
    assert replay.count_requests() == 0


def test_a_visibility_event_and_the_watch_meta_commit_together(sqlite_app: App, replay, clock: FakeClock) -> None:
    """When the watch's meta cannot be written, the visibility event is not written either; the retry writes it once."""
    app = sqlite_app
    replay.set_head(BROKEN, 1)
    app.store.watches.add_watch(BROKEN, "main", 900)
    app.poller.poll()
    replay.repo(BROKEN).gated = "auto"
    failing = DiskFull(app.store.engine, prefixes=("UPDATE WATCH",))
    failing.on = True
    [outcome] = app.poller.poll()
    assert outcome.failed and outcome.storage_error
    assert [e for e in app.store.history.list_events(BROKEN) if e.kind == "repo.visibility_changed"] == []
    failing.on = False
    clock.advance(120)  # past the storage probe's back-off
    app.poller.poll()
    app.poller.poll()
    events = [e for e in app.store.history.list_events(BROKEN) if e.kind == "repo.visibility_changed"]
    assert len(events) == 1 and "'auto'" in events[0].title


class _Barrier(HistoryStore):
    """A history whose writers of a revision wait for each other: both have fetched it, neither stored it."""

    barrier = threading.Barrier(2, timeout=60)

    def save_revision(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.barrier.wait()
        return super().save_revision(*args, **kwargs)


class _BarrierStorage(Storage):
    """Storage with the history above in place of its own."""

    @cached_property
    def history(self) -> _Barrier:
        return _Barrier(self.engine, self.clock)


def test_two_writers_racing_on_one_commit_store_it_once(replay, database_url: str) -> None:
    """Two ingestors (two engines, one database) store the same commit at once: one revision, no failure."""
    settings = settings_for(replay.endpoint, database_url)
    App(settings).store.watches.add_watch(BROKEN, "main", 900)  # type: ignore[arg-type]
    replay.set_head(BROKEN, 1)
    _Barrier.barrier = threading.Barrier(2, timeout=60)
    ingestors = [
        Ingestor(_BarrierStorage(create_db_engine(database_url)), HubClient(replay.endpoint), settings)  # type: ignore[arg-type]
        for _ in range(2)
    ]
    outcomes: list = []
    with capture_logs() as logs:
        threads = [
            threading.Thread(target=lambda i=i: outcomes.append(i.poll(i.store.watches.get_watch(BROKEN)))) for i in ingestors
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    assert len(outcomes) == 2 and not any(o.failed for o in outcomes), [o.error for o in outcomes]
    assert sorted(len(o.revisions) for o in outcomes) == [0, 1]
    assert [e["event"] for e in logs].count("revision_already_stored") == 1
    with sa.orm.Session(ingestors[0].store.engine) as s:
        assert s.scalar(sa.select(sa.func.count()).select_from(Revision)) == 1
    watch = ingestors[0].store.watches.get_watch(BROKEN)
    assert watch.last_sha == replay.head_sha(BROKEN) and watch.last_error is None


def test_two_hubwatch_polls_at_once_store_each_commit_once(replay, tmp_path: Path, database_url: str) -> None:
    """Two `hubwatch poll` processes started together on one database both succeed, with no traceback."""
    import subprocess
    import sys

    config = write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url)
    replay.set_head(BROKEN, 1)
    assert run_cli("watch", "add", BROKEN, "--backfill", "0", config=config).returncode == 0
    replay.set_head(BROKEN, 4)
    cmd = [sys.executable, "-m", "tracker", "--config", str(config), "poll"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    for _out, err, code in results:
        assert code == 0 and "Traceback" not in err, err
    app = App(settings_for(replay.endpoint, database_url))  # type: ignore[arg-type]
    assert [r.sha for r in app.store.history.list_revisions(BROKEN)] == [replay.head_sha(BROKEN)]
    app.store.engine.dispose()


def test_the_schedulers_poll_says_when_the_database_could_not_take_it(sqlite_app: App, replay, clock: FakeClock) -> None:
    """The daemon's poll of a watch (tracker/cli/builder.py `watch_poll`) answers False while the disk is full
    (the poll that hit it, and the polls the closed gate skips), so the schedulers keep the watch due; True once
    a probe finds writes working and the poll stores the commit."""
    from tracker.cli.builder import watch_poll

    app = sqlite_app
    replay.set_head(BROKEN, 1)
    app.store.watches.add_watch(BROKEN, "main", 60)
    stored: list[int] = []
    poll = watch_poll(app, lambda: stored.append(1))
    assert poll(BROKEN, "main") is True and stored == [1]  # the baseline
    replay.set_head(BROKEN, 2)
    disk = DiskFull(app.store.engine)
    disk.on = True
    assert poll(BROKEN, "main") is False  # the write failed
    clock.advance(30)
    assert poll(BROKEN, "main") is False  # skipped: polling paused
    disk.on = False
    clock.advance(120)
    assert poll(BROKEN, "main") is True and stored == [1, 1]
