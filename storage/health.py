"""Whether the database can be written: a cheap write probe, and which errors mean it cannot.

The tracker pauses polling while writes fail (no Hub requests spent on work that cannot be stored) and
asks `probe_write` when to resume; `write_failure` tells a failing database (disk full, read-only,
locked past the busy timeout, server gone) from a bug, without the tracker knowing SQL's exceptions.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable

import sqlalchemy as sa

from storage.backoff import backoff_s
from storage.errors import StorageError

# What the operating system says when a disk cannot take more (or any) writes.
_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO})


def probe_write(engine: sa.Engine) -> None:
    """One write transaction that changes nothing: the schema version row rewritten in place. Raises what
    a failed write raises (a read-only or locked database, one that cannot be reached, no room left for
    the journal)."""
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = version_num"))


def write_failure(err: BaseException) -> str | None:
    """Why the database cannot be written, when `err` says so; None for any other error (a bug)."""
    if isinstance(err, sa.exc.OperationalError):
        return _first_line(err.orig if err.orig is not None else err)
    if isinstance(err, StorageError):
        return _first_line(err)
    if isinstance(err, OSError) and err.errno in _DISK_ERRNOS:
        return _first_line(err)
    return None


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:300]


class Outage:
    """A database one loop cannot use, counted so the loop logs one line when an outage starts and one when
    it ends (the logging is the caller's): `failed()` says whether this failure starts one and how long to
    pause before trying again (doubling from `first_s` to `max_s`); `ended()` how long it lasted, if any."""

    def __init__(self, first_s: float, max_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.first_s, self.max_s, self._clock = first_s, max_s, clock
        self._lock = threading.Lock()
        self._since: float | None = None
        self._failures = 0

    def failed(self) -> tuple[bool, float]:
        """(this failure starts an outage, the pause before the next try)."""
        with self._lock:
            first = self._since is None
            if first:
                self._since = self._clock()
            pause_s = backoff_s(self.first_s, self._failures, self.max_s)
            self._failures += 1
            return first, pause_s

    def ended(self) -> float | None:
        """A try went through: the seconds the outage lasted, or None when there was none."""
        with self._lock:
            since, self._since, self._failures = self._since, None, 0
        return None if since is None else self._clock() - since

    @property
    def failures(self) -> int:
        """Failures in a row so far (0 when there is no outage)."""
        with self._lock:
            return self._failures

