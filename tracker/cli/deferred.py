"""A call made a moment after it is asked for, on a thread of its own, once for all the asks meanwhile.

`hubwatch run` warms the feeds through it after a poll stored revisions. Run on the poll's thread at once,
the warm-up (tens of ms of rendering) competed for the interpreter and the database with the dispatcher
sending that revision's webhooks at the same moment; a moment later, the deliveries have gone and the
feed entries are still rendered before most readers ask.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

log = structlog.get_logger(__name__)


class DeferredCall:
    """`fn()` runs `delay_s` after an ask, on this object's thread; the asks made before it runs are covered
    by that one run, one made while it runs asks for another. `wait(seconds)` paces the delay and answers
    True when stopping (by default, a wait on the stop event). An exception of `fn` is logged, never raised."""

    def __init__(self, fn: Callable[[], object], delay_s: float, name: str,
                 wait: Callable[[float], bool] | None = None) -> None:
        self._fn, self._delay_s, self._name = fn, delay_s, name
        self._asked = threading.Event()
        self._stopping = threading.Event()
        self._wait = wait or self._stopping.wait
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> DeferredCall:
        self._thread.start()
        return self

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def ask(self) -> None:
        """Quick and thread-safe: the caller never waits for `fn`."""
        self._asked.set()

    def stop(self, timeout_s: float = 30.0) -> None:
        """No further run; a run in progress is waited for (up to `timeout_s`)."""
        self._stopping.set()
        self._asked.set()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout_s)

    def _loop(self) -> None:
        while True:
            self._asked.wait()
            if self._stopping.is_set() or self._wait(self._delay_s) or self._stopping.is_set():
                return
            self._asked.clear()  # from here on an ask is a new one: it runs fn again after this run
            try:
                self._fn()
            except Exception:  # a failed warm-up is logged (with its traceback); the next ask tries again
                log.exception("deferred_call_failed", name=self._name)
