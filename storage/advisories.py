"""The advisory tables' writes and queries (the tables are in storage/models/advisories.py): dependency facts per
revision, the OSV record cache, revision <-> advisory links, hubwatch's own OSV records, what each repo
has been told (re-check state), and revisions waiting for OSV to come back.

`write_check(session, revision_id, check)` adds one revision's advisory rows to a session: it is what the
advisories service hands to `HistoryStore.save_revision(extra_writes=...)`, so they land in the revision's own
transaction (or in a transaction of their own, for re-checks and back-fills).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from storage import blobs
from storage.event_log import NewEvent, order_event_writes, write_events
from storage.models import (
    AdvisoryLink,
    AdvisoryPending,
    AdvisoryRecheck,
    AdvisoryState,
    FileScan,
    OsvRecord,
    OwnAdvisory,
    Revision,
    RevisionFacts,
    Watch,
)
from storage.sessions import EngineStore


@dataclass(frozen=True)
class StoredFacts:
    """A revision's dependency facts and loader advice, as read back."""

    revision_id: int
    facts: dict[str, Any]
    fact_changes: list[dict[str, Any]]
    advice: dict[str, Any] | None
    checked_at: datetime


# --- what a check writes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class NewLink:
    advisory_key: str
    package: str
    version: str
    status: str
    reason: str | None
    verdict: str
    rule: str | None
    ids: tuple[str, ...]
    modified: str
    summary: str
    relevant: bool = True
    relevance: str | None = None


@dataclass(frozen=True)
class Told:
    """What a repo was last told about one advisory."""

    modified: str
    substance: str | None = None


@dataclass(frozen=True)
class NewOwnAdvisory:
    id: str
    repo_id: str
    sha: str
    class_id: str
    severity: str
    record: dict[str, Any]
    fixed_sha: str | None = None


@dataclass(frozen=True)
class NewAdvisoryCheck:
    """Everything one advisory check of one revision writes."""

    repo_id: str
    facts: dict[str, Any]
    fact_changes: list[dict[str, Any]] = field(default_factory=list)
    advice: dict[str, Any] | None = None
    osv_records: list[dict[str, Any]] = field(default_factory=list)
    links: list[NewLink] | None = None  # None: keep the links stored (OSV was not reached)
    own: list[NewOwnAdvisory] = field(default_factory=list)
    state: list[tuple[str, str, str | None]] = field(default_factory=list)  # (key, modified, substance) now told
    events: list[NewEvent] = field(default_factory=list)
    pending_reason: str | None = None


def write_check(session: Session, revision_id: int, check: NewAdvisoryCheck, now: datetime, *,
                new_revision: bool = False) -> None:
    """Add one revision's advisory rows to `session` (the caller commits). `new_revision`: the revision is being
    inserted in this transaction, so it has no facts, links or pending mark to look up or replace."""
    with session.no_autoflush:
        _write_check(session, revision_id, check, now, new_revision)


def _write_check(session: Session, revision_id: int, check: NewAdvisoryCheck, now: datetime, new_revision: bool) -> None:
    facts = None if new_revision else session.get(RevisionFacts, revision_id)
    facts = facts or RevisionFacts(revision_id=revision_id)
    docs = [check.facts] if check.advice is None else [check.facts, check.advice]
    oids = blobs.put_jsons(session, docs)  # both documents looked up in one query
    facts.facts_oid, facts.advice_oid = oids[0], oids[1] if check.advice is not None else None
    facts.fact_changes, facts.checked_at = check.fact_changes, now
    session.add(facts)
    upsert_osv_records(session, check.osv_records, now)
    if check.links is not None:
        if not new_revision:
            session.execute(sa.delete(AdvisoryLink).where(col(AdvisoryLink.revision_id) == revision_id))
        session.add_all(
            AdvisoryLink(revision_id=revision_id, checked_at=now, **{**link.__dict__, "ids": list(link.ids)})
            for link in {(lk.advisory_key, lk.package): lk for lk in check.links}.values()
        )
    _write_own(session, revision_id, check.own, now)
    _told(session, check.repo_id, check.state, now)
    _add_events(session, check.repo_id, revision_id, check.events, now)
    pending = None if new_revision else session.get(AdvisoryPending, revision_id)
    if check.pending_reason is None:
        if pending is not None:
            session.delete(pending)
    elif pending is None:
        session.add(AdvisoryPending(revision_id=revision_id, reason=check.pending_reason, marked_at=now, last_attempt_at=now))
    else:
        pending.reason, pending.attempts, pending.last_attempt_at = check.pending_reason, pending.attempts + 1, now
        session.add(pending)


