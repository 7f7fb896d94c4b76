"""Deliveries start when their event commits: a wake-up from the writing thread (any database) and a
PostgreSQL NOTIFY from another writer, not the dispatcher's tick (set to 30 s here, far above what is asserted)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from feeds.webhooks.dispatcher import DeliveryOptions, Dispatcher
from storage.db import create_db_engine, migrate
from storage.front import Storage
from storage.outbox import OutboxStore
from storage.wakeups import on_deliveries_queued
from tests.support.clock import FakeClock
from tests.support.webhooks import LINKS, Receiver, Reply, emit, subscribe

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

TICK_S = 30.0  # the safety tick: a delivery that waited for it would take this long
WITHIN_S = 2.0


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver().start()
    yield receiver
    receiver.stop()


@pytest.fixture
def store(database_url: str) -> Iterator[Storage]:
    engine = create_db_engine(database_url)
    migrate(engine)
    yield Storage(engine, clock=FakeClock())
    engine.dispose()


def _running(outbox: OutboxStore) -> Callable[[], None]:
    """A dispatcher's `run_forever` in a thread with the 30 s tick, once its first (empty) round is over;
    returns the function that stops it."""
    dispatcher = Dispatcher(outbox, DeliveryOptions(allow_private_targets=True, poll_interval_s=TICK_S, timeout_s=5.0),
                            links=LINKS, resolve=lambda host, port: [])
    stop = threading.Event()
    idle = threading.Event()
    original = dispatcher._idle

    def idle_then_wait(stop_event: threading.Event) -> None:
        idle.set()
        original(stop_event)

    dispatcher._idle = idle_then_wait  # type: ignore[method-assign]
    thread = threading.Thread(target=dispatcher.run_forever, args=(stop,), daemon=True)
    thread.start()
    assert idle.wait(10), "the dispatcher's first round did not end"

    def stop_it() -> None:
        stop.set()
        thread.join(10)
        assert not thread.is_alive()

    return stop_it


def _delivered_within(receiver: Receiver, n: int, commit: Callable[[], object]) -> float:
    """Seconds from the start of `commit()` until the receiver has taken in `n` deliveries."""
    started = time.monotonic()
    commit()
    receiver.wait_for_accepted(n, timeout_s=TICK_S / 2)
    return time.monotonic() - started


def test_a_committed_event_is_delivered_at_once_not_on_the_tick(store: Storage, receiver: Receiver) -> None:
    """Each event written in this process reaches the receiver well within the 30 s tick: the commit wakes the dispatcher."""
    subscribe(store.subscriptions, receiver.url)
    stop = _running(OutboxStore(store.engine))
    try:
        waits = [_delivered_within(receiver, i + 1, lambda: emit(store, repo_id=f"org/m{len(receiver.accepted)}"))
                 for i in range(3)]
    finally:
        stop()
    assert max(waits) < WITHIN_S, waits


def test_a_retry_the_dispatcher_scheduled_is_tried_when_due_not_on_the_tick(store: Storage, receiver: Receiver) -> None:
    """A 503 with Retry-After: 1 is tried again about a second later, not at the next 30 s tick."""
    subscribe(store.subscriptions, receiver.url)
    receiver.plan.append(Reply(503, headers={"retry-after": "1"}))
    stop = _running(OutboxStore(store.engine))
    try:
        waited = _delivered_within(receiver, 1, lambda: emit(store))
    finally:
        stop()
    assert [r.status for r in receiver.requests] == [503, 204]
    assert waited < 1 + WITHIN_S, waited


def test_a_rolled_back_write_wakes_nobody(store: Storage) -> None:
    """Only a commit that queued deliveries wakes: a rolled-back one, or one that queued none, does not."""
    subscribe(store.subscriptions, "http://127.0.0.1:9/hook")
    woken: list[int] = []
    remove = on_deliveries_queued(store.engine, lambda: woken.append(1))
    try:
        from storage.event_log import NewEvent, write_events

        with store.history.session() as s:
            write_events(s, "org/m", [NewEvent("ev-rolled-back", "revision.ingested", "t", "warning")], store.clock())
            s.rollback()
        with store.history.session() as s:  # the flag of the rolled-back transaction does not leak into this commit
            s.commit()
        assert woken == []
        emit(store)
        assert woken == [1]
    finally:
        remove()
    emit(store, repo_id="org/other")
    assert woken == [1]  # removed: no more calls


def test_postgres_notify_wakes_a_dispatcher_in_another_process(database_url: str, receiver: Receiver) -> None:
    """On PostgreSQL a writer with its own engine (as another process would be) wakes the dispatcher through
    LISTEN/NOTIFY: delivery well within the 30 s tick."""
    if not database_url.startswith("postgresql"):
        pytest.skip("needs PostgreSQL: set HUBWATCH_TEST_POSTGRES")
    dispatcher_engine = create_db_engine(database_url)
    migrate(dispatcher_engine)
    writer = Storage(create_db_engine(database_url), clock=FakeClock())
    try:
        subscribe(writer.subscriptions, receiver.url)
        stop = _running(OutboxStore(dispatcher_engine))
        try:
            waits = [_delivered_within(receiver, i + 1, lambda: emit(writer, repo_id=f"org/p{len(receiver.accepted)}"))
                     for i in range(3)]
        finally:
            stop()
    finally:
        writer.engine.dispose()
        dispatcher_engine.dispose()
    assert max(waits) < WITHIN_S, waits
