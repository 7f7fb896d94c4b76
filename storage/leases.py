"""Leases: how several workers on one database share the watches and the periodic jobs.

Each watch carries when it is next due (`next_poll_at`) and, while a worker polls it, that worker's
lease (`leased_by`, `lease_until`). A worker claims due watches whose lease is free or expired
(PostgreSQL: `SELECT ... FOR UPDATE SKIP LOCKED`, so workers claiming at once take disjoint rows
without waiting on each other), renews its leases while it polls, and on release sets the next due
time. A killed worker's leases expire and the watches, still due, are claimed by the others. Every
write is guarded by the holder, so a worker whose lease was taken over changes nothing.

A periodic job (`job_lease`) is run by the worker that takes its lease when its interval has passed
since the last run by anyone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from storage.models import JobLease, Watch
from storage.sessions import EngineStore

WATCH = Watch.__table__  # type: ignore[attr-defined]
JOB = JobLease.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class LeasedWatch:
    """A watch a worker holds: what to poll, and when it was claimed (a poll asked for after that, by a
    Hub webhook or the listing, is kept due on release)."""

    id: int
    repo_id: str
    branch: str
    interval_s: int
    claimed_at: datetime


@dataclass(frozen=True)
class DueWatch:
    """A watch whose next poll is past (for the overdue count)."""

    next_poll_at: datetime
    interval_s: int


class LeaseStore(EngineStore):
    """Watch leases and periodic-job leases, by worker id."""

    # -- watches ----------------------------------------------------------------------------------

    def unscheduled(self) -> list[tuple[int, str, str, int, datetime | None]]:
        """Watches with no due time yet (new, or from before shared polling): id, repo, branch, interval,
        last poll."""
        query = sa.select(WATCH.c.id, WATCH.c.repo_id, WATCH.c.branch, WATCH.c.interval_s, WATCH.c.last_polled_at).where(
            WATCH.c.next_poll_at.is_(None))
        with self.engine.connect() as conn:
            return [tuple(row) for row in conn.execute(query)]  # type: ignore[misc]

    def schedule(self, due: Iterable[tuple[int, datetime]]) -> int:
        """Give watches that have none their first due time; a watch another worker scheduled meanwhile
        keeps its own. Returns how many were set."""
        rows = [{"watch_id": watch_id, "due": at} for watch_id, at in due]
        if not rows:
            return 0
        query = sa.update(WATCH).where(WATCH.c.id == sa.bindparam("watch_id"), WATCH.c.next_poll_at.is_(None)).values(
            next_poll_at=sa.bindparam("due"))
        with self.engine.begin() as conn:
            return conn.execute(query, rows).rowcount

    def pull_in(self, latest: Iterable[tuple[str, str, datetime]]) -> int:
        """Bring due times forward to at most the given (repo_id, branch, latest): read in one query, and
        only the watches due later are written. Returns how many."""
        wanted = {(repo_id, branch): at for repo_id, branch, at in latest}
        if not wanted:
            return 0
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(WATCH.c.id, WATCH.c.repo_id, WATCH.c.branch, WATCH.c.next_poll_at).where(
                WATCH.c.next_poll_at.is_not(None)))
            later = [{"watch_id": wid, "due": wanted[(r, b)]} for wid, r, b, due in rows
                     if (r, b) in wanted and due > wanted[(r, b)]]
        if not later:
            return 0
        query = sa.update(WATCH).where(WATCH.c.id == sa.bindparam("watch_id"), WATCH.c.next_poll_at > sa.bindparam("due")).values(
            next_poll_at=sa.bindparam("due"))
        with self.engine.begin() as conn:
            return conn.execute(query, later).rowcount

    def claim_due(self, worker: str, now: datetime, lease_s: float, limit: int) -> list[LeasedWatch]:
        """Claim up to `limit` watches that are due and not leased by a live worker, oldest due first."""
        if limit <= 0:
            return []
        free = sa.or_(WATCH.c.lease_until.is_(None), WATCH.c.lease_until < now)
        pick = (
            sa.select(WATCH.c.id, WATCH.c.repo_id, WATCH.c.branch, WATCH.c.interval_s)
            .where(WATCH.c.next_poll_at <= now, free)
            .order_by(WATCH.c.next_poll_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        until = now + timedelta(seconds=lease_s)
        with self.engine.begin() as conn:
            rows = list(conn.execute(pick))
            claimed = []
            for watch_id, repo_id, branch, interval_s in rows:
                # guarded again: on SQLite (no row locks) another process may have claimed it since the read, or
                # claimed, polled and given it back (free again, but no longer due)
                taken = conn.execute(sa.update(WATCH).where(WATCH.c.id == watch_id, WATCH.c.next_poll_at <= now, free).values(
                    leased_by=worker, lease_until=until))
                if taken.rowcount:
                    claimed.append(LeasedWatch(watch_id, repo_id, branch, interval_s, now))
            return claimed

    def next_expiry(self, now: datetime) -> datetime | None:
        """When the first lease on a due watch runs out (a killed worker's, or a live one's not renewed in
        time): the moment that watch may be claimed. None when no due watch is leased."""
        query = sa.select(sa.func.min(WATCH.c.lease_until)).where(WATCH.c.next_poll_at <= now, WATCH.c.lease_until >= now)
        with self.engine.connect() as conn:
            return conn.execute(query).scalar_one_or_none()  # the column's type: a UTC datetime on either database

    def claim_one(self, worker: str, repo_id: str, branch: str, now: datetime, lease_s: float) -> LeasedWatch | None:
        """Claim one watch now, due or not (a Hub webhook said it moved); None when it does not exist or
        another live worker holds it (`request_poll` then keeps it due for when that worker is done)."""
        free = sa.or_(WATCH.c.lease_until.is_(None), WATCH.c.lease_until < now, WATCH.c.leased_by == worker)
        with self.engine.begin() as conn:
            row = conn.execute(
                sa.select(WATCH.c.id, WATCH.c.interval_s)
                .where(WATCH.c.repo_id == repo_id, WATCH.c.branch == branch, free)
                .with_for_update(skip_locked=True)
            ).first()
            if row is None:
                return None
            taken = conn.execute(sa.update(WATCH).where(WATCH.c.id == row.id, free).values(
                leased_by=worker, lease_until=now + timedelta(seconds=lease_s)))
            return LeasedWatch(row.id, repo_id, branch, row.interval_s, now) if taken.rowcount else None

    def request_poll(self, repo_id: str, branch: str, now: datetime) -> bool:
        """Make a watch due now (whoever holds it keeps it due when it releases). False when no such watch."""
        query = sa.update(WATCH).where(WATCH.c.repo_id == repo_id, WATCH.c.branch == branch).values(next_poll_at=now)
        with self.engine.begin() as conn:
            return bool(conn.execute(query).rowcount)

    def clear_request(self, repo_id: str, branch: str, polled_from: datetime) -> None:
        """A poll that started at `polled_from` ran: a request made before it is done (one made since stays)."""
        query = sa.update(WATCH).where(WATCH.c.repo_id == repo_id, WATCH.c.branch == branch,
                                       WATCH.c.next_poll_at <= polled_from).values(next_poll_at=None)
        with self.engine.begin() as conn:
            conn.execute(query)

    def renew(self, worker: str, watch_ids: Iterable[int], now: datetime, lease_s: float) -> set[int]:
        """Extend this worker's leases on `watch_ids`; returns those still held (the others were taken over
        after they expired)."""
        ids = list(watch_ids)
        if not ids:
            return set()
        mine = sa.and_(col(WATCH.c.id).in_(ids), WATCH.c.leased_by == worker)
        with self.engine.begin() as conn:
            conn.execute(sa.update(WATCH).where(mine).values(lease_until=now + timedelta(seconds=lease_s)))
            return {row[0] for row in conn.execute(sa.select(WATCH.c.id).where(mine))}

    def release(self, worker: str, leased: LeasedWatch, next_poll_at: datetime) -> bool:
        """Give a polled watch back, due next at `next_poll_at`, unless a poll was asked for while it was
        held (then it stays due). False when the lease was no longer this worker's (nothing changed)."""
        keep = WATCH.c.next_poll_at > leased.claimed_at
        query = sa.update(WATCH).where(WATCH.c.id == leased.id, WATCH.c.leased_by == worker).values(
            leased_by=None, lease_until=None,
            next_poll_at=sa.case((keep, WATCH.c.next_poll_at), else_=next_poll_at))
        with self.engine.begin() as conn:
            return bool(conn.execute(query).rowcount)

    def release_all(self, worker: str) -> int:
        """Give back every lease of this worker (a clean stop): the watches stay as due as they were."""
        query = sa.update(WATCH).where(WATCH.c.leased_by == worker).values(leased_by=None, lease_until=None)
        with self.engine.begin() as conn:
            return conn.execute(query).rowcount

    def overdue(self, before: datetime) -> list[DueWatch]:
        """Watches due before `before` (an index range: normally few rows)."""
        query = sa.select(WATCH.c.next_poll_at, WATCH.c.interval_s).where(WATCH.c.next_poll_at < before)
        with self.engine.connect() as conn:
            return [DueWatch(*row) for row in conn.execute(query)]

    def lease_counts(self, now: datetime) -> dict[str, int]:
        """Live leases per worker."""
        query = sa.select(WATCH.c.leased_by, sa.func.count()).where(
            WATCH.c.leased_by.is_not(None), WATCH.c.lease_until >= now).group_by(WATCH.c.leased_by)
        with self.engine.connect() as conn:
            return {worker: int(n) for worker, n in conn.execute(query)}

    # -- periodic jobs ----------------------------------------------------------------------------

    def start_job(self, name: str, worker: str, now: datetime, interval_s: float, lease_s: float) -> bool:
        """Take the job's lease if no live worker holds it and no one ran it in the last `interval_s` (less
        a tenth, so that workers started apart do not skip each other's turn). True: run it now, then
        `finish_job`."""
        try:
            with self.engine.begin() as conn:
                conn.execute(sa.insert(JOB).values(name=name))
        except IntegrityError:
            pass  # there already
        free = sa.or_(JOB.c.lease_until.is_(None), JOB.c.lease_until < now, JOB.c.holder == worker)
        rested = sa.or_(JOB.c.last_run_at.is_(None), JOB.c.last_run_at <= now - timedelta(seconds=interval_s * 0.9))
        query = sa.update(JOB).where(JOB.c.name == name, free, rested).values(
            holder=worker, lease_until=now + timedelta(seconds=lease_s))
        with self.engine.begin() as conn:
            return bool(conn.execute(query).rowcount)

    def renew_job(self, name: str, worker: str, now: datetime, lease_s: float) -> bool:
        query = sa.update(JOB).where(JOB.c.name == name, JOB.c.holder == worker).values(
            lease_until=now + timedelta(seconds=lease_s))
        with self.engine.begin() as conn:
            return bool(conn.execute(query).rowcount)

    def finish_job(self, name: str, worker: str, ran_at: datetime) -> None:
        """The job ran (from `ran_at`): its lease goes back and its interval counts from then."""
        query = sa.update(JOB).where(JOB.c.name == name, JOB.c.holder == worker).values(
            holder=None, lease_until=None, last_run_at=ran_at)
        with self.engine.begin() as conn:
            conn.execute(query)
