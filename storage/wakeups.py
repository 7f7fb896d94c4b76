"""After-commit wake-ups: the dispatchers start deliveries when their event commits, not on their tick.

A transaction that queued deliveries is marked (`signal_on_commit`); when it commits, this process's
dispatchers are called (`on_deliveries_queued`), and on PostgreSQL a NOTIFY sent in the transaction wakes
the dispatchers of other processes (`listen_for_deliveries`). The commit listeners are process-wide
(every Session), registered once when this module is imported.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

import sqlalchemy as sa
from sqlmodel import Session

# PostgreSQL's channel for "deliveries were queued": NOTIFY in the writing transaction, LISTEN in dispatchers.
NOTIFY_CHANNEL = "hubwatch_outbox"
LISTEN_STOP_CHECK_S = 0.1  # how often the listener looks at its stop event between notifications (a stop waits at most this)

_wakers: weakref.WeakKeyDictionary[sa.Engine, list[Callable[[], None]]] = weakref.WeakKeyDictionary()
_wakers_lock = threading.Lock()
_WAKE_KEY = "hubwatch_outbox_wake"


def on_deliveries_queued(engine: sa.Engine, wake: Callable[[], None]) -> Callable[[], None]:
    """Call `wake()` (from the writing thread, so it must be quick and thread-safe) after every commit on
    `engine` that queued deliveries; returns the function that stops it. Writers in other processes are
    heard through `listen_for_deliveries` (PostgreSQL)."""
    with _wakers_lock:
        _wakers.setdefault(engine, []).append(wake)

    def remove() -> None:
        with _wakers_lock:
            callbacks = _wakers.get(engine, [])
            if wake in callbacks:
                callbacks.remove(wake)

    return remove


def signal_on_commit(session: Session) -> None:
    """Mark the session's transaction as one that queued deliveries: this process's dispatchers are woken
    when it commits, and on PostgreSQL a NOTIFY (sent at commit, dropped on rollback) wakes the others."""
    if session.info.get(_WAKE_KEY):
        return
    session.info[_WAKE_KEY] = True
    if session.get_bind().dialect.name == "postgresql":
        session.connection().execute(sa.select(sa.func.pg_notify(NOTIFY_CHANNEL, "")))


def listen_for_deliveries(engine: sa.Engine, wake: Callable[[], None], stop: threading.Event,
                          on_lost: Callable[[str], None] = lambda error: None, reconnect_s: float = 5.0,
                          on_back: Callable[[], None] = lambda: None) -> None:
    """Until `stop` is set: on PostgreSQL, LISTEN on its own connection (outside the pool) and call
    `wake()` for every NOTIFY of queued deliveries, from any process. Returns at once on other
    databases (they have no NOTIFY: the dispatcher's slow tick covers other processes' writes). A lost
    connection is opened again every `reconnect_s`, with a `wake()` once open (a notification may have
    been missed meanwhile); `on_lost(reason)` is told once when it is lost, not again for each reopening
    that fails while the database is down, and `on_back()` once it is open again."""
    if engine.dialect.name != "postgresql":
        return
    lost = False
    while not stop.is_set():
        raw = None
        try:
            raw = engine.raw_connection()
            conn = raw.driver_connection
            conn.autocommit = True  # type: ignore[union-attr]
            conn.execute(f"LISTEN {NOTIFY_CHANNEL}")  # type: ignore[union-attr]
            if lost:
                lost = False
                on_back()
            wake()
            while not stop.is_set():
                for _ in conn.notifies(timeout=LISTEN_STOP_CHECK_S, stop_after=1):  # type: ignore[union-attr]
                    wake()
        except Exception as err:  # noqa: BLE001 - a lost listener is reopened; deliveries still go on the tick
            if not lost:
                lost = True
                on_lost(f"{type(err).__name__}: {err}"[:300])
            stop.wait(reconnect_s)
        finally:
            if raw is not None:
                raw.invalidate()  # never back into the pool: it is LISTENing


@sa.event.listens_for(sa.orm.Session, "after_commit")
def _wake_after_commit(session: Session) -> None:
    if not session.info.pop(_WAKE_KEY, False):
        return
    with _wakers_lock:
        callbacks = list(_wakers.get(session.get_bind(), []))  # type: ignore[call-overload]
    for wake in callbacks:
        wake()


@sa.event.listens_for(sa.orm.Session, "after_rollback")
def _forget_after_rollback(session: Session) -> None:
    session.info.pop(_WAKE_KEY, None)
