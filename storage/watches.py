"""Watches and their poll bookkeeping: which repo branches are polled, how often, and how each poll went.
Callers get detached rows back. (Shared polling's leases on the same rows: storage/leases.py.)"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from storage.errors import WatchExists
from storage.kinds import REPO_STATES
from storage.models import RepoAlias, RepoStateChange, Watch
from storage.sessions import EngineStore

if TYPE_CHECKING:
    from storage.event_log import NewEvent
    from storage.renames import HistoryMove


@dataclass(frozen=True)
class ScheduledWatch:
    """A watch as a scheduler sees it: which branch, how often, when last polled, and when next due (a
    poll asked for by the listing or a Hub webhook, kept until it ran: storage/leases.py)."""

    repo_id: str
    branch: str
    interval_s: int
    last_polled_at: datetime | None
    next_poll_at: datetime | None = None


@dataclass(frozen=True)
class RepoStateSeen:
    """The repo state (storage/kinds.py REPO_STATES) a poll found, with its detail and the event that announces
    it: written only when it changes the watch's stored state (then with a RepoStateChange row), in the
    transaction that records the poll. `sha`: the revision the event is attached to (the watch's last)."""

    state: str
    detail: dict[str, Any]
    event: NewEvent
    sha: str | None = None

    def __post_init__(self) -> None:
        if self.state not in REPO_STATES:
            raise ValueError(f"repo state must be one of {', '.join(REPO_STATES)}, not {self.state!r}")


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
        """Make the watches declared in the config file exist with their intervals. A name whose watch and history
        moved to a new name after a rename on the Hub (storage/renames.py) is not watched again under the old one:
        the watch is under the new name (a repo created under the old name is watched with `watch add`)."""
        with self.session() as s:
            for repo_id, branch, interval_s in wanted:
                watch = self._watch(s, repo_id, branch)
                if watch is None and s.get(RepoAlias, repo_id) is not None:
                    continue
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
                sa.func.max(Watch.state_since),  # a followed rename moves a watch to another name (and state)
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
        restored: RepoStateSeen | None = None,
        move_to: str | None = None,
    ) -> HistoryMove | None:
        """A poll that found nothing new (new revisions update the watch in save_revision). Repo-level
        `events` seen at head `sha` (made private, gated) are written with the watch's new meta in one
        transaction: a crash leaves both or neither. An event id stored already is not written again,
        also when another process stored it a moment ago. `restored`: the repo answered again (state
        "active"), or its new state (moved), announced when the stored state was another. `move_to`: the repo
        was renamed to this name and the watch follows it: its whole history moves there in the same transaction
        (storage/renames.py; refused when anything is stored under that name). Returns the move, when asked."""
        events = list(events)
        try:
            return self._poll_ok(watch_id, repo_meta, events, sha, restored, move_to)
        except IntegrityError:
            if not events and restored is None and move_to is None:
                raise
            return self._poll_ok(watch_id, repo_meta, events, sha, restored, move_to)  # the racing writer's rows are seen now

    def _poll_ok(self, watch_id: int, repo_meta: dict[str, Any] | None, events: list[NewEvent], sha: str | None,
                 restored: RepoStateSeen | None = None, move_to: str | None = None) -> HistoryMove | None:
        now = self.clock()
        moved = None
        with self.session() as s:
            if events or restored is not None:
                from storage.event_log import order_event_writes, write_events  # here: it loads the history tables

                order_event_writes(s)  # first: see order_event_writes
            watch = s.get(Watch, watch_id)
            if watch is None:
                return
            if events:
                write_events(s, watch.repo_id, events, now, sha=sha)
            _apply_state(s, watch, restored, now)
            watch.last_polled_at = now
            watch.last_ok_at = now
            watch.last_error = None
            watch.error_count = 0
            watch.next_retry_at = None
            if repo_meta is not None:
                watch.repo_meta = repo_meta
            s.add(watch)
            if move_to is not None and watch.repo_id != move_to:
                moved = _follow_move(s, watch, move_to, now)
            s.commit()
        return moved

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

    def record_poll_error(
        self, watch_id: int, error: str, next_retry_at: datetime | None, state: RepoStateSeen | None = None
    ) -> None:
        """A failed poll: the error, one more failure in a row, the next retry. `state`: the repo state the
        Hub's answer told (gone, disabled...), written with its event and history row when it changed."""
        try:
            self._poll_error(watch_id, error, next_retry_at, state)
        except IntegrityError:
            if state is None:
                raise
            self._poll_error(watch_id, error, next_retry_at, state)  # a racing writer announced it: seen now

    def _poll_error(self, watch_id: int, error: str, next_retry_at: datetime | None, state: RepoStateSeen | None) -> None:
        with self.session() as s:
            if state is not None:
                from storage.event_log import order_event_writes

                order_event_writes(s)
            watch = s.get(Watch, watch_id)
            if watch is None:
                return
            _apply_state(s, watch, state, self.clock())
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

    def state_changes(self, repo_id: str, branch: str | None = None) -> list[RepoStateChange]:
        """The repo's state changes, oldest first (one branch, or all)."""
        with self.session() as s:
            query = select(RepoStateChange).where(RepoStateChange.repo_id == repo_id)
            if branch is not None:
                query = query.where(RepoStateChange.branch == branch)
            return list(s.exec(query.order_by(col(RepoStateChange.id))))

    @staticmethod
    def _watch(s: Session, repo_id: str, branch: str) -> Watch | None:
        return s.exec(select(Watch).where(Watch.repo_id == repo_id, Watch.branch == branch)).first()


