"""Waiting on a condition with a deadline, never for a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(predicate: Callable[[], object], timeout_s: float = 15, step_s: float = 0.01) -> bool:
    """True as soon as `predicate()` is true; False if it is still false at the deadline (checked once more
    then). The step only paces the checks: the wait ends when the condition holds, not after a set time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step_s)
    return bool(predicate())
