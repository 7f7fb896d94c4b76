"""Several workers on one database: the scheduler that leases due watches instead of timing them itself.

With `[poll] coordination = "shared"` (the default on PostgreSQL) any number of `hubwatch run` processes
share one database's watches. The due times live in the database (`watch.next_poll_at`); each worker
claims due watches whose lease is free (`SELECT ... FOR UPDATE SKIP LOCKED`: never the same watch as
another worker), renews its leases while it polls and gives each back with its next due time. A killed
worker's leases expire after `[poll] lease` and the watches, still due, are claimed by the others; a
worker that loses its database stops claiming, and its leases expire the same way.

A Hub webhook's poll is claimed at once by the worker it reached; a listing pass's moves are made due in
the database, for whichever worker is free. The periodic jobs (the listing pass, the OSV re-check) run on
one worker at a time, once an interval among all (`job_lease`). Outbound deliveries are shared through
the outbox's own claims (storage/outbox.py), the Hub request budget through its window rows, and the
ingest is idempotent, so a watch polled twice in a race (a lease taken over from a worker that was only
slow) stores each revision and event once.

Why not a job engine such as procrastinate: a watch is not a job but a standing row with its poll
state, which the due time and the lease join; the outbox already claims its own rows; and SQLite (one
process, APScheduler timing each watch: tracker/polling/scheduler.py) stays the default, which a
PostgreSQL-only engine would not serve.
"""

from __future__ import annotations

import os
import random
import socket
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent import futures
from datetime import datetime, timedelta
from typing import Any

import structlog

from storage.health import Outage, write_failure
from storage.leases import LeasedWatch, LeaseStore
from storage.watches import ScheduledWatch
from tracker.polling.scheduler import (
    PAUSED_RETRY_S,
    POLL_THREADS,
    TRIGGERED_THREADS,
    PollFn,
    Schedulable,
    Scheduler,
    first_run_at,
    overdue_grace_s,
)

log = structlog.get_logger(__name__)

CLAIM_TICK_S = 1.0  # how often a worker with free threads looks for due watches (and at once when woken)
EXPIRY_MARGIN_S = 0.02  # a claim for an expired lease waits this past its end (the lease must be past, not at, its end)
DB_RETRY_S = 1.0  # after a failed claim, the first wait before the next (doubling to DB_RETRY_MAX_S)
# A claim against a database that is down costs a refused connection, and the outage is logged once whatever
# the pause: the cap bounds how late a worker notices the database is back (30 s made a 20 s outage 24 s late).
DB_RETRY_MAX_S = 5.0


