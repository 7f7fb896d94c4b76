"""The daemon's clock: APScheduler 3.x polls each watch at its interval, with jitter, until stopped."""

from __future__ import annotations

import hashlib
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent import futures
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from storage.leases import LeaseStore
from storage.models import Watch
from storage.watches import ScheduledWatch
from tracker.polling.coalesce import PendingPolls

log = structlog.get_logger(__name__)

# A watch's poll: False when the database could not take it (the watch stays due, a request for it is kept);
# anything else (True, None) when it was polled or needs no poll now. Called (repo_id, branch), and with
# `head_sha=` too when Hub webhooks named the branch's new head (the poll verifies it: tracker/pipeline/ingest.py).
PollFn = Callable[..., bool | None]
# A watch as the scheduler needs it: repo_id, branch, interval_s, last_polled_at (a Watch row does too).
Schedulable = Watch | ScheduledWatch

POLL_THREADS = 10  # scheduled polls at once (APScheduler's default pool)
TRIGGERED_THREADS = 4  # polls a Hub webhook asked for, at once
FULL_SYNC_EVERY = 60  # every this many syncs the list is read whatever its version says (a safety net)
PAUSED_RETRY_S = 5.0  # a poll asked for that the database could not take is tried again this much later


class Scheduler:
    """One interval job per watch. Every `refresh_s` the store's watch-list version (one cheap query) is
    compared with the last one seen; only when it moved is the list read (four columns a watch) and jobs
    added, dropped or rescheduled one by one. `list_watches` and `version` answer None when they cannot
    tell (the database is failing): the jobs stay as they are. Without `version` the list is read each time.

    What cannot be done in time is visible: a watch whose poll has not started within its interval plus
    jitter (and a little grace) of the previous one is overdue (`poll_state`, and a log line each check)."""

    def __init__(
        self,
        list_watches: Callable[[], Sequence[Schedulable] | None],
        poll: PollFn,
        jitter_s: int,
        refresh_s: int = 60,
        version: Callable[[], object | None] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        plan: Callable[[Sequence[Schedulable]], dict[str, int]] | None = None,
        requests: LeaseStore | None = None,
    ) -> None:
        self._list_watches = list_watches
        # The interval of each job ("repo@branch") when not the watch's own: the listing's reconcile, or
        # every interval stretched to fit the request budget (tracker/polling/listing.py).
        self._plan = plan
        self._version = version
        # Where a poll asked for (a listing's move, a Hub webhook) is written before it runs, so that one a
        # kill cuts short runs after the restart (storage/leases.py request_poll / clear_request).
        self._requests = requests
        self._marked: set[str] = set()  # job ids with such a request outstanding
        self._poll = poll
        self._jitter_s = jitter_s
        self._refresh_s = refresh_s
        self._clock = clock
        # A run that starts late still runs (once): with APScheduler's default grace of 1 s, the burst of
        # watches due after a start was dropped silently, and so was the daily OSV re-check.
        self._scheduler = BackgroundScheduler(
            timezone=UTC, job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
            executors={"default": ThreadPoolExecutor(POLL_THREADS)},
        )
        # Polls a Hub webhook asked for run on their own threads: they never queue behind scheduled ones.
        self._triggered = futures.ThreadPoolExecutor(TRIGGERED_THREADS, thread_name_prefix="poll-triggered")
        self._polling: dict[str, threading.Lock] = {}
        self._polling_lock = threading.Lock()  # one poll of a watch at a time, scheduled or triggered
        self._pending = PendingPolls()  # and one asked for behind it, however many triggers came
        self._intervals: dict[str, int] = {}
        self._due: dict[str, datetime] = {}  # job id -> when its next poll should start (at the latest, plus jitter)
        self._lock = threading.Lock()  # sync runs from the refresh job and from Hub webhooks
        self._seen_version: object | None = None
        self._syncs = 0
        self._overdue = 0
        self.stopped = threading.Event()

    @property
    def intervals(self) -> dict[str, int]:
        """The scheduled watches ("repo@branch") and their intervals in seconds."""
        return dict(self._intervals)

    def start(self) -> None:
        self.sync()
        self._scheduler.add_job(self._refresh, IntervalTrigger(seconds=self._refresh_s), id="__sync__")
        self._scheduler.start()
        log.info("scheduler_started", watches=len(self._intervals))

    def sync(self, force: bool = False) -> bool:
        """Add jobs for new watches, drop removed ones, reschedule changed intervals; when the watch-list
        version has not moved since the last sync (and not `force`), nothing is read. True when the list was read."""
        with self._lock:
            self._syncs += 1
            version = None
            if self._version is not None:
                version = self._version()
                if version is None:
                    return False
                if version == self._seen_version and not force and self._syncs % FULL_SYNC_EVERY:
                    return False
            watches = self._list_watches()
            if watches is None:
                return False
            self._apply(watches)
            self._seen_version = version
            return True

    def _apply(self, watches: Sequence[Schedulable]) -> None:
        wanted = {f"{w.repo_id}@{w.branch}": w for w in watches}
        planned = self._plan(watches) if self._plan is not None else {}
        self._schedule(wanted, {job_id: planned.get(job_id, w.interval_s) for job_id, w in wanted.items()})

    def _schedule(self, wanted: dict[str, Schedulable], intervals: dict[str, int]) -> None:
        """One interval job per watch ("repo@branch"): removed watches' jobs go, new or re-planned ones
        are (re)added."""
        for job_id in set(self._intervals) - set(wanted):
            self._scheduler.remove_job(job_id)
            del self._intervals[job_id]
            self._due.pop(job_id, None)
        now = self._clock()
        for job_id, watch in wanted.items():
            interval_s = intervals[job_id]
            if self._intervals.get(job_id) == interval_s:
                continue
            if job_id in self._intervals:
                self._scheduler.remove_job(job_id)
            first = first_run_at(job_id, watch, now, interval_s)
            if first == now and getattr(watch, "next_poll_at", None) is not None:
                self._marked.add(job_id)  # asked for before a restart: polled now, then cleared
            self._scheduler.add_job(
                self._run,
                IntervalTrigger(seconds=interval_s, jitter=self._jitter_s or None),
                args=[job_id, watch.repo_id, watch.branch],
                id=job_id,
                next_run_time=first,
            )
            self._intervals[job_id] = interval_s
            self._due[job_id] = first

    def _run(self, job_id: str, repo_id: str, branch: str, asked: bool = False, moves_job: bool = False) -> bool | None:
        """One scheduled (or triggered) poll, after any poll of the same watch in flight: the next is due
        one interval from its start. A poll that starts covers every trigger before it: a triggered one
        (`asked`) whose trigger another poll started since has covered does not run (None). `moves_job`: the
        watch's own job is moved to one interval after this start (a listing's trigger stands for it).
        Returns what the poll returned: False when the database could not take it; then a poll that was
        asked for keeps its request and is tried again PAUSED_RETRY_S later."""
        with self._polling_lock:
            polling = self._polling.setdefault(job_id, threading.Lock())
        with polling:
            waited, head_sha = self._pending.begin(job_id)
            if not waited and asked:
                return None
            started = self._clock()
            if moves_job:
                self._move_job(job_id, started)
            # the requests written before this start are this poll's to clear (a trigger during it marks again)
            marked = job_id in self._marked
            self._marked.discard(job_id)
            self._due[job_id] = started + timedelta(seconds=self._intervals.get(job_id, 0))
            polled = self._poll(repo_id, branch) if head_sha is None else self._poll(repo_id, branch, head_sha=head_sha)
            if polled is False:
                if marked:  # asked for: not used up by a poll that could not be stored
                    self._marked.add(job_id)
                    self._retry_later(job_id, repo_id, branch, started)
                return False
            if marked and self._requests is not None:
                try:
                    self._requests.clear_request(repo_id, branch, started)
                except Exception as err:  # noqa: BLE001 - the request stays: polled once more after a restart
                    log.warning("poll_request_not_cleared", repo_id=repo_id, branch=branch, error=f"{type(err).__name__}: {err}")
            return polled

    def _retry_later(self, job_id: str, repo_id: str, branch: str, started: datetime) -> None:
        """A poll asked for that the database could not take runs again PAUSED_RETRY_S after `started`
        (coalesced with any other asked for meanwhile)."""
        if self.stopped.is_set() or not self._pending.ask(job_id):
            return
        self._scheduler.add_job(self._run, args=[job_id, repo_id, branch, True],
                                next_run_time=started + timedelta(seconds=PAUSED_RETRY_S))

    def _move_job(self, job_id: str, started: datetime) -> None:
        """The watch's job next runs one interval after `started` (it may have been removed meanwhile)."""
        try:
            self._scheduler.modify_job(job_id, next_run_time=started + timedelta(seconds=self._intervals.get(job_id, 0)))
        except JobLookupError:
            pass

    def _refresh(self) -> None:
        """The periodic job: pick up watch changes, and say so when polls fall behind."""
        self.sync()
        self.check_overdue()

    def poll_state(self, now: datetime | None = None) -> dict[str, Any]:
        """`polls_scheduled`, `polls_overdue` (watches whose poll has not started within interval + jitter +
        grace of the last one) and `oldest_overdue_s` (how far past that the most overdue one is)."""
        now = now or self._clock()
        oldest = 0.0
        overdue = 0
        for job_id, due in list(self._due.items()):
            late_s = (now - due).total_seconds() - self._jitter_s - overdue_grace_s(self._intervals.get(job_id, 0))
            if late_s > 0:
                overdue += 1
                oldest = max(oldest, late_s)
        return {"polls_scheduled": len(self._due), "polls_overdue": overdue, "oldest_overdue_s": round(oldest, 1)}

    def check_overdue(self, now: datetime | None = None) -> dict[str, Any]:
        """`poll_state`, with a warning line while polls are overdue and one line when they caught up."""
        state = self.poll_state(now)
        if state["polls_overdue"]:
            log.warning("polls_overdue", overdue=state["polls_overdue"], oldest_overdue_s=state["oldest_overdue_s"],
                        scheduled=state["polls_scheduled"])
        elif self._overdue:
            log.info("polls_caught_up", scheduled=state["polls_scheduled"])
        self._overdue = state["polls_overdue"]
        return state

    def add_periodic(
        self, job_id: str, fn: Callable[[], object], interval_s: int, first_at: datetime | None = None
    ) -> None:
        """A job that is not a watch (the daily OSV re-check), every `interval_s`, first at `first_at`."""
        timing = {} if first_at is None else {"next_run_time": first_at}  # None would pause the job
        self._scheduler.add_job(fn, IntervalTrigger(seconds=interval_s), id=job_id, replace_existing=True, **timing)

    def trigger(self, repo_id: str, branch: str, urgent: bool = True, head_sha: str | None = None) -> bool:
        """Poll a watch at once (a Hub webhook, or the listing, said it moved). `head_sha`: the branch's new
        head as a Hub webhook named it, handed to the poll (PendingPolls keeps it). A watch added since the
        last sync (through the API) is picked up first (a version check; the list is read only if it
        moved). `urgent` polls run on their own threads, never queued behind scheduled ones (a Hub
        webhook); others share the scheduled polls' threads (a listing pass that found many moved repos).
        Triggers are coalesced: one for a watch whose poll is already waiting to start is dropped (True
        all the same), so a burst costs the poll in flight and one more at most; one that comes while the
        watch is being polled (by its own job too) runs once that poll ends.
        False when no such watch exists."""
        job_id = f"{repo_id}@{branch}"
        if self._scheduler.get_job(job_id) is None:
            self.sync()
        if self._scheduler.get_job(job_id) is None:
            return False
        if not self._pending.ask(job_id, head_sha):
            return True  # the poll waiting reads the head after this trigger: it sees the commit too
        if self._requests is not None:
            try:
                self._requests.request_poll(repo_id, branch, self._clock())
                self._marked.add(job_id)
            except Exception as err:  # noqa: BLE001 - polled all the same; only a kill before it would lose it
                log.warning("poll_request_not_recorded", repo_id=repo_id, branch=branch, error=f"{type(err).__name__}: {err}")
        if urgent:
            try:
                self._triggered.submit(self._run_triggered, job_id, repo_id, branch)
            except RuntimeError:  # stopping: no new polls
                self._pending.forget(job_id)
                return False
        else:
            # A one-off job, not the watch's own moved forward: APScheduler skips a run of a job still
            # running (max_instances), which left a listing's move unpolled until the next interval.
            if self.stopped.is_set():  # stopped: no new polls (a stopped scheduler keeps jobs it never runs)
                self._pending.forget(job_id)
                return False
            self._scheduler.add_job(self._run, args=[job_id, repo_id, branch, True, True], next_run_time=self._clock())
        return True

    def _run_triggered(self, job_id: str, repo_id: str, branch: str) -> None:
        try:
            self._run(job_id, repo_id, branch, asked=True)
        except Exception:
            log.exception("triggered_poll_crashed", repo_id=repo_id, branch=branch)

    def stop(self) -> None:
        if self._scheduler.running:
            self._scheduler.shutdown(wait=True)
        self._triggered.shutdown(wait=True, cancel_futures=True)
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


