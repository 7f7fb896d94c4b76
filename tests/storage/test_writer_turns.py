"""SQLite writers in one process take turns: a writer waits on the turn, not in SQLite's stepped busy wait."""

from __future__ import annotations

import threading
from pathlib import Path

import sqlalchemy as sa

from storage.db import create_db_engine
from tests.support.waiting import wait_until


def _engine(tmp_path: Path) -> sa.Engine:
    engine = create_db_engine(f"sqlite:///{tmp_path / 'turns.db'}")
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE t (x INTEGER)"))
        conn.execute(sa.text("INSERT INTO t VALUES (0)"))
    return engine


def test_a_writer_reaches_sqlite_only_once_the_writer_before_it_is_done(tmp_path: Path) -> None:
    """While one transaction holds the turn, a second writer waits before its statement reaches SQLite, and
    goes on as soon as the first goes back to the pool (its commit): no stepped busy wait, nothing lost."""
    engine = _engine(tmp_path)
    seen: list[str] = []
    asked = threading.Event()

    @sa.event.listens_for(engine, "before_execute")
    def _asked(conn: sa.Connection, *_args: object) -> None:
        if threading.current_thread().name == "second":
            asked.set()

    @sa.event.listens_for(engine, "before_cursor_execute")  # after the turn is taken: listeners run in order
    def _reached(conn: sa.Connection, _cursor: object, statement: str, *_args: object) -> None:
        if statement.startswith("UPDATE"):
            seen.append(f"{threading.current_thread().name} reached sqlite")

    def second() -> None:
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE t SET x = x + 10"))

    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE t SET x = x + 1"))
        thread = threading.Thread(target=second, name="second")
        thread.start()
        assert wait_until(asked.is_set, timeout_s=30)
        seen.append("first committing")
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert seen == ["MainThread reached sqlite", "first committing", "second reached sqlite"]
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT x FROM t")).scalar_one() == 11
    engine.dispose()


def test_a_thread_holding_the_turn_writes_on_another_connection_without_waiting_for_itself(tmp_path: Path) -> None:
    """A thread whose connection holds the turn can still write through a second connection once the first
    committed (it is not made to wait for its own turn)."""
    engine = _engine(tmp_path)
    with engine.connect() as first:
        first.execute(sa.text("UPDATE t SET x = 1"))
        first.commit()  # committed, but still checked out: it keeps the turn until it goes back to the pool
        with engine.begin() as second:
            second.execute(sa.text("UPDATE t SET x = x + 1"))
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT x FROM t")).scalar_one() == 2
    engine.dispose()