def worker_id() -> str:
    """This process among the workers: host, pid and a random part (a pid is reused across restarts)."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class SharedScheduler(Scheduler):
    """The scheduler of one worker among several: the watch list and its plan as in `Scheduler`, the
    polls from leases. `poll_state` reads the database's due times, so every worker reports the same."""

    def __init__(
        self,
        list_watches: Callable[[], Sequence[Schedulable] | None],
        poll: PollFn,
        jitter_s: int,
        leases: LeaseStore,
        lease_s: float,
        worker: str | None = None,
        claim_tick_s: float = CLAIM_TICK_S,
        on_database_back: Callable[[], object] = lambda: None,
        **kwargs: Any,
    ) -> None:
        super().__init__(list_watches, poll, jitter_s, **kwargs)
        # told when this worker finds the database taking writes again after an outage (the storage gate:
        # polls it paused may go on now, not at its next probe)
        self._on_database_back = on_database_back
        self.worker = worker or worker_id()
        self._leases = leases
        self._lease_s = lease_s
        self._claim_tick_s = claim_tick_s
        self._pool = futures.ThreadPoolExecutor(POLL_THREADS, thread_name_prefix="poll-leased")
        self._urgent = futures.ThreadPoolExecutor(TRIGGERED_THREADS, thread_name_prefix="poll-triggered")
        self._held: dict[int, LeasedWatch] = {}  # watch id -> lease, polls in flight
        self._claimed = 0  # of them, those from the claim loop (it keeps POLL_THREADS busy at most)
        self._jobs_held: set[str] = set()
        self._periodic: dict[str, tuple[Callable[[], None], datetime]] = {}  # job id -> its turn, first due at
        self._held_lock = threading.Lock()
        self._wake = threading.Event()
        self._halt = threading.Event()
        self._threads: list[threading.Thread] = []
        self.lost_leases = 0
        self._last_overdue: tuple[int, float] = (0, 0.0)
        self._outage = Outage(DB_RETRY_S, DB_RETRY_MAX_S)  # a database this worker cannot use: two lines, a pause
        self._retry_in_s = DB_RETRY_S

    # -- the watch list ---------------------------------------------------------------------------

    def _schedule(self, wanted: dict[str, Schedulable], intervals: dict[str, int]) -> None:
        """Keep each watch's planned interval (used on release), give new watches their first due time,
        and bring forward due times the plan now puts nearer (the listing was turned off, the budget
        unstretched)."""
        previous = dict(self._intervals)
        self._intervals = dict(intervals)
        now = self._clock()
        shrunk = [job_id for job_id, s in intervals.items() if s < previous.get(job_id, s + 1)]  # all, at the first
        try:
            new = self._leases.unscheduled()
            if new:
                self._leases.schedule(
                    (wid, first_run_at(f"{r}@{b}", ScheduledWatch(r, b, i, last), now, intervals.get(f"{r}@{b}", i)))
                    for wid, r, b, i, last in new)
            if shrunk:
                self._leases.pull_in(
                    (wanted[job_id].repo_id, wanted[job_id].branch, now + timedelta(seconds=intervals[job_id])) for job_id in shrunk)
        except Exception as err:  # noqa: BLE001 - a failing database: the next sync tries again
            self._database_failed("schedule_failed", err)
            self._intervals = previous
            return
        self._wake.set()

    # -- claiming and polling ---------------------------------------------------------------------

    def start(self) -> None:
        super().start()
        for target, name in ((self._claim_loop, "poll-claims"), (self._renew_loop, "lease-renewal")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        log.info("worker_started", worker=self.worker, lease_s=self._lease_s)

    def tick(self) -> int:
        """One round of what the daemon's threads do, then return (arq's burst mode): pick up the watch list,
        take each periodic job's turn that has come (among all workers), claim the watches due at the clock's
        now, poll them and give each back with its next due time. The number of watches polled."""
        self.sync()
        now = self._clock()
        for turn, first_at in list(self._periodic.values()):
            if first_at <= now:
                turn()
        polls = self._claim_round()
        futures.wait(polls or [])
        return len(polls or [])

    def _claim_loop(self) -> None:
        """Claim due watches while threads are free; wait a tick (or a wake-up) in between. After a failed
        claim the pause grows, and ends early when another of this worker's database calls goes through."""
        while not self._halt.is_set():
            self._wake.clear()  # before claiming: a wake-up during the claim is kept for the wait below
            if self._claim_round() is None:
                self._wake.wait(self._retry_in_s)
                continue
            # fewer than free: nothing else is due; as many: the next finished poll wakes this loop
            self._wake.wait(self._until_next_claim_s())

    def _until_next_claim_s(self) -> float:
        """A tick, or less when a lease on a due watch runs out sooner: a killed worker's watches are taken
        over when its leases expire, not up to a tick after. Live workers renew theirs two thirds of a lease
        ahead, so the wait is shortened only for a lease that was not renewed."""
        try:
            now = self._clock()
            expiry = self._leases.next_expiry(now)
        except Exception:  # noqa: BLE001 - the tick, as before; the next claim says what is wrong with the database
            return self._claim_tick_s
        if expiry is None:
            return self._claim_tick_s
        return min(self._claim_tick_s, max(0.0, (expiry - now).total_seconds()) + EXPIRY_MARGIN_S)

    def _claim_round(self) -> list[futures.Future] | None:
        """Claim due watches for the free poll threads and start their polls; None when the claim failed."""
        with self._held_lock:
            free = POLL_THREADS - self._claimed
        if free <= 0:
            return []
        try:
            claimed = self._leases.claim_due(self.worker, self._clock(), self._lease_s, free)
        except Exception as err:  # noqa: BLE001 - a failing database: claim nothing, try again later
            self._retry_in_s = self._database_failed("lease_claim_failed", err)
            return None
        self._database_back()
        return [poll for leased in claimed if (poll := self._submit(self._pool, leased, counted=True)) is not None]

    def _submit(self, pool: futures.ThreadPoolExecutor, leased: LeasedWatch, counted: bool) -> futures.Future | None:
        with self._held_lock:
            self._held[leased.id] = leased
            self._claimed += counted
        try:
            return pool.submit(self._poll_leased, leased, counted)
        except RuntimeError:  # stopping: give it back untouched (still due)
            self._forget(leased, counted)
            try:
                self._leases.release(self.worker, leased, leased.claimed_at)
            except Exception as err:  # noqa: BLE001 - it expires on its own
                self._database_failed("lease_release_failed", err, repo_id=leased.repo_id)
            return None

    def _poll_leased(self, leased: LeasedWatch, counted: bool) -> None:
        """Poll a leased watch and give it back due one interval on; or, when the database could not take
        the poll, due again PAUSED_RETRY_S from now (a listing's or a webhook's request is not used up)."""
        job_id = f"{leased.repo_id}@{leased.branch}"
        polled: bool | None = None
        try:
            polled = self._run(job_id, leased.repo_id, leased.branch)
        except Exception:
            log.exception("leased_poll_crashed", repo_id=leased.repo_id, branch=leased.branch)
        finally:
            self._forget(leased, counted)
            interval_s = self._intervals.get(job_id, leased.interval_s)
            if polled is False:
                next_at = self._clock() + timedelta(seconds=PAUSED_RETRY_S)
            else:
                next_at = leased.claimed_at + timedelta(seconds=interval_s + random.uniform(0, self._jitter_s))
            try:
                if not self._leases.release(self.worker, leased, next_at):
                    self._lost(leased)
            except Exception as err:  # noqa: BLE001 - the lease expires on its own; another worker takes over
                self._database_failed("lease_release_failed", err, repo_id=leased.repo_id)
            self._pending.forget(job_id)  # a poll asked for meanwhile is the watch's due time now (kept on release)
            self._wake.set()

    def _forget(self, leased: LeasedWatch, counted: bool) -> None:
        with self._held_lock:
            self._held.pop(leased.id, None)
            self._claimed -= counted

    def _lost(self, leased: LeasedWatch) -> None:
        self.lost_leases += 1
        log.warning("lease_lost", worker=self.worker, repo_id=leased.repo_id, branch=leased.branch)

    def _renew_loop(self) -> None:
        """Every third of a lease, extend the leases of the polls in flight and of the periodic job
        running; a database that cannot be reached lets them expire (the others take over)."""
        while not self._halt.wait(self._lease_s / 3):
            with self._held_lock:
                held = dict(self._held)
                jobs = set(self._jobs_held)
            now = self._clock()
            try:
                kept = self._leases.renew(self.worker, held, now, self._lease_s)
                for name in jobs:
                    self._leases.renew_job(name, self.worker, now, self._lease_s)
            except Exception as err:  # noqa: BLE001 - see above
                self._database_failed("lease_renewal_failed", err)
                continue
            for watch_id in set(held) - kept:
                if watch_id in self._held:  # not released meanwhile
                    self._lost(held[watch_id])

    def trigger(self, repo_id: str, branch: str, urgent: bool = True, head_sha: str | None = None) -> bool:
        """Poll a watch soon. `urgent` (a Hub webhook): claimed and polled here at once, on threads of its
        own; else, or when another worker holds it now, it is made due in the database (the holder keeps it
        due when it releases it). False when no such watch exists. A failing database: an urgent trigger
        returns False (the next scheduled poll will do); a listing's raises, so its pass keeps its mark.

        Urgent triggers are coalesced: while this worker has a poll of the watch claimed and not started,
        or its poll in flight and one more asked for, another trigger is dropped (True), without a query."""
        now = self._clock()
        if urgent:
            job_id = f"{repo_id}@{branch}"
            if not self._pending.ask(job_id, head_sha):  # the head is used when this worker polls it
                return True
            try:
                with self._held_lock:
                    mine = any(h.repo_id == repo_id and h.branch == branch for h in self._held.values())
                leased = None if mine else self._leases.claim_one(self.worker, repo_id, branch, now, self._lease_s)
                if leased is not None:
                    if self._submit(self._urgent, leased, counted=False) is None:
                        self._pending.forget(job_id)
                        return False
                    return True
                found = self._leases.request_poll(repo_id, branch, now)
            except Exception as err:  # noqa: BLE001 - see above
                self._pending.forget(job_id)
                self._database_failed("trigger_failed", err, repo_id=repo_id, branch=branch)
                return False
            if not mine:  # another worker holds it (or there is no such watch): the request is in the database
                self._pending.forget(job_id)
        else:
            found = self._leases.request_poll(repo_id, branch, now)
        self._wake.set()
        return found

    # -- periodic jobs ----------------------------------------------------------------------------

    def add_periodic(
        self, job_id: str, fn: Callable[[], object], interval_s: int, first_at: datetime | None = None
    ) -> None:
        """As `Scheduler.add_periodic`, but the job runs on one worker at a time, once an interval among
        all of them: each worker's timer tries to take the job's lease (and so does each `tick`)."""

        def turn() -> None:
            self._run_once(job_id, fn, interval_s)

        self._periodic[job_id] = (turn, first_at or self._clock() + timedelta(seconds=interval_s))
        super().add_periodic(job_id, turn, interval_s, first_at)

    def _run_once(self, name: str, fn: Callable[[], object], interval_s: int) -> None:
        now = self._clock()
        try:
            turn = self._leases.start_job(name, self.worker, now, interval_s, self._lease_s)
        except Exception as err:  # noqa: BLE001 - a failing database: the next tick tries again
            self._database_failed("job_lease_failed", err, job=name)
            return
        self._database_back()  # the database answered (its turn or not): a claim loop paused by an outage goes on
        if not turn:
            return
        with self._held_lock:
            self._jobs_held.add(name)
        try:
            fn()
        finally:
            with self._held_lock:
                self._jobs_held.discard(name)
            try:
                self._leases.finish_job(name, self.worker, now)
            except Exception as err:  # noqa: BLE001 - its lease expires; the interval counts from the last success
                self._database_failed("job_lease_failed", err, job=name)

    def _database_failed(self, event: str, err: Exception, **fields: object) -> float:
        """A database call failed. A database that cannot be used is one `polling_database_unavailable` line
        when the outage starts (then quiet until `polling_database_back`); anything else is logged as
        `event` each time. Returns how long the claim loop pauses (doubling while the outage lasts)."""
        reason = write_failure(err)
        if reason is None:
            log.warning(event, worker=self.worker, error=f"{type(err).__name__}: {err}", **fields)
            return DB_RETRY_S
        first, pause_s = self._outage.failed()
        if first:
            log.warning("polling_database_unavailable", worker=self.worker, during=event, error=reason, retry_in_s=pause_s)
        return pause_s

    def _database_back(self) -> None:
        """A database call went through (a claim or a job's turn: writes): the outage, if there was one, is
        over (one `polling_database_back` line, `on_database_back`), and the paused claim loop claims at once."""
        down_s = self._outage.ended()
        if down_s is not None:
            log.info("polling_database_back", worker=self.worker, down_s=round(down_s, 1))
            self._on_database_back()
            self._wake.set()

    # -- state and stopping -----------------------------------------------------------------------

    def poll_state(self, now: datetime | None = None) -> dict[str, Any]:
        """As `Scheduler.poll_state`, from the database's due times (the same on every worker), with this
        worker's id and its polls in flight; while the database cannot be read, the last figures read."""
        now = now or self._clock()
        try:
            overdue, oldest = 0, 0.0
            for row in self._leases.overdue(now - timedelta(seconds=5)):
                late_s = (now - row.next_poll_at).total_seconds() - overdue_grace_s(row.interval_s)
                if late_s > 0:
                    overdue += 1
                    oldest = max(oldest, late_s)
            self._last_overdue = (overdue, round(oldest, 1))
        except Exception as err:  # noqa: BLE001 - /healthz keeps answering; the storage state says why
            self._database_failed("overdue_check_failed", err)
        with self._held_lock:
            in_flight = len(self._held)
        return {"polls_scheduled": len(self._intervals), "polls_overdue": self._last_overdue[0],
                "oldest_overdue_s": self._last_overdue[1], "worker": self.worker, "polls_in_flight": in_flight}

    def stop(self) -> None:
        """Stop claiming, let the polls in flight finish, give back every lease still held."""
        self._halt.set()
        self._wake.set()
        super().stop()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._urgent.shutdown(wait=True, cancel_futures=True)
        for thread in self._threads:
            thread.join(timeout=5)
        try:
            self._leases.release_all(self.worker)
        except Exception as err:  # noqa: BLE001 - they expire on their own
            self._database_failed("lease_release_failed", err)
