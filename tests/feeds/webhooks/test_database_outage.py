"""PostgreSQL stopped under a running dispatcher and started again: one line when the outage starts, one
when it ends, a growing pause between rounds meanwhile (no traceback a tick), the storage state told, and
deliveries caught up after."""

from __future__ import annotations

import threading

import pytest
from structlog.testing import capture_logs

from feeds.webhooks.dispatcher import DeliveryOptions, Dispatcher
from storage.db import create_db_engine, migrate
from storage.front import Storage
from tests.support import postgres_server
from tests.support.waiting import wait_until
from tests.support.webhooks import LINKS, Receiver, emit, subscribe


@pytest.fixture
def server():
    if not postgres_server.available():
        pytest.skip(f"needs PostgreSQL's server binaries in {postgres_server.PG_BIN} (CI installs them)")
    with postgres_server.throwaway_postgres() as server:
        yield server


def _emit_when_back(store: Storage, repo_id: str) -> bool:
    """Write an event once the server answers again (the pool's dead connections fail the first tries)."""
    try:
        emit(store, repo_id=repo_id)
    except Exception:  # noqa: BLE001 - the server is still coming back: try again
        return False
    return True


def test_a_database_outage_is_two_lines_and_a_pause_not_a_traceback_a_tick(server) -> None:
    """Stopped for three pauses and started again: `webhook_dispatch_paused` once, `webhook_dispatch_resumed`
    once, no round or heartbeat traceback, the storage state told of both, the next event delivered."""
    engine = create_db_engine(server.url)
    migrate(engine)
    store = Storage(engine)
    receiver = Receiver().start()
    failed: list[str] = []
    back: list[int] = []
    options = DeliveryOptions(allow_private_targets=True, poll_interval_s=0.2, lease_s=1.5)
    dispatcher = Dispatcher(store.outbox, options, links=LINKS, on_database_failed=failed.append,
                            on_database_back=lambda: back.append(1))
    stop = threading.Event()
    try:
        subscribe(store.subscriptions, receiver.url)
        with capture_logs() as logs:
            thread = threading.Thread(target=dispatcher.run_forever, args=(stop,), daemon=True)
            thread.start()
            emit(store, repo_id="org/before")
            assert wait_until(lambda: len(receiver.accepted) == 1, timeout_s=20)
            server.stop()
            assert wait_until(lambda: dispatcher.outage.count.failures >= 3, timeout_s=30)  # three pauses, each longer
            server.start()
            assert wait_until(lambda: _emit_when_back(store, "org/after"), timeout_s=30)
            assert wait_until(lambda: len(receiver.accepted) == 2, timeout_s=30)
            assert wait_until(lambda: back == [1], timeout_s=10)
            stop.set()
            thread.join(30)
        events = [e["event"] for e in logs]
        assert events.count("webhook_dispatch_paused") == 1 and events.count("webhook_dispatch_resumed") == 1, events
        assert "dispatcher_round_failed" not in events and "webhook_heartbeat_failed" not in events, events
        assert len(failed) == 1 and failed[0]
    finally:
        stop.set()
        receiver.stop()
        engine.dispose()