def overdue_grace_s(interval_s: int) -> float:
    """How late past interval + jitter a poll may start before it counts as overdue: a tenth of the
    interval, at least 5 s and at most a minute (a thread pool's ordinary queueing is not a fault)."""
    return min(60.0, max(5.0, interval_s / 10))


def first_run_at(job_id: str, watch: Schedulable, now: datetime, interval_s: int | None = None) -> datetime:
    """When a newly scheduled watch is first polled: at once if it never was (its baseline) or a poll of
    it was asked for and has not run (a listing's move or a Hub webhook before a restart); at its
    natural due time (last poll + interval) if that is still ahead; and when it is overdue (after a
    restart, every watch is), at a stable point within one interval from now, so that thousands of
    overdue watches are spread over the interval instead of all asking the Hub in the same second.
    `interval_s`: the planned interval when not the watch's own (listing reconcile, request budget)."""
    interval_s = watch.interval_s if interval_s is None else interval_s
    asked = getattr(watch, "next_poll_at", None)  # a poll asked for and not yet run (storage/leases.py)
    if watch.last_polled_at is None or asked is not None and asked <= now:
        return now
    due = watch.last_polled_at + timedelta(seconds=interval_s)
    if due > now:
        return due
    fraction = int.from_bytes(hashlib.sha256(job_id.encode()).digest()[:8], "big") / 2**64
    return now + timedelta(seconds=fraction * interval_s)
