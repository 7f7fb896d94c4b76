"""How long to wait before trying again: exponential back-off, and a server's `Retry-After`.

Pure arithmetic on numbers and header text: no I/O, no SQL, no HTTP library. It sits in storage only
because storage is the one package every other may import (DESIGN.md's import direction: tracker and
feeds both import storage, and nothing else in common), as kinds.py does for the shared vocabulary.

- `backoff_s`: the Hub client's per-watch retries (tracker.pipeline.ingest), the storage gate's probes and the
  OSV client's retries wait the first delay doubled per failure in a row, up to a cap.
- `retry_after_s`: the Hub client, the OSV client and webhook deliveries read `Retry-After` the same
  way, in both of its forms (RFC 9110 section 10.2.3): delta-seconds (`120`) or an HTTP date.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

MAX_DOUBLINGS = 16  # 2**16 times the first wait is past every cap in use; it also keeps the product finite


def backoff_s(first_s: float, failures: int, max_s: float) -> float:
    """`first_s` doubled once per earlier failure in a row (`failures` counts from 0), at most `max_s`."""
    return min(max_s, first_s * 2 ** min(max(failures, 0), MAX_DOUBLINGS))


def retry_after_s(value: str | None, now: datetime | None = None) -> float | None:
    """A `Retry-After` value as seconds to wait from `now` (default: the wall clock, UTC): delta-seconds
    (`120`, fractions accepted, a negative one is 0) or an HTTP date (`Wed, 21 Oct 2015 07:28:00 GMT`, a
    past one is 0). None when absent or unreadable (not a finite number, not a date)."""
    text = (value or "").strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # `-0000`: a date in UTC without a claimed zone
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