def _write_own(session: Session, revision_id: int, own_rows: Iterable[NewOwnAdvisory], now: datetime) -> None:
    for own in own_rows:
        row = session.get(OwnAdvisory, own.id)
        if row is None:
            row = OwnAdvisory(id=own.id, repo_id=own.repo_id, revision_id=revision_id, sha=own.sha,
                              class_id=own.class_id, severity=own.severity, published_at=now)
        row.record, row.modified_at, row.fixed_sha = own.record, now, own.fixed_sha
        row.severity = own.severity
        for name, value in own_columns(own.record).items():
            setattr(row, name, value)
        session.add(row)


# The repo states after which no later commit of the repo will be seen: an own record still open then gets its
# branch head as `last_affected` (OSV: the last affected commit where no fix is known), and loses it again if the
# repo comes back (a later commit may be affected: the range is open again).
ENDED_STATES = frozenset({"gone", "disabled"})
ENDED_KEY = "last_affected_because"


def end_own_ranges(session: Session, repo_id: str, head_sha: str | None, state: str, now: datetime) -> list[str]:
    """On a repo's state change (in the caller's transaction): into `gone`/`disabled`, each open own record of the
    repo introduced at or before `head_sha` (its branch's last stored commit) gets `last_affected` = `head_sha`;
    back out of them, the `last_affected` this wrote is taken away again. The ids changed."""
    rows = session.exec(select(OwnAdvisory).where(OwnAdvisory.repo_id == repo_id)).all()
    changed = []
    if state in ENDED_STATES:
        if head_sha is None:
            return []
        parents = dict(session.exec(select(Revision.sha, Revision.parent_sha).where(Revision.repo_id == repo_id)).all())
        line, sha = set(), head_sha
        while sha is not None and sha not in line and sha in parents:
            line.add(sha)
            sha = parents[sha]
        for row in rows:
            if row.fixed_sha or row.last_affected_sha or row.withdrawn or row.sha not in line:
                continue
            record = _copied(row.record)
            _events(record).append({"last_affected": head_sha})
            record["database_specific"]["hubwatch"].update({"last_affected_sha": head_sha, ENDED_KEY: state})
            record["details"] = f"{record.get('details', '')}\n\nLast affected at commit {head_sha}: the repo is {state} on the Hub."
            changed.append(_rewrite(session, row, record, osv_stamp(now), now))
        return changed
    for row in rows:
        ours = (row.record.get("database_specific") or {}).get("hubwatch") or {}
        if ours.get(ENDED_KEY) is None or row.last_affected_sha is None:
            continue
        record = _copied(row.record)
        events = _events(record)
        events[:] = [e for e in events if "last_affected" not in e]
        for key in ("last_affected_sha", ENDED_KEY):
            record["database_specific"]["hubwatch"].pop(key, None)
        record["details"] = str(record.get("details", "")).split("\n\nLast affected at commit ")[0]
        changed.append(_rewrite(session, row, record, osv_stamp(now), now))
    return changed


