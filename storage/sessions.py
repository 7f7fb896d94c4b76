"""What every store stands on: an engine, an injectable clock, and sessions that hand back detached rows."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session

Clock = Callable[[], datetime]


def insert_new(session: Session, table: sa.Table, rows: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any]) -> None:
    """INSERT `rows` in the session's transaction, skipping those whose primary key is stored already,
    also by a writer that has not committed yet (ON CONFLICT DO NOTHING waits for it, then skips). Rows go
    in `key` order, so two writers adding the same keys lock them in the same order and never deadlock.
    For content-addressed rows (blobs, weight manifests) that workers ingesting different repos share."""
    if not rows:
        return
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    session.execute(insert(table).on_conflict_do_nothing(), sorted(rows, key=key))


def utc_now() -> datetime:
    return datetime.now(UTC)


class EngineStore:
    """A store over one engine and one clock. Rows read in `session()` stay usable after it closes."""

    def __init__(self, engine: sa.Engine, clock: Clock = utc_now) -> None:
        self.engine = engine
        self.clock = clock

    @contextmanager
    def session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session:
            yield session
