"""Polling pauses while the database cannot be written: no Hub request is spent on work that cannot be
stored. A cheap write probe, retried with back-off, reopens the gate; a poll that writes closes the
failure streak. The state is what `/healthz` reports.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import structlog

from storage.backoff import backoff_s
from storage.health import write_failure
from storage.sessions import Clock

log = structlog.get_logger(__name__)

# A write this recent vouches for the database: no probe before the next poll.
FRESH_S = 60.0


class StorageGate:
    """Whether polling may spend Hub requests now, judged by the last write and a probe."""

    def __init__(self, probe: Callable[[], None], clock: Clock, retry_min_s: float, retry_max_s: float) -> None:
        self._probe = probe
        self._clock = clock
        self._retry_min_s = retry_min_s
        self._retry_max_s = retry_max_s
        self._lock = threading.Lock()
        self._verified_at: datetime | None = None  # the last write known to have gone through
        self._failing_since: datetime | None = None
        self._error: str | None = None
        self._streak = 0  # storage failures since the last poll that wrote
        self._next_probe_at: datetime | None = None

    def allows_polling(self) -> bool:
        """True when the database is known writable, or a probe (when one is due) finds it so."""
        now = self._clock()
        with self._lock:
            if self._failing_since is None and self._verified_at is not None:
                if (now - self._verified_at).total_seconds() < FRESH_S:
                    return True
            if self._next_probe_at is not None and now < self._next_probe_at:
                return False
        try:
            self._probe()
        except Exception as err:  # noqa: BLE001 - any probe failure keeps polling paused; its reason is reported
            self.failed(write_failure(err) or f"{type(err).__name__}: {err}")
            return False
        self._recovered()
        return True

    def failed(self, error: str) -> None:
        """A write failed: pause polling until the next probe, later after each failure in a row."""
        now = self._clock()
        with self._lock:
            first = self._failing_since is None
            if first:
                self._failing_since = now
            self._error = error
            wait_s = backoff_s(self._retry_min_s, self._streak, self._retry_max_s)
            self._streak += 1
            self._next_probe_at = now + timedelta(seconds=wait_s)
            next_probe_at = self._next_probe_at
        if first:
            log.warning("storage_failed", error=error, next_probe_at=next_probe_at.isoformat())
        else:
            log.info("storage_probe_failed", error=error, next_probe_at=next_probe_at.isoformat())

    @property
    def failing(self) -> bool:
        """Whether the database is failing now (polling paused until a probe or a poll's write succeeds)."""
        with self._lock:
            return self._failing_since is not None

    def succeeded(self) -> None:
        """A poll wrote what it found: the database takes writes, the failure streak ends."""
        with self._lock:
            self._streak = 0
        self._recovered()

    def state(self) -> dict[str, Any]:
        """`storage`: ok | failing, `since` and `error` while failing, `polling_paused`, `next_probe_at`."""
        now = self._clock()
        with self._lock:
            failing = self._failing_since is not None
            paused = self._next_probe_at is not None and now < self._next_probe_at
            return {
                "storage": "failing" if failing else "ok",
                "since": self._failing_since.isoformat() if self._failing_since else None,
                "error": self._error if failing else None,
                "polling_paused": paused,
                "next_probe_at": self._next_probe_at.isoformat() if paused and self._next_probe_at else None,
            }

    def _recovered(self) -> None:
        """A write went through (a probe's or a poll's): polling may go on."""
        now = self._clock()
        with self._lock:
            since = self._failing_since
            self._failing_since = None
            self._error = None
            self._next_probe_at = None
            self._verified_at = now
        if since is not None:
            log.info("storage_recovered", failing_s=int((now - since).total_seconds()))
