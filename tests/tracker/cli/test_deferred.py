"""The deferred call `hubwatch run` warms its feeds with: never on the asking thread, once for the asks
made before it runs, again for one made while it runs, nothing after stop."""

from __future__ import annotations

import threading

from structlog.testing import capture_logs

from tests.support.waiting import wait_until
from tracker.cli.deferred import DeferredCall


class HeldDelay:
    """The delay as the test lets it pass: each wait blocks until `release()`; answers True once stopping."""

    def __init__(self) -> None:
        self.waiting = threading.Event()
        self._go = threading.Semaphore(0)
        self.stopping = False
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> bool:
        self.delays.append(seconds)
        self.waiting.set()
        self._go.acquire()
        self.waiting.clear()
        return self.stopping

    def release(self) -> None:
        self._go.release()


def test_asks_before_the_run_are_one_call_on_another_thread_after_the_delay() -> None:
    """Three asks while the delay runs: one call, made on the deferred thread, after a wait of `delay_s`."""
    delay, threads = HeldDelay(), []
    deferred = DeferredCall(lambda: threads.append(threading.current_thread()), 1.5, "warm", wait=delay).start()
    try:
        for _ in range(3):
            deferred.ask()
        assert wait_until(delay.waiting.is_set)
        assert threads == []  # nothing ran on the asking thread, nor before the delay passed
        delay.release()
        assert wait_until(lambda: len(threads) == 1)
        assert threads[0] is not threading.current_thread() and delay.delays == [1.5]
        deferred.ask()  # a new ask after the run: a second call
        assert wait_until(delay.waiting.is_set)
        delay.release()
        assert wait_until(lambda: len(threads) == 2)
    finally:
        delay.stopping = True
        delay.release()
        deferred.stop()


def test_an_ask_while_it_runs_makes_one_more_run() -> None:
    """An ask that comes while `fn` runs is not lost in that run: `fn` runs once more afterwards."""
    running, finish, calls = threading.Event(), threading.Event(), []

    def fn() -> None:
        calls.append(1)
        running.set()
        finish.wait(15)

    deferred = DeferredCall(fn, 0.0, "warm").start()
    try:
        deferred.ask()
        assert running.wait(15)
        deferred.ask()
        finish.set()
        assert wait_until(lambda: len(calls) == 2)
    finally:
        finish.set()
        deferred.stop()


def test_a_failing_call_is_logged_and_the_next_ask_runs_again() -> None:
    """`fn` raising is one log line; the thread lives on for the next ask."""
    calls: list[int] = []

    def fn() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("no feeds yet")

    deferred = DeferredCall(fn, 0.0, "warm").start()
    try:
        with capture_logs() as logs:
            deferred.ask()
            assert wait_until(lambda: any(e["event"] == "deferred_call_failed" for e in logs))
        deferred.ask()
        assert wait_until(lambda: len(calls) == 2)
    finally:
        deferred.stop()


def test_stop_during_the_delay_runs_nothing() -> None:
    """Stopped while an ask waits out its delay: `fn` never runs and the thread ends."""
    calls: list[int] = []
    deferred = DeferredCall(lambda: calls.append(1), 3600.0, "warm").start()
    deferred.ask()
    deferred.stop(timeout_s=15)
    assert calls == [] and not deferred.is_alive()