def osv_stamp(moment: datetime) -> str:
    """An OSV timestamp (RFC 3339, UTC, a Z), as tracker/advisories/own.py writes `modified`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _copied(record: Mapping[str, Any]) -> dict[str, Any]:
    import copy

    out = copy.deepcopy(dict(record))
    out.setdefault("database_specific", {}).setdefault("hubwatch", {})
    return out


def _events(record: dict[str, Any]) -> list[dict[str, Any]]:
    return record["affected"][0]["ranges"][0].setdefault("events", [])


def _rewrite(session: Session, row: OwnAdvisory, record: dict[str, Any], stamp: str, now: datetime) -> str:
    record["modified"] = stamp
    row.record, row.modified_at = record, now
    for name, value in own_columns(record).items():
        setattr(row, name, value)
    session.add(row)
    return row.id


def own_columns(record: Mapping[str, Any]) -> dict[str, Any]:
    """What an own record's row copies from the record, so that OSV queries match without reading it
    (storage/osv_index.py): its `modified`, whether it is withdrawn, and its range's `last_affected` commit."""
    events = [e for a in record.get("affected") or () if isinstance(a, Mapping) for r in a.get("ranges") or ()
              if isinstance(r, Mapping) for e in r.get("events") or () if isinstance(e, Mapping)]
    last = next((str(e["last_affected"]) for e in events if "last_affected" in e), None)
    return {"modified": str(record.get("modified") or ""), "withdrawn": bool(record.get("withdrawn")),
            "last_affected_sha": last}


@dataclass(frozen=True)
class Rejudged:
    """A stored file scan judged again: its new result under rules `rules_version`."""

    content_id: str
    result: dict[str, Any]
    rules_version: str


@dataclass(frozen=True)
class Announcement:
    """What one watched head is told about a verdict that changed: own records and their events."""

    repo_id: str
    revision_id: int
    own: list[NewOwnAdvisory]
    events: list[NewEvent]
    content_ids: tuple[str, ...] = ()  # the re-judged scans it announces


def upsert_osv_records(session: Session, records: Iterable[dict[str, Any]], now: datetime) -> None:
    for record in records:
        row = session.get(OsvRecord, str(record["id"])) or OsvRecord(id=str(record["id"]))
        row.modified = str(record.get("modified", ""))
        row.aliases = [str(a) for a in record.get("aliases") or ()]
        row.record = record
        row.withdrawn = bool(record.get("withdrawn"))
        row.fetched_at = now
        session.add(row)


def _told(session: Session, repo_id: str, state: Iterable[tuple[str, str, str | None]], now: datetime) -> None:
    wanted = {key: (modified, substance) for key, modified, substance in state}
    if not wanted:
        return
    query = select(AdvisoryState).where(AdvisoryState.repo_id == repo_id, col(AdvisoryState.advisory_key).in_(wanted))
    rows = {r.advisory_key: r for r in session.exec(query)}
    for key, (modified, substance) in wanted.items():
        row = rows.get(key) or AdvisoryState(repo_id=repo_id, advisory_key=key, modified=modified, first_seen_at=now)
        row.modified, row.substance, row.last_seen_at = modified, substance, now
        session.add(row)


def _add_events(session: Session, repo_id: str, revision_id: int | None, events: Iterable[NewEvent], now: datetime) -> None:
    """The check's events, webhooks for re-check events too, in the same transaction. An advisory
    event names its commit in its payload (`sha`): each run of events naming one commit is one write."""
    unique = {e.event_id: e for e in events}.values()
    for sha, run in itertools.groupby(unique, key=lambda e: e.payload.get("sha")):
        write_events(session, repo_id, list(run), now, revision_id=revision_id, sha=sha)


# --- queries ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeadRevision:
    repo_id: str
    revision_id: int
    sha: str


