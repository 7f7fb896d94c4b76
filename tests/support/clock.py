"""Time that moves only when a test says so."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


class FakeClock:
    """A clock to inject where production code takes `clock=`: `now` stays put until `advance`."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now
