"""When a failed delivery is tried again, and when it is given up: the Standard Webhooks schedule,
bounded by time.

A failure without `Retry-After` waits the schedule's next delay and uses up that step; the delivery
is dead when a failure finds the schedule used up. A receiver's `Retry-After` (429, 5xx) is honoured
instead (at least 1 s, at most `retry_after_max_s`) and uses up no step: the receiver said when to come
back, and that is not a failed try of the schedule. Attempts are bounded by time instead: a
delivery whose next try would fall after the schedule's total time since its first attempt is dead.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

# Seconds between tries (Standard Webhooks): 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h.
DEFAULT_DELAYS_S: tuple[float, ...] = (5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400)


@dataclass(frozen=True)
class NextTry:
    """When to try again, and how many of the schedule's steps are used up then."""

    at: datetime
    step: int


@dataclass(frozen=True)
class RetrySchedule:
    delays_s: tuple[float, ...] = DEFAULT_DELAYS_S
    retry_after_max_s: float = 3600.0

    @property
    def window_s(self) -> float:
        """The schedule's total time: how long after its first attempt a delivery may still be retried."""
        return float(sum(self.delays_s))

    def next_try(
        self, step: int, first_attempt_at: datetime, failed_at: datetime, retry_after_s: float | None
    ) -> NextTry | None:
        """After an attempt at `failed_at` failed with `step` steps used: the next try, or None (dead)."""
        if retry_after_s is not None:
            at = failed_at + timedelta(seconds=min(max(retry_after_s, 1.0), self.retry_after_max_s))
            deadline = first_attempt_at + timedelta(seconds=self.window_s)
            return NextTry(at, step) if at <= deadline else None
        if step >= len(self.delays_s):
            return None
        return NextTry(failed_at + timedelta(seconds=self.delays_s[step]), step + 1)