class AdvisoryStore(EngineStore):
    """Reads and stand-alone writes of the advisory tables."""

    def write(self, revision_id: int, check: NewAdvisoryCheck) -> None:
        """`write_check` in a transaction of its own (back-fill, re-check, re-query of pending revisions)."""
        with self.session() as s:
            if check.events:
                order_event_writes(s)  # first: see order_event_writes
            write_check(s, revision_id, check, self.clock())
            s.commit()

    def write_many(self, checks: Iterable[tuple[int, NewAdvisoryCheck]], rechecked: Iterable[tuple[str, int]] = (),
                   batch: int = 200) -> None:
        """Many revisions' checks, `batch` to a transaction; then `rechecked` (repo, head revision) noted."""
        now = self.clock()
        items = list(checks)
        for start in range(0, len(items), batch):
            with self.session() as s:
                if any(check.events for _, check in items[start : start + batch]):
                    order_event_writes(s)  # first: see order_event_writes
                for revision_id, check in items[start : start + batch]:
                    write_check(s, revision_id, check, now)
                s.commit()
        heads = dict(rechecked)
        if not heads:
            return
        with self.session() as s, s.no_autoflush:
            rows = {r.repo_id: r for r in s.exec(select(AdvisoryRecheck).where(col(AdvisoryRecheck.repo_id).in_(heads)))}
            for repo_id, revision_id in heads.items():
                row = rows.get(repo_id) or AdvisoryRecheck(repo_id=repo_id)
                row.revision_id, row.checked_at, row.error = revision_id, now, None
                s.add(row)
            s.commit()

    def write_rejudged(self, scans: Iterable[Rejudged], announcements: Iterable[Announcement]) -> None:
        """Re-judged scans and what they announce, in one transaction: a verdict is announced exactly once,
        since the scan that gave it is stored as judged in the same commit as the announcement."""
        told, wanted = list(announcements), {scan.content_id: scan for scan in scans}
        with self.session() as s:
            if any(a.events for a in told):
                order_event_writes(s)  # first: see order_event_writes
            now = self.clock()
            # locked, then judged stale again: a scan another worker re-judged first is theirs to announce
            query = select(FileScan).where(col(FileScan.content_id).in_(wanted)).with_for_update()
            done = set()
            for row in s.exec(query):
                scan = wanted[row.content_id]
                if row.rules_version != scan.rules_version:
                    row.result, row.rules_version = scan.result, scan.rules_version
                    s.add(row)
                    done.add(row.content_id)
            for a in (a for a in told if set(a.content_ids) <= done):
                _write_own(s, a.revision_id, a.own, now)
                _add_events(s, a.repo_id, a.revision_id, a.events, now)
            s.commit()

    def links_by_revision(self, revision_ids: Iterable[int]) -> dict[int, list[AdvisoryLink]]:
        ids = set(revision_ids)
        out: dict[int, list[AdvisoryLink]] = {i: [] for i in ids}
        if not ids:
            return out
        with self.session() as s:
            for link in s.exec(select(AdvisoryLink).where(col(AdvisoryLink.revision_id).in_(ids))):
                out[link.revision_id].append(link)
        return out

    def save_osv_records(self, records: Iterable[dict[str, Any]]) -> None:
        with self.session() as s:
            upsert_osv_records(s, records, self.clock())
            s.commit()

    def record_recheck(self, repo_id: str, revision_id: int | None, error: str | None) -> None:
        with self.session() as s:
            row = s.get(AdvisoryRecheck, repo_id) or AdvisoryRecheck(repo_id=repo_id)
            row.revision_id, row.checked_at, row.error = revision_id, self.clock(), error
            s.add(row)
            s.commit()

    def osv_records(self, ids: Iterable[str] | None = None) -> list[OsvRecord]:
        with self.session() as s:
            query = select(OsvRecord).order_by(OsvRecord.id)
            if ids is not None:
                query = query.where(col(OsvRecord.id).in_(set(ids)))
            return list(s.exec(query))

    def osv_modified(self) -> dict[str, str]:
        """id -> `modified` of every cached record: what decides whether a detail fetch is needed."""
        with self.session() as s:
            return dict(s.exec(select(OsvRecord.id, OsvRecord.modified)).all())  # type: ignore[arg-type]

    def facts(self, revision_ids: Iterable[int]) -> dict[int, StoredFacts]:
        ids = set(revision_ids)
        if not ids:
            return {}
        with self.session() as s:
            rows = list(s.exec(select(RevisionFacts).where(col(RevisionFacts.revision_id).in_(ids))))
            docs = blobs.read_json(s, [oid for r in rows for oid in (r.facts_oid, r.advice_oid)])
        return {
            r.revision_id: StoredFacts(
                r.revision_id, docs[r.facts_oid], r.fact_changes, docs.get(r.advice_oid or ""), r.checked_at
            )
            for r in rows
        }

    def links(self, revision_id: int) -> list[AdvisoryLink]:
        with self.session() as s:
            query = select(AdvisoryLink).where(AdvisoryLink.revision_id == revision_id).order_by(AdvisoryLink.advisory_key)
            return list(s.exec(query))

    def linked_keys(self, repo_id: str) -> set[str]:
        """Advisory keys ever linked to any revision of the repo."""
        with self.session() as s:
            query = (
                select(AdvisoryLink.advisory_key)
                .join(Revision, col(Revision.id) == AdvisoryLink.revision_id)
                .where(Revision.repo_id == repo_id)
                .distinct()
            )
            return set(s.exec(query))

    def put_own(self, rows: Iterable[tuple[int, NewOwnAdvisory]]) -> None:
        """Own records written outside a revision's check (a derivative's, by the family pass), each with the id of
        the revision that introduced it, in one transaction."""
        now = self.clock()
        with self.session() as s:
            for revision_id, row in rows:
                _write_own(s, revision_id, [row], now)
            s.commit()

    def own(self, repo_id: str | None = None) -> list[OwnAdvisory]:
        with self.session() as s:
            query = select(OwnAdvisory).order_by(col(OwnAdvisory.published_at), OwnAdvisory.id)
            if repo_id is not None:
                query = query.where(OwnAdvisory.repo_id == repo_id)
            return list(s.exec(query))

    def open_own(self, repo_id: str) -> list[OwnAdvisory]:
        return [o for o in self.own(repo_id) if o.fixed_sha is None and not (o.record or {}).get("withdrawn")]

    def told(self, repo_ids: Iterable[str]) -> dict[tuple[str, str], Told]:
        """(repo, advisory key) -> the `modified` (and substance digest) the repo was last told about."""
        ids = set(repo_ids)
        if not ids:
            return {}
        with self.session() as s:
            rows = s.exec(select(AdvisoryState).where(col(AdvisoryState.repo_id).in_(ids)))
            return {(r.repo_id, r.advisory_key): Told(r.modified, r.substance) for r in rows}

    def pending(self) -> list[AdvisoryPending]:
        with self.session() as s:
            return list(s.exec(select(AdvisoryPending).order_by(AdvisoryPending.revision_id)))

    def rechecks(self) -> dict[str, AdvisoryRecheck]:
        with self.session() as s:
            return {r.repo_id: r for r in s.exec(select(AdvisoryRecheck))}

    def heads(self, repo_ids: Iterable[str] | None = None) -> list[HeadRevision]:
        """The stored revision each watch points at (one per repo and sha)."""
        wanted = None if repo_ids is None else set(repo_ids)
        with self.session() as s:
            query = (
                select(Watch.repo_id, Revision.id, Revision.sha)
                .join(Revision, sa.and_(Revision.repo_id == Watch.repo_id, Revision.sha == Watch.last_sha))
                .order_by(Watch.repo_id)
            )
            rows = s.exec(query).all()
        heads = {(r[0], r[2]): HeadRevision(r[0], int(r[1]), r[2]) for r in rows}
        return [h for h in heads.values() if wanted is None or h.repo_id in wanted]

    def revision(self, revision_id: int) -> Revision | None:
        with self.session() as s:
            return s.get(Revision, revision_id)