def _apply_state(session: Session, watch: Watch, seen: RepoStateSeen | None, now: datetime) -> None:
    """Set the watch's repo state to `seen` in the caller's transaction; when it changes, a RepoStateChange row
    and the state's event are written with it (the caller commits). The same state again keeps its detail fresh."""
    if seen is None:
        return
    renamed_again = seen.state == "moved" and (watch.state_detail or {}).get("moved_to") != seen.detail.get("moved_to")
    if watch.repo_state == seen.state and not renamed_again:
        if seen.state != "active":
            watch.state_detail = seen.detail
        return
    from storage.event_log import write_events  # here: it loads the history tables

    session.add(RepoStateChange(repo_id=watch.repo_id, branch=watch.branch, state=seen.state, previous=watch.repo_state,
                                detail=seen.detail, changed_at=now, event_id=seen.event.event_id))
    write_events(session, watch.repo_id, [seen.event], now, sha=seen.sha)
    from storage.advisories import ENDED_STATES, end_own_ranges

    if seen.state in ENDED_STATES or watch.repo_state in ENDED_STATES:  # its own records' ranges end, or open again
        end_own_ranges(session, watch.repo_id, watch.last_sha, seen.state, now)
    watch.repo_state, watch.state_since = seen.state, now
    watch.state_detail = seen.detail if seen.state != "active" else None


def _follow_move(session: Session, watch: Watch, new: str, now: datetime) -> HistoryMove:
    """Move the watched repo's history to its new name in the caller's transaction; the watch keeps state `moved`
    with `moved_from` (or `not_moved`, why nothing moved) in its detail, and so do its other branches' watches."""
    from storage.renames import move_history  # here: it loads the history tables

    old = watch.repo_id
    moved = move_history(session, old, new, (watch.repo_meta or {}).get("uid"), now)
    detail = {k: v for k, v in (watch.state_detail or {}).items() if k not in ("not_moved", "moved_from")}
    detail["moved_to"] = new
    if moved.refused is not None:
        detail["not_moved"] = moved.refused
        watch.state_detail = detail
        return moved
    detail["moved_from"] = old
    watch.repo_id, watch.state_detail = new, detail
    session.execute(sa.update(Watch).where(col(Watch.repo_id) == new, col(Watch.id) != watch.id,
                                           col(Watch.repo_state).in_(("active", "moved")))
                    .values(repo_state="moved", state_since=now, state_detail=detail))
    return moved


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
