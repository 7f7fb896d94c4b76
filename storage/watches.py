"""Watches and their poll bookkeeping: which repo branches are polled, how often, and how each poll went.
Callers get detached rows back. (Shared polling's leases on the same rows: storage/leases.py.)"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from storage.errors import WatchExists
from storage.models import Watch
from storage.sessions import EngineStore

if TYPE_CHECKING:
    from storage.event_log import NewEvent


@dataclass(frozen=True)
class ScheduledWatch:
    """A watch as a scheduler sees it: which branch, how often, when last polled, and when next due (a
    poll asked for by the listing or a Hub webhook, kept until it ran: storage/leases.py)."""

    repo_id: str
    branch: str
    interval_s: int
    last_polled_at: datetime | None
    next_poll_at: datetime | None = None


class WatchStore(EngineStore):
    """Watches: added, synced from the config file, removed, listed; each poll's outcome recorded."""

    def add_watch(
        self, repo_id: str, branch: str, interval_s: int, source: str = "cli", backfill: int = 0
    ) -> Watch:
        with self.session() as s:
            if self._watch(s, repo_id, branch) is not None:
                raise WatchExists(f"{repo_id}@{branch} is already watched")
            watch = Watch(
                repo_id=repo_id,
                branch=branch,
                interval_s=interval_s,
                source=source,
                backfill=backfill,
                created_at=self.clock(),
            )
            s.add(watch)
            s.commit()
            return watch

    def sync_config_watches(self, wanted: Iterable[tuple[str, str, int]]) -> None:
        """Make the watches declared in the config file exist with their intervals."""
        with self.session() as s:
            for repo_id, branch, interval_s in wanted:
                watch = self._watch(s, repo_id, branch)
                if watch is None:
                    s.add(
                        Watch(
                            repo_id=repo_id,
                            branch=branch,
                            interval_s=interval_s,
                            source="config",
                            created_at=self.clock(),
                        )
                    )
                elif watch.interval_s != interval_s:
                    watch.interval_s = interval_s
                    s.add(watch)
            s.commit()

    def remove_watch(self, repo_id: str, branch: str | None = None) -> int:
        """Remove the repo's watches (one branch, or all); its history stays. Returns how many."""
        with self.session() as s:
            query = select(Watch).where(Watch.repo_id == repo_id)
            if branch is not None:
                query = query.where(Watch.branch == branch)
            watches = list(s.exec(query))
            for watch in watches:
                s.delete(watch)
            s.commit()
            return len(watches)

    def list_watches(self) -> list[Watch]:
        with self.session() as s:
            return list(s.exec(select(Watch).order_by(Watch.repo_id, Watch.branch)))

    def get_watch(self, repo_id: str, branch: str | None = None) -> Watch | None:
        with self.session() as s:
            query = select(Watch).where(Watch.repo_id == repo_id).order_by(Watch.id)
            if branch is not None:
                query = query.where(Watch.branch == branch)
            return s.exec(query).first()

    def repo_watches(self, repo_id: str) -> list[Watch]:
        """The watches of one repo, by branch (an index lookup, not the whole watch list)."""
        with self.session() as s:
            return list(s.exec(select(Watch).where(Watch.repo_id == repo_id).order_by(Watch.branch)))

    def watch_list_version(self) -> tuple[Any, ...]:
        """A fingerprint of the watch list in one aggregate query (no rows loaded): it changes when a
        watch is added or removed or its interval changes, so a scheduler reloads the list only then.
        (A removed newest watch whose id is reused by the next one is told apart by `created_at`.)"""
        import sqlalchemy as sa

        with self.engine.connect() as conn:
            return tuple(conn.execute(sa.select(
                sa.func.count(), sa.func.max(Watch.id), sa.func.sum(Watch.id), sa.func.sum(Watch.interval_s),
                sa.func.sum(col(Watch.id) * col(Watch.interval_s)), sa.func.max(Watch.created_at),
            )).one())

    def watch_schedule(self) -> list[ScheduledWatch]:
        """What a scheduler needs of every watch (five columns, not ORM rows), by repo and branch."""
        import sqlalchemy as sa

        query = sa.select(Watch.repo_id, Watch.branch, Watch.interval_s, Watch.last_polled_at, Watch.next_poll_at).order_by(
            Watch.repo_id, Watch.branch)
        with self.engine.connect() as conn:
            return [ScheduledWatch(*row) for row in conn.execute(query)]

    def record_poll_ok(
        self,
        watch_id: int,
        repo_meta: dict[str, Any] | None = None,
        events: Iterable[NewEvent] = (),
        sha: str | None = None,
    ) -> None:
        """A poll that found nothing new (new revisions update the watch in save_revision). Repo-level
        `events` seen at head `sha` (made private, gated) are written with the watch's new meta in one
        transaction: a crash leaves both or neither. An event id stored already is not written again,
        also when another process stored it a moment ago."""
        events = list(events)
        try:
            self._poll_ok(watch_id, repo_meta, events, sha)
        except IntegrityError:
            if not events:
                raise
            self._poll_ok(watch_id, repo_meta, events, sha)  # the racing writer's events are seen now

    def _poll_ok(self, watch_id: int, repo_meta: dict[str, Any] | None, events: list[NewEvent], sha: str | None) -> None:
        now = self.clock()
        with self.session() as s:
            if events:
                from storage.event_log import order_event_writes, write_events  # here: it loads the history tables

                order_event_writes(s)  # first: see order_event_writes
            watch = s.get(Watch, watch_id)
            if watch is None:
                return
            if events:
                write_events(s, watch.repo_id, events, now, sha=sha)
            watch.last_polled_at = now
            watch.last_ok_at = now
            watch.last_error = None
            watch.error_count = 0
            watch.next_retry_at = None
            if repo_meta is not None:
                watch.repo_meta = repo_meta
            s.add(watch)
            s.commit()

    def stamp_unchanged_poll(self, watch: Watch) -> datetime | None:
        """A poll that found the head where `watch` (the caller's copy) says it was: one UPDATE, nothing
        read. It applies only while the stored watch is as that copy saw it (same head, same last poll):
        returns the new `last_polled_at` (also set on the copy), or None when something else touched the
        watch meanwhile (the caller then records the poll in full)."""
        import sqlalchemy as sa

        now = self.clock()
        last_sha, polled_at = col(Watch.last_sha), col(Watch.last_polled_at)
        query = sa.update(Watch).where(
            col(Watch.id) == watch.id,
            last_sha.is_(None) if watch.last_sha is None else last_sha == watch.last_sha,
            polled_at.is_(None) if watch.last_polled_at is None else polled_at == watch.last_polled_at,
        ).values(last_polled_at=now, last_ok_at=now)
        with self.engine.begin() as conn:
            if conn.execute(query).rowcount != 1:
                return None
        watch.last_polled_at = watch.last_ok_at = now
        return now

    def record_poll_error(self, watch_id: int, error: str, next_retry_at: datetime | None) -> None:
        with self.session() as s:
            watch = s.get(Watch, watch_id)
            if watch is None:
                return
            watch.last_polled_at = self.clock()
            watch.last_error = error
            watch.error_count += 1
            watch.next_retry_at = next_retry_at
            s.add(watch)
            s.commit()

    def move_watch(self, watch_id: int, sha: str, repo_meta: dict[str, Any] | None = None) -> None:
        """Point a watch at an already-stored revision (another branch ingested it first)."""
        with self.session() as s:
            point_watch(s, watch_id, sha, repo_meta)
            s.commit()

    @staticmethod
    def _watch(s: Session, repo_id: str, branch: str) -> Watch | None:
        return s.exec(select(Watch).where(Watch.repo_id == repo_id, Watch.branch == branch)).first()


def point_watch(session: Session, watch_id: int, sha: str, repo_meta: dict[str, Any] | None = None) -> None:
    """Move a watch to the stored revision `sha` (with the repo's `repo_meta` as seen) in the caller's
    transaction (the caller commits); nothing when the watch is gone."""
    watch = session.get(Watch, watch_id)
    if watch is None:
        return
    watch.last_sha = sha
    if repo_meta is not None:
        watch.repo_meta = repo_meta
    session.add(watch)
