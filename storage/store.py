"""The one place hubwatch reads and writes its history. Callers get detached rows back."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from storage import blobs, summaries
from storage.errors import AmbiguousRevision, RevisionNotStored, WatchExists
from storage.event_log import NewEvent, write_events
from storage.models import (
    Blob,
    ChangeRecord,
    EstimateRecord,
    Event,
    RepoSummaryRow,
    Revision,
    RevisionFile,
    Watch,
    WeightFile,
    WeightTensor,
)
from storage.sessions import EngineStore, insert_new

# Rows another storage module adds to a revision's transaction (given the session and the new revision).
ExtraWrite = Callable[[Session, "Revision"], None]


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
class NewFile:
    path: str
    oid: str
    size: int
    kind: str
    lfs_sha256: str | None = None
    lfs_size: int | None = None
    held: bool = False
    note: str | None = None


@dataclass(frozen=True)
class NewTensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    parameters: int


@dataclass(frozen=True)
class NewWeightFile:
    sha256: str
    tensors: tuple[NewTensor, ...] = ()
    metadata: dict[str, Any] | None = None
    error: str | None = None


@dataclass(frozen=True)
class NewChange:
    kind: str
    path: str
    summary: str
    severity: str
    structural: bool = False
    security: bool = False
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NewEstimate:
    parameters_total: int | None
    result: dict[str, Any] | None
    error: str | None = None


@dataclass(frozen=True)
class NewRevision:
    """Everything one ingested commit adds, written in one transaction."""

    repo_id: str
    sha: str
    parent_sha: str | None
    branch: str
    committed_at: datetime
    title: str
    message: str
    authors: list[str]
    is_baseline: bool
    files: list[NewFile]
    blobs: dict[str, bytes]
    weight_files: list[NewWeightFile]
    changes: list[NewChange]
    events: list[NewEvent]
    estimate: NewEstimate | None = None


class Store(EngineStore):
    """Watches, revisions, content-addressed blobs, weight manifests, changes and events."""

    # -- watches -------------------------------------------------------------------------------

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

    @staticmethod
    def _watch(s: Session, repo_id: str, branch: str) -> Watch | None:
        return s.exec(select(Watch).where(Watch.repo_id == repo_id, Watch.branch == branch)).first()

    # -- content-addressed stores ----------------------------------------------------------------

    def known_blobs(self, oids: Iterable[str]) -> set[str]:
        wanted = set(oids)
        if not wanted:
            return set()
        with self.session() as s:
            return set(s.exec(select(Blob.oid).where(col(Blob.oid).in_(wanted))))

    def read_blobs(self, oids: Iterable[str]) -> dict[str, bytes]:
        with self.session() as s:
            return blobs.read_blobs(s, oids)

    def known_weight_files(self, sha256s: Iterable[str]) -> set[str]:
        wanted = set(sha256s)
        if not wanted:
            return set()
        with self.session() as s:
            return set(s.exec(select(WeightFile.sha256).where(col(WeightFile.sha256).in_(wanted))))

    def read_weight_files(self, sha256s: Iterable[str]) -> dict[str, tuple[WeightFile, list[WeightTensor]]]:
        wanted = set(sha256s)
        if not wanted:
            return {}
        with self.session() as s:
            files = {f.sha256: f for f in s.exec(select(WeightFile).where(col(WeightFile.sha256).in_(wanted)))}
            tensors: dict[str, list[WeightTensor]] = {sha: [] for sha in files}
            query = (
                select(WeightTensor)
                .where(col(WeightTensor.weight_sha256).in_(wanted))
                .order_by(WeightTensor.weight_sha256, WeightTensor.name)
            )
            for tensor in s.exec(query):
                tensors[tensor.weight_sha256].append(tensor)
            return {sha: (files[sha], tensors[sha]) for sha in files}

    # -- revisions ---------------------------------------------------------------------------------

    def save_revision(
        self,
        new: NewRevision,
        watch_id: int | None = None,
        extra_writes: Iterable[ExtraWrite] = (),
        repo_meta: dict[str, Any] | None = None,
    ) -> Revision | None:
        """Write a revision with its files, new blobs and manifests, changes, estimate and events, and
        move the watch to it (with the repo's `repo_meta` as seen), all in one transaction: a crash leaves
        the whole revision or none of it. `extra_writes` add other modules' rows to the same transaction.

        Returns None when another writer stored the same revision first (two processes ingesting one
        commit at once): nothing of this copy is written and the watch is moved to the stored one."""
        try:
            return self._write_revision(new, watch_id, list(extra_writes), repo_meta)
        except IntegrityError:
            if not self.has_revision(new.repo_id, new.sha):
                raise
        if watch_id is not None:
            self.move_watch(watch_id, new.sha, repo_meta)
        return None

    def _write_revision(
        self,
        new: NewRevision,
        watch_id: int | None,
        extra_writes: list[ExtraWrite],
        repo_meta: dict[str, Any] | None,
    ) -> Revision:
        now = self.clock()
        with self.session() as s:
            revision = Revision(
                repo_id=new.repo_id,
                sha=new.sha,
                parent_sha=new.parent_sha,
                branch=new.branch,
                committed_at=new.committed_at,
                title=new.title,
                message=new.message,
                authors=list(new.authors),
                ingested_at=now,
                is_baseline=new.is_baseline,
                file_count=len(new.files),
            )
            s.add(revision)
            s.flush()
            assert revision.id is not None
            blobs.add_blobs(s, new.blobs)
            self._add_weight_files(s, new.weight_files, now)
            s.add_all(
                RevisionFile(
                    revision_id=revision.id,
                    path=f.path,
                    oid=f.oid,
                    size=f.size,
                    lfs_sha256=f.lfs_sha256,
                    lfs_size=f.lfs_size,
                    kind=f.kind,
                    held=f.held,
                    note=f.note,
                )
                for f in new.files
            )
            s.add_all(
                ChangeRecord(
                    revision_id=revision.id,
                    ordinal=i,
                    kind=c.kind,
                    path=c.path,
                    summary=c.summary,
                    severity=c.severity,
                    structural=c.structural,
                    security=c.security,
                    detail=c.detail,
                )
                for i, c in enumerate(new.changes)
            )
            summaries.add_revision(s, revision, len(new.changes))
            write_events(s, new.repo_id, new.events, now, revision_id=revision.id, sha=new.sha, skip_stored=False)
            if new.estimate is not None:
                s.add(
                    EstimateRecord(
                        revision_id=revision.id,
                        created_at=now,
                        parameters_total=new.estimate.parameters_total,
                        result=new.estimate.result,
                        error=new.estimate.error,
                    )
                )
            for write in extra_writes:
                write(s, revision)
            if watch_id is not None:
                watch = s.get(Watch, watch_id)
                if watch is not None:
                    watch.last_sha = new.sha
                    if repo_meta is not None:
                        watch.repo_meta = repo_meta
                    s.add(watch)
            s.commit()
            return revision

    def add_event(self, repo_id: str, event: NewEvent, revision_id: int | None = None, sha: str | None = None) -> bool:
        """Record an event not tied to a new revision (a repo made private, an advisory published).
        Returns False when an event with that id exists already (events are never rewritten)."""
        with self.session() as s:
            written = write_events(s, repo_id, [event], self.clock(), revision_id=revision_id, sha=sha)
            s.commit()
            return bool(written)

    def latest_estimate(self, repo_id: str, before_revision_id: int | None = None) -> tuple[Revision, EstimateRecord] | None:
        """The newest stored estimate of a repo (optionally: of a revision older than the given one)."""
        with self.session() as s:
            query = (
                select(Revision, EstimateRecord)
                .join(EstimateRecord, EstimateRecord.revision_id == Revision.id)
                .where(Revision.repo_id == repo_id)
                .order_by(col(Revision.committed_at).desc(), col(Revision.id).desc())
            )
            if before_revision_id is not None:
                query = query.where(Revision.id != before_revision_id)
            row = s.exec(query).first()
            return None if row is None else (row[0], row[1])

    def estimate_for(self, revision_id: int) -> EstimateRecord | None:
        with self.session() as s:
            return s.get(EstimateRecord, revision_id)

    def move_watch(self, watch_id: int, sha: str, repo_meta: dict[str, Any] | None = None) -> None:
        """Point a watch at an already-stored revision (another branch ingested it first)."""
        with self.session() as s:
            watch = s.get(Watch, watch_id)
            if watch is None:
                return
            watch.last_sha = sha
            if repo_meta is not None:
                watch.repo_meta = repo_meta
            s.add(watch)
            s.commit()

    @staticmethod
    def _add_weight_files(s: Session, weight_files: list[NewWeightFile], now: datetime) -> None:
        if not weight_files:
            return
        shas = {w.sha256 for w in weight_files}
        present = set(s.exec(select(WeightFile.sha256).where(col(WeightFile.sha256).in_(shas))))
        fresh = list({w.sha256: w for w in weight_files if w.sha256 not in present}.values())
        # as blobs: another worker may be storing the same weight file (a fork's, a re-upload's) right now
        insert_new(s, WeightFile.__table__, [  # type: ignore[attr-defined]
            {"sha256": w.sha256, "tensor_count": len(w.tensors), "parameters": sum(t.parameters for t in w.tensors),
             "file_metadata": w.metadata, "error": w.error, "read_at": now} for w in fresh], key=lambda row: row["sha256"])
        insert_new(s, WeightTensor.__table__, [  # type: ignore[attr-defined]
            {"weight_sha256": w.sha256, "name": t.name, "dtype": t.dtype, "shape": list(t.shape), "parameters": t.parameters}
            for w in fresh for t in w.tensors], key=lambda row: (row["weight_sha256"], row["name"]))

    def has_revision(self, repo_id: str, sha: str) -> bool:
        with self.session() as s:
            query = select(Revision.id).where(Revision.repo_id == repo_id, Revision.sha == sha)
            return s.exec(query).first() is not None

    def find_revision(self, repo_id: str, ref: str) -> Revision:
        """The stored revision named by a full sha or a unique prefix of at least 4 characters."""
        ref = ref.strip().lower()
        if len(ref) < 4 or any(ch not in "0123456789abcdef" for ch in ref):
            raise RevisionNotStored(f"{ref!r} is not a commit sha (at least 4 hex characters)")
        with self.session() as s:
            query = (
                select(Revision)
                .where(Revision.repo_id == repo_id, col(Revision.sha).startswith(ref))
                .limit(2)
            )
            found = list(s.exec(query))
        if not found:
            raise RevisionNotStored(f"no stored revision of {repo_id} matches {ref}")
        if len(found) > 1:
            raise AmbiguousRevision(f"{ref} matches several revisions of {repo_id}: give more characters")
        return found[0]

    def revision_at(self, repo_id: str, ref: str | None) -> Revision:
        """The revision `ref` names (see `find_revision`), or the newest stored one when `ref` is None."""
        if ref is not None:
            return self.find_revision(repo_id, ref)
        newest = self.list_revisions(repo_id, limit=1)
        if not newest:
            raise RevisionNotStored(f"no stored revision of {repo_id} (watch it and poll: hubwatch watch add {repo_id})")
        return newest[0]

    def list_revisions(self, repo_id: str, limit: int | None = None, offset: int = 0) -> list[Revision]:
        """Revisions of a repo, newest ingested history first."""
        with self.session() as s:
            query = (
                select(Revision)
                .where(Revision.repo_id == repo_id)
                .order_by(col(Revision.committed_at).desc(), col(Revision.id).desc())
                .offset(offset)
            )
            if limit is not None:
                query = query.limit(limit)
            return list(s.exec(query))

    def revision_files(self, revision_id: int) -> list[RevisionFile]:
        with self.session() as s:
            query = select(RevisionFile).where(RevisionFile.revision_id == revision_id).order_by(RevisionFile.path)
            return list(s.exec(query))

    def changes_by_revision(self, revision_ids: Iterable[int]) -> dict[int, list[ChangeRecord]]:
        ids = set(revision_ids)
        out: dict[int, list[ChangeRecord]] = {rid: [] for rid in ids}
        if not ids:
            return out
        with self.session() as s:
            query = (
                select(ChangeRecord)
                .where(col(ChangeRecord.revision_id).in_(ids))
                .order_by(ChangeRecord.revision_id, ChangeRecord.ordinal)
            )
            for change in s.exec(query):
                out[change.revision_id].append(change)
        return out

    def list_events(self, repo_id: str | None = None, limit: int = 100) -> list[Event]:
        with self.session() as s:
            query = select(Event).order_by(col(Event.seq).desc()).limit(limit)
            if repo_id is not None:
                query = query.where(Event.repo_id == repo_id)
            return list(s.exec(query))

    def repo_ids(self) -> list[str]:
        """Every repo with stored history, by id (read from the summaries, not the revisions)."""
        with self.session() as s:
            query = select(RepoSummaryRow.repo_id).where(col(RepoSummaryRow.revisions) > 0).order_by(RepoSummaryRow.repo_id)
            return list(s.exec(query))

    def repo_watches(self, repo_id: str) -> list[Watch]:
        """The watches of one repo, by branch (an index lookup, not the whole watch list)."""
        with self.session() as s:
            return list(s.exec(select(Watch).where(Watch.repo_id == repo_id).order_by(Watch.branch)))
