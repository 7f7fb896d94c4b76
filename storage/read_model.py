"""The read model of the pages, feeds and API: events filtered, with cursor pagination by `seq`; revisions
filtered; estimates over time; repo listings and totals.

Events are append-only (a row is never rewritten), so the newest events of a filter (as many as the
feed shows) identify what a feed built from them holds: `FeedState` is what conditional GETs are
answered from, read through an index in one query whatever the length of the history. Repo listings
and totals come from the per-repo summaries kept on write (storage.summaries), not from the history.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import col, func, select

from storage.kinds import REVISION_INGESTED, at_least
from storage.models import ChangeRecord, EstimateRecord, Event, RepoSummaryRow, Revision, Watch
from storage.sessions import EngineStore


@dataclass(frozen=True)
class EventFilter:
    """Which events a feed or an API page holds. `kinds` mixes event kinds (dotted, `revision.ingested`)
    and change kinds (`chat_template`): an event matches a change kind when it is a revision's event and
    the revision has a change of that kind, or when its own kind starts with `<kind>.`. Several kinds match any of them."""

    repo_id: str | None = None
    org: str | None = None
    kinds: tuple[str, ...] = ()
    min_severity: str | None = None
    security_only: bool = False

    def __post_init__(self) -> None:
        if self.min_severity is not None:
            at_least(self.min_severity)


@dataclass(frozen=True)
class RevisionFilter:
    """Which revisions a repo's timeline shows: those with a change of one of `kinds`, with a change of
    `min_severity` or above, and (with `security_only`) with a security-relevant change or event."""

    kinds: tuple[str, ...] = ()
    min_severity: str | None = None
    security_only: bool = False

    def __post_init__(self) -> None:
        if self.min_severity is not None:
            at_least(self.min_severity)


@dataclass(frozen=True)
class EstimatePoint:
    """One revision's estimate reduced to what a chart of the repo's history plots."""

    sha: str
    committed_at: datetime
    parameters: int | None
    full_finetune_bytes: int | None
    lora_bytes: int | None


@dataclass(frozen=True)
class EventHead:
    seq: int
    event_id: str


@dataclass(frozen=True)
class FeedState:
    """The newest events of one filter, newest first (as many as the feed shows), and when the newest
    was written. A feed document is a function of these, so they are its validator: an event committed
    late with a lower `seq` (concurrent writers on PostgreSQL) changes them when it enters the window."""

    heads: tuple[EventHead, ...]
    last_created_at: datetime | None

    @property
    def last_seq(self) -> int | None:
        return self.heads[0].seq if self.heads else None


@dataclass(frozen=True)
class RepoSummary:
    repo_id: str
    revisions: int
    last_committed_at: datetime | None
    watched: bool


@dataclass(frozen=True)
class Counts:
    watches: int
    watches_failing: int
    revisions: int
    changes: int
    events: int
    last_event_seq: int


def _seq(value: int) -> sa.BindParameter[int]:
    """A user-given event sequence bound as BIGINT: a cursor past PostgreSQL's INTEGER range (the API takes
    up to 2**62) bounds nothing instead of failing the query."""
    return sa.literal(value, sa.BigInteger)


def _utc(value: datetime | str | None) -> datetime | None:
    """A stored time as the driver hands it back (SQLite: text without a zone), UTC-aware."""
    if value is None:
        return None
    when = datetime.fromisoformat(value) if isinstance(value, str) else value
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _of_org(column: Any, org: str) -> sa.ColumnElement[bool]:
    """A repo key of the org: its models (`org/name`) and its datasets (`datasets/org/name`)."""
    return sa.or_(column.startswith(f"{org}/", autoescape=True), column.startswith(f"datasets/{org}/", autoescape=True))


def _conditions(flt: EventFilter) -> list[sa.ColumnElement[bool]]:
    where: list[sa.ColumnElement[bool]] = []
    if flt.repo_id is not None:
        where.append(col(Event.repo_id) == flt.repo_id)
    if flt.org is not None:  # the org's models and its datasets (`datasets/org/name`)
        where.append(_of_org(col(Event.repo_id), flt.org))
    if flt.min_severity is not None:
        where.append(col(Event.severity).in_(at_least(flt.min_severity)))
    if flt.security_only:  # `= true`, not `IS true`: PostgreSQL only looks an equality up in an index
        where.append(col(Event.security) == sa.true())
    if flt.kinds:
        event_kinds = [k for k in flt.kinds if "." in k]
        change_kinds = [k for k in flt.kinds if "." not in k]
        either: list[sa.ColumnElement[bool]] = []
        if event_kinds:
            either.append(col(Event.kind).in_(event_kinds))
        if change_kinds:
            has_change = (
                select(ChangeRecord.id)
                .where(col(ChangeRecord.revision_id) == col(Event.revision_id), col(ChangeRecord.kind).in_(change_kinds))
                .exists()
            )
            # Only the revision's own event carries its changes: an advisory or estimate event attached
            # to the same revision is not a chat-template event because the revision changed one.
            either.append(sa.and_(col(Event.kind) == REVISION_INGESTED, has_change))
            either.extend(col(Event.kind).startswith(f"{k}.", autoescape=True) for k in change_kinds)
        where.append(sa.or_(*either))
    return where


class ReadModel(EngineStore):
    """Read-only queries for feeds, pages and the API. Callers get detached rows back."""

    def events(
        self, flt: EventFilter, limit: int, *, after_seq: int | None = None, before_seq: int | None = None
    ) -> list[Event]:
        """With `after_seq`: events after it, oldest first. Otherwise the newest, newest first.
        `before_seq` bounds either from above (both together: a window)."""
        query = select(Event).where(*_conditions(flt)).limit(limit)
        if before_seq is not None:
            query = query.where(col(Event.seq) < _seq(before_seq))
        if after_seq is not None:
            query = query.where(col(Event.seq) > _seq(after_seq)).order_by(col(Event.seq).asc())
        else:
            query = query.order_by(col(Event.seq).desc())
        with self.session() as s:
            return list(s.exec(query))

    def event_heads(self, flt: EventFilter, limit: int, *, before_seq: int | None = None) -> list[EventHead]:
        """The newest events' identifying columns only (no payload), newest first: what a feed needs
        when it already holds each entry's content."""
        query = select(Event.seq, Event.event_id).where(*_conditions(flt)).order_by(col(Event.seq).desc()).limit(limit)
        if before_seq is not None:
            query = query.where(col(Event.seq) < _seq(before_seq))
        with self.engine.connect() as conn:
            return [EventHead(seq, event_id) for seq, event_id in conn.execute(query)]

    def events_by_seq(self, seqs: Iterable[int]) -> dict[int, Event]:
        wanted = set(seqs)
        if not wanted:
            return {}
        with self.session() as s:
            return {e.seq: e for e in s.exec(select(Event).where(col(Event.seq).in_(wanted)))}  # type: ignore[misc]

    def events_for_revision(self, revision_id: int) -> list[Event]:
        with self.session() as s:
            return list(s.exec(select(Event).where(Event.revision_id == revision_id).order_by(col(Event.seq))))

    def revision_payloads(self, revision_ids: Iterable[int], kind: str) -> dict[int, dict[str, Any]]:
        """The payload of each revision's event of `kind` (its `revision.ingested`, say), in one query."""
        ids = list(revision_ids)
        if not ids:
            return {}
        with self.session() as s:
            rows = s.exec(select(Event.revision_id, Event.payload).where(col(Event.revision_id).in_(ids), Event.kind == kind))
            return {rid: payload for rid, payload in rows if rid is not None and isinstance(payload, dict)}

    def state(self, flt: EventFilter, limit: int) -> FeedState:
        """The newest `limit` events' ids and the newest one's time, in one query that walks an index
        backwards by `seq` (the primary key; (repo_id, seq) and (security, seq) for repo and security
        feeds) and stops after `limit` rows: enough to answer a conditional GET without reading a payload."""
        query = (
            select(Event.seq, Event.event_id, Event.created_at)
            .where(*_conditions(flt))
            .order_by(col(Event.seq).desc())
            .limit(limit)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return FeedState(tuple(EventHead(seq, event_id) for seq, event_id, _ in rows), rows[0][2] if rows else None)

    def revisions(self, ids: Iterable[int]) -> dict[int, Revision]:
        wanted = set(ids)
        if not wanted:
            return {}
        with self.session() as s:
            return {r.id: r for r in s.exec(select(Revision).where(col(Revision.id).in_(wanted)))}  # type: ignore[misc]

    def estimates(self, revision_ids: Iterable[int]) -> dict[int, EstimateRecord]:
        wanted = set(revision_ids)
        if not wanted:
            return {}
        with self.session() as s:
            query = select(EstimateRecord).where(col(EstimateRecord.revision_id).in_(wanted))
            return {e.revision_id: e for e in s.exec(query)}

    def repo_estimates(self, repo_id: str, limit: int, offset: int = 0) -> list[tuple[Revision, EstimateRecord]]:
        """Stored estimates of a repo, newest revision first."""
        query = (
            select(Revision, EstimateRecord)
            .join(EstimateRecord, col(EstimateRecord.revision_id) == col(Revision.id))
            .where(Revision.repo_id == repo_id)
            .order_by(col(Revision.committed_at).desc(), col(Revision.id).desc())
            .offset(offset)
            .limit(limit)
        )
        with self.session() as s:
            return [(r, e) for r, e in s.exec(query)]

    def timeline(self, repo_id: str, flt: RevisionFilter, limit: int, offset: int = 0) -> tuple[list[Revision], int]:
        """A page of the repo's revisions matching `flt`, newest first, and how many match in all."""
        where: list[sa.ColumnElement[bool]] = [col(Revision.repo_id) == repo_id]
        change: list[sa.ColumnElement[bool]] = []
        if flt.kinds:
            change.append(col(ChangeRecord.kind).in_(flt.kinds))
        if flt.min_severity is not None:
            change.append(col(ChangeRecord.severity).in_(at_least(flt.min_severity)))
        if change:
            where.append(col(Revision.id).in_(select(ChangeRecord.revision_id).where(*change)))
        if flt.security_only:  # sets of ids, each read once: the planner never re-runs a subquery per revision
            where.append(sa.or_(
                col(Revision.id).in_(select(ChangeRecord.revision_id).where(*change, col(ChangeRecord.security) == sa.true())),
                col(Revision.id).in_(select(Event.revision_id).where(col(Event.security) == sa.true(), col(Event.repo_id) == repo_id)),
            ))
        page = (
            select(Revision).where(*where)
            .order_by(col(Revision.committed_at).desc(), col(Revision.id).desc()).offset(offset).limit(limit)
        )
        with self.session() as s:
            total = int(s.exec(select(func.count(col(Revision.id))).where(*where)).one())
            return list(s.exec(page)), total

    def estimate_points(self, repo_id: str, limit: int = 5000) -> list[EstimatePoint]:
        """The repo's estimates as chart points, oldest revision first: parameters and batch-1 memory of
        a full fine-tune and of LoRA, read out of the stored JSON by the database."""
        result = sa.type_coerce(col(EstimateRecord.result), sa.JSON)
        query = (
            select(
                Revision.sha, Revision.committed_at, EstimateRecord.parameters_total,
                # Byte counts pass 2**31: BIGINT, not as_integer()'s INTEGER (which PostgreSQL refuses to overflow).
                sa.cast(result[("memory", "full_finetune", "batch_1_bytes")].as_string(), sa.BigInteger),
                sa.cast(result[("memory", "lora", "batch_1_bytes")].as_string(), sa.BigInteger),
            )
            .join(EstimateRecord, col(EstimateRecord.revision_id) == col(Revision.id))
            .where(Revision.repo_id == repo_id)
            .order_by(col(Revision.committed_at).desc(), col(Revision.id).desc())
            .limit(limit)
        )
        with self.session() as s:
            rows = s.exec(query).all()
        return [EstimatePoint(*row) for row in reversed(rows)]

    def count_revisions(self, repo_id: str) -> int:
        """How many revisions of the repo are stored (its summary row: no count over the history)."""
        with self.session() as s:
            stored = s.exec(select(RepoSummaryRow.revisions).where(RepoSummaryRow.repo_id == repo_id)).first()
            return int(stored or 0)

    def count_estimates(self, repo_id: str) -> int:
        query = (
            select(func.count(col(EstimateRecord.revision_id)))
            .join(Revision, col(EstimateRecord.revision_id) == col(Revision.id))
            .where(Revision.repo_id == repo_id)
        )
        with self.session() as s:
            return int(s.exec(query).one())

    def repo_known(self, repo_id: str) -> bool:
        """Whether the repo is watched or has stored history."""
        with self.session() as s:
            if s.exec(select(Watch.id).where(Watch.repo_id == repo_id).limit(1)).first() is not None:
                return True
            return s.exec(select(Revision.id).where(Revision.repo_id == repo_id).limit(1)).first() is not None

    def renamed_to(self, repo_id: str) -> str | None:
        """The name `repo_id`'s history moved to after a rename on the Hub (None: not renamed, or a new history is
        under the old name again)."""
        from storage.renames import RenameStore  # here: read only on a repo not known under its name

        return RenameStore(self.engine, self.clock).current_name(repo_id)

    def org_known(self, org: str) -> bool:
        """Whether any repo of the org is watched or has stored history."""
        with self.session() as s:
            for model in (Watch, Revision):
                query = select(model.id).where(_of_org(col(model.repo_id), org)).limit(1)
                if s.exec(query).first() is not None:
                    return True
        return False

    def repos(self) -> list[RepoSummary]:
        """Every repo with stored history or a watch, by id: one row per repo from the summaries and
        the watched repo ids from the watch index, never a pass over the revisions."""
        # The time as the driver gives it (SQLite: text), parsed below by fromisoformat: the column
        # type's own parser costs more than the query for ten thousand repos.
        last_at = sa.type_coerce(RepoSummaryRow.last_committed_at, sa.String)
        query = select(RepoSummaryRow.repo_id, RepoSummaryRow.revisions, last_at).where(col(RepoSummaryRow.revisions) > 0)
        with self.engine.connect() as conn:  # plain rows: no ORM bookkeeping for one tuple per repo
            history = {repo_id: (int(n), _utc(last)) for repo_id, n, last in conn.execute(query)}
            watched = set(conn.execute(select(Watch.repo_id).distinct()).scalars())
        return [
            RepoSummary(repo_id, *history.get(repo_id, (0, None)), repo_id in watched)
            for repo_id in sorted(history.keys() | watched)
        ]

    def counts(self) -> Counts:
        """Totals for metrics gauges: history totals summed over the per-repo summaries (one row per
        repo, not per revision, change or event), the newest event from the primary key."""
        with self.engine.connect() as conn:

            def scalar(query: sa.Select) -> int:  # type: ignore[type-arg]
                return int(conn.execute(query).scalar() or 0)

            summed = (RepoSummaryRow.revisions, RepoSummaryRow.changes, RepoSummaryRow.events)
            totals = select(*(func.coalesce(func.sum(c), 0) for c in summed))
            revisions, changes, events = (int(n) for n in conn.execute(totals).one())
            return Counts(
                watches=scalar(select(func.count(col(Watch.id)))),
                watches_failing=scalar(select(func.count(col(Watch.id))).where(col(Watch.error_count) > 0)),
                revisions=revisions,
                changes=changes,
                events=events,
                last_event_seq=scalar(select(func.coalesce(func.max(Event.seq), 0))),
            )

    def watch_health(self) -> tuple[int, dict[str, int]]:
        """Watches whose last poll failed, and the watches not active by repo state (one grouped query)."""
        with self.engine.connect() as conn:
            failing = int(conn.execute(select(func.count(col(Watch.id))).where(col(Watch.error_count) > 0)).scalar() or 0)
            rows = conn.execute(select(Watch.repo_state, func.count(col(Watch.id))).where(col(Watch.repo_state) != "active")
                                .group_by(Watch.repo_state))
            return failing, {str(state): int(n) for state, n in rows}

    def ping(self) -> None:
        """Raise if the database cannot answer a query on the event table."""
        with self.engine.connect() as conn:
            conn.execute(select(func.count()).select_from(Event).where(sa.false()))
