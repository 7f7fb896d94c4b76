"""The daemon's clock: APScheduler 3.x polls each watch at its interval, with jitter, until stopped."""

from __future__ import annotations

import hashlib
import signal
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import structlog
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from storage.models import Watch

log = structlog.get_logger(__name__)

PollFn = Callable[[str, str], None]


class Scheduler:
    """One interval job per watch; the job list is refreshed from the store every `refresh_s`.
    `list_watches` answers None when it cannot tell (the database is failing): the jobs stay as they are."""

    def __init__(
        self,
        list_watches: Callable[[], list[Watch] | None],
        poll: PollFn,
        jitter_s: int,
        refresh_s: int = 60,
    ) -> None:
        self._list_watches = list_watches
        self._poll = poll
        self._jitter_s = jitter_s
        self._refresh_s = refresh_s
        # A run that starts late still runs (once): with APScheduler's default grace of 1 s, the burst of
        # watches due after a start was dropped silently, and so was the daily OSV re-check.
        self._scheduler = BackgroundScheduler(
            timezone=UTC, job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None}
        )
        self._intervals: dict[str, int] = {}
        self.stopped = threading.Event()

    @property
    def intervals(self) -> dict[str, int]:
        """The scheduled watches ("repo@branch") and their intervals in seconds."""
        return dict(self._intervals)

    def start(self) -> None:
        self.sync()
        self._scheduler.add_job(self.sync, IntervalTrigger(seconds=self._refresh_s), id="__sync__")
        self._scheduler.start()
        log.info("scheduler_started", watches=len(self._intervals))

    def sync(self) -> None:
        """Add jobs for new watches, drop removed ones, reschedule changed intervals."""
        watches = self._list_watches()
        if watches is None:
            return
        wanted = {f"{w.repo_id}@{w.branch}": w for w in watches}
        for job_id in set(self._intervals) - set(wanted):
            self._scheduler.remove_job(job_id)
            del self._intervals[job_id]
        for job_id, watch in wanted.items():
            if self._intervals.get(job_id) == watch.interval_s:
                continue
            if job_id in self._intervals:
                self._scheduler.remove_job(job_id)
            self._scheduler.add_job(
                self._poll,
                IntervalTrigger(seconds=watch.interval_s, jitter=self._jitter_s or None),
                args=[watch.repo_id, watch.branch],
                id=job_id,
                next_run_time=first_run_at(job_id, watch, datetime.now(UTC)),
            )
            self._intervals[job_id] = watch.interval_s

    def add_periodic(
        self, job_id: str, fn: Callable[[], object], interval_s: int, first_at: datetime | None = None
    ) -> None:
        """A job that is not a watch (the daily OSV re-check), every `interval_s`, first at `first_at`."""
        timing = {} if first_at is None else {"next_run_time": first_at}  # None would pause the job
        self._scheduler.add_job(fn, IntervalTrigger(seconds=interval_s), id=job_id, replace_existing=True, **timing)

    def trigger(self, repo_id: str, branch: str) -> bool:
        """Poll a watch at once (a Hub webhook said it moved). A watch added since the last sync (through
        the API) is picked up first. False when no such watch exists."""
        job_id = f"{repo_id}@{branch}"
        if self._scheduler.get_job(job_id) is None:
            self.sync()
        job = self._scheduler.get_job(job_id)
        if job is None:
            return False
        job.modify(next_run_time=datetime.now(UTC))
        return True

    def stop(self) -> None:
        if self._scheduler.running:
            self._scheduler.shutdown(wait=True)
        self.stopped.set()
        log.info("scheduler_stopped")

    def run_until_signalled(self) -> None:
        """Block until SIGINT or SIGTERM, then stop cleanly (jobs in flight finish first)."""
        done = threading.Event()

        def _stop(signum: int, _frame: object) -> None:
            log.info("signal_received", signal=signal.Signals(signum).name)
            done.set()

        previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.start()
            done.wait()
        finally:
            self.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def first_run_at(job_id: str, watch: Watch, now: datetime) -> datetime:
    """When a newly scheduled watch is first polled: at once if it never was (its baseline); at its
    natural due time (last poll + interval) if that is still ahead; and when it is overdue (after a
    restart, every watch is), at a stable point within one interval from now, so that thousands of
    overdue watches are spread over the interval instead of all asking the Hub in the same second."""
    if watch.last_polled_at is None:
        return now
    due = watch.last_polled_at + timedelta(seconds=watch.interval_s)
    if due > now:
        return due
    fraction = int.from_bytes(hashlib.sha256(job_id.encode()).digest()[:8], "big") / 2**64
    return now + timedelta(seconds=fraction * watch.interval_s)
