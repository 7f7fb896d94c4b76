"""A helper of bench_workers.py --event-lock, not a benchmark.

Benchmark only (benchmarks/bench_workers.py --event-lock): with HUBWATCH_BENCH_EVENT_LOCK=off, every process
started with this folder on PYTHONPATH runs without storage/event_log.py's advisory lock (order_event_writes
becomes a no-op in every module that imported it), so the lock's price can be measured. Never used by hubwatch."""

from __future__ import annotations

import os

if os.environ.get("HUBWATCH_BENCH_EVENT_LOCK") == "off":
    import storage.advisories
    import storage.event_log
    import storage.history

    def _no_lock(session: object) -> None:
        """The lock left out."""

    for _module in (storage.event_log, storage.history, storage.advisories):
        _module.order_event_writes = _no_lock  # type: ignore[attr-defined]
