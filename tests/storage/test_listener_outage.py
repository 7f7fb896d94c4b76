"""The PostgreSQL LISTEN connection that wakes dispatchers (storage/wakeups.py `listen_for_deliveries`) across
a server stopped and started again: lost once, back once, however many reopenings fail in between (issue 21: a
worker logged `webhook_listener_lost` every 5 s of an outage)."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from storage.db import create_db_engine
from storage.wakeups import listen_for_deliveries
from tests.support import postgres_server
from tests.support.waiting import wait_until


@pytest.fixture
def server():
    if not postgres_server.available():
        pytest.skip(f"needs PostgreSQL's server binaries in {postgres_server.PG_BIN} (CI installs them)")
    with postgres_server.throwaway_postgres() as server:
        yield server


def test_a_lost_listener_is_told_once_and_back_once(server) -> None:
    """Ten failed reopenings while the server is down call `on_lost` once; the reopening after the restart calls
    `on_back` once and wakes the dispatcher (a notification may have been missed)."""
    engine = create_db_engine(server.url)
    attempts: list[int] = []
    sa.event.listen(engine, "do_connect", lambda *args: attempts.append(1))
    wakes: list[int] = []
    lost: list[str] = []
    back: list[int] = []
    stop = threading.Event()
    listener = threading.Thread(target=listen_for_deliveries, daemon=True,
                                args=(engine, lambda: wakes.append(1), stop, lost.append, 0.05, lambda: back.append(1)))
    listener.start()
    try:
        assert wait_until(lambda: wakes)  # listening
        server.stop()
        at_stop = len(attempts)
        assert wait_until(lambda: len(attempts) >= at_stop + 10), "the listener did not try to reopen"
        woken = len(wakes)
        server.start()
        assert wait_until(lambda: back and len(wakes) > woken)
    finally:
        stop.set()
        listener.join(10)
        engine.dispose()
    assert len(lost) == 1 and "Error" in lost[0], lost
    assert back == [1]
