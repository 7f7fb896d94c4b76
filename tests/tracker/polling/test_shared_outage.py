"""A worker sharing PostgreSQL (tracker/polling/shared.py) whose server is stopped and started again: its claims
pause while the database is down, and it is polling again within seconds of the restart (issue 21: after a 20 s
outage, a pause grown to 30 s by the failures of every periodic job left the workers idle 24 s after the restart)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from storage.db import create_db_engine, migrate
from storage.front import Storage
from storage.leases import LeaseStore
from storage.models import Watch
from tests.support import postgres_server
from tests.support.settings import settings_for
from tests.support.waiting import wait_until
from tracker.cli.app import App
from tracker.cli.builder import build_scheduler, watch_poll
from tracker.polling import shared
from tracker.polling.shared import SharedScheduler

BROKEN = "hubwatch-tests/broken-model"  # a bundled replay history: its first commits are plain config changes


@pytest.fixture(autouse=True)
def _short_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    """The claim pause doubling from 0.25 s to a cap of 1.25 s (hubwatch's own: 1 s to 5 s), read when a worker is
    built: the same growth to the cap while the server is down, in 1.75 s of outage instead of 7."""
    monkeypatch.setattr(shared, "DB_RETRY_S", 0.25)
    monkeypatch.setattr(shared, "DB_RETRY_MAX_S", 1.25)


@pytest.fixture
def server():
    if not postgres_server.available():
        pytest.skip(f"needs PostgreSQL's server binaries in {postgres_server.PG_BIN} (CI installs them)")
    with postgres_server.throwaway_postgres() as server:
        yield server


def _make_due(url: str) -> bool:
    """Make every watch due now, once the server answers again (False while it does not)."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.update(Watch.__table__).values(next_poll_at=datetime.now(UTC)))  # type: ignore[attr-defined]
        return True
    except sa.exc.OperationalError:
        return False
    finally:
        engine.dispose()


def test_a_worker_claims_again_within_seconds_of_the_database_coming_back(server) -> None:
    """With a periodic job every second (as the listing's) failing beside the claims while the server is down,
    the claim pause reaches its cap; once the server is back, a due watch is polled within a few seconds,
    not after the rest of a pause that the outage stretched."""
    engine = create_db_engine(server.url)
    migrate(engine)
    store = Storage(engine)
    store.watches.add_watch("org/model", "main", 3600)
    polled: list[float] = []
    done = threading.Event()

    def poll(repo_id: str, branch: str) -> None:
        polled.append(time.monotonic())
        done.set()

    worker = SharedScheduler(store.watches.watch_schedule, poll, 0, LeaseStore(engine), 3, worker="w", claim_tick_s=0.1,
                             version=store.watches.watch_list_version)
    worker.add_periodic("__every_second__", lambda: None, 1)
    worker.start()
    try:
        assert done.wait(15)  # the baseline poll
        server.stop()
        assert wait_until(lambda: worker._retry_in_s >= shared.DB_RETRY_MAX_S, timeout_s=60), "the claim pause never grew"
        server.start()
        back = time.monotonic()
        assert wait_until(lambda: _make_due(server.url), timeout_s=10)
        assert wait_until(lambda: len(polled) == 2, timeout_s=15), "the due watch was not polled after the restart"
    finally:
        worker.stop()
        engine.dispose()
    assert polled[1] - back < 4.0, f"polled {polled[1] - back:.1f} s after the restart"


def test_a_worker_reopens_polling_when_it_finds_the_database_back(server, replay) -> None:
    """The daemon's wiring (build_scheduler, watch_poll): polling paused by an outage (the storage gate told, as
    the dispatcher tells it) reopens when the worker's own claims go through again, so a repo that moved during the
    outage is stored within a claim pause of the restart, not at the gate's next probe a minute later."""
    engine = create_db_engine(server.url)
    migrate(engine)
    engine.dispose()
    replay.set_head(BROKEN, 1)
    app = App(settings_for(replay.endpoint, server.url, poll={"coordination": "shared", "lease": "3s"}))  # type: ignore[arg-type]
    app.store.watches.add_watch(BROKEN, "main", 3600)
    worker = build_scheduler(app, watch_poll(app, lambda: None), 0)
    assert isinstance(worker, SharedScheduler)
    worker.start()
    try:
        assert wait_until(lambda: _revisions(server.url) == 1, timeout_s=30)  # the baseline
        replay.set_head(BROKEN, 2)
        server.stop()
        app.poller.gate.failed("connection refused")  # what the dispatcher reports when it finds the database gone
        assert wait_until(lambda: worker._retry_in_s >= shared.DB_RETRY_MAX_S, timeout_s=60), "the claim pause never grew"
        server.start()
        back = time.monotonic()
        assert wait_until(lambda: _make_due(server.url), timeout_s=10)  # the listing's request for the move
        assert wait_until(lambda: _revisions(server.url) == 2, timeout_s=15), "the move was not stored after the restart"
        stored_s = time.monotonic() - back
    finally:
        worker.stop()
        app.store.engine.dispose()
    assert stored_s < shared.DB_RETRY_MAX_S + 3, f"stored {stored_s:.1f} s after the restart"  # one claim pause at most
    assert not app.poller.gate.failing


def _revisions(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT COUNT(*) FROM revision")).scalar_one())
    except sa.exc.OperationalError:
        return -1
    finally:
        engine.dispose()
