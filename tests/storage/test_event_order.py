"""Events commit in the order of their seqs (storage/event_log.py `order_event_writes`): on PostgreSQL a
second writer waits for the first to commit, so a dispatcher never sees seq 11 before seq 10 exists."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from storage.db import create_db_engine, migrate
from storage.event_log import NewEvent, order_event_writes, write_events
from storage.front import Storage
from tests.support.clock import FakeClock
from tests.support.waiting import wait_until

pytestmark = pytest.mark.postgres  # runs on PostgreSQL in .ci/run's second pass


def _event(name: str) -> NewEvent:
    return NewEvent(f"ev-{name}", "revision.ingested", f"{name}: changed", "notice")


def test_a_second_event_writer_waits_for_the_first_to_commit(database_url: str) -> None:
    """Writer A has inserted its event (seq drawn) but not committed; writer B, on its own engine as another
    worker would be, waits for A's commit before inserting: the seqs commit in their order."""
    if not database_url.startswith("postgresql"):
        pytest.skip("needs PostgreSQL: set HUBWATCH_TEST_POSTGRES (SQLite has one writer at a time)")
    first, second = (create_db_engine(database_url) for _ in range(2))
    migrate(first)
    store_a, store_b = Storage(first, clock=FakeClock()), Storage(second, clock=FakeClock())
    inserted, commit = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def writer_a() -> None:
        try:
            with store_a.history.session() as s:
                order_event_writes(s)
                write_events(s, "org/a", [_event("a")], store_a.clock())
                s.flush()
                inserted.set()
                commit.wait(30)
                s.commit()
        except BaseException as err:  # noqa: BLE001 - handed to the test thread
            failures.append(err)
            inserted.set()

    a = threading.Thread(target=writer_a)
    a.start()
    try:
        assert inserted.wait(30) and not failures
        b = threading.Thread(target=lambda: store_b.history.add_event("org/b", _event("b")))
        b.start()
        with first.connect() as conn:
            waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            assert wait_until(lambda: conn.execute(sa.text(waiting)).scalar_one() == 1, timeout_s=15)
        assert b.is_alive()  # still waiting for A's turn to end
    finally:
        commit.set()
        a.join(30)
    b.join(30)
    assert not failures
    events = store_a.history.list_events(limit=10)
    assert [e.repo_id for e in sorted(events, key=lambda e: e.seq)] == ["org/a", "org/b"]
    first.dispose()
    second.dispose()


def test_order_event_writes_is_free_on_sqlite(tmp_path) -> None:
    """On SQLite (one writer at a time already) taking the turn runs no statement and never blocks."""
    engine = create_db_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    migrate(engine)
    statements: list[str] = []
    sa.event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    store = Storage(engine, clock=FakeClock())
    with store.history.session() as s:
        order_event_writes(s)
    assert not any("advisory" in sql for sql in statements)
    engine.dispose()
