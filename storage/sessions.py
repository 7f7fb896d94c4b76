"""What every store stands on: an engine, an injectable clock, and sessions that hand back detached rows."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlmodel import Session

Clock = Callable[[], datetime]


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
