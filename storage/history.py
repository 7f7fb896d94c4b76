"""The history: revisions with their files, content-addressed blobs and weight manifests, changes,
estimates and events. One revision is written in one transaction; callers get detached rows back."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from storage import blobs, summaries
from storage.errors import AmbiguousRevision, RevisionNotStored
from storage.event_log import NewEvent, order_event_writes, write_events
from storage.models import (
    Blob,
    ChangeRecord,
    EstimateRecord,
    Event,
    FileScan,
    RepoSummaryRow,
    Revision,
    RevisionFile,
    WeightFile,
    WeightTensor,
)
from storage.sessions import EngineStore, insert_new
from storage.types import scrub_nul
from storage.watches import point_watch


def _insert_rows(s: Session, table: sa.Table, rows: list[dict[str, Any]]) -> None:
    """One INSERT for many rows (executemany), each value NUL-free (see storage.types.scrub_nul)."""
    if rows:
        s.execute(sa.insert(table), [scrub_nul(row) for row in rows])


@dataclass(frozen=True)
class StoredManifest:
    """One stored weight file's header: its metadata, error and (name, dtype, shape) per tensor, by name."""

    metadata: dict[str, Any] | None
    error: str | None
    tensors: list[tuple[str, str, tuple[int, ...]]]


# Rows another storage module adds to a revision's transaction (given the session and the new revision).
ExtraWrite = Callable[[Session, "Revision"], None]


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
class NewFileScan:
    """A format reader's result for one file content (see tracker/formats); `scanned` are the bytes it read,
    stored in the blob store under `scanned_oid` (None when nothing worth keeping was read)."""

    content_id: str
    format: str
    result: dict[str, Any]
    bytes_read: int
    note: str | None = None
    rules_version: str | None = None
    scanned_oid: str | None = None


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
    file_scans: list[NewFileScan] = field(default_factory=list)  # their scanned bytes are among `blobs`


class HistoryStore(EngineStore):
    """Revisions, content-addressed blobs, weight manifests, changes, estimates and events."""

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
            with self.session() as s:
                point_watch(s, watch_id, new.sha, repo_meta)
                s.commit()
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
            order_event_writes(s)  # first: a revision's events commit in the order of their seqs
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
            self._add_file_scans(s, new.file_scans, now)
            # Core executemany, not ORM objects: a revision's files and changes are written, never read back
            # here (NULs scrubbed as the ORM's flush does for every row: PostgreSQL text cannot hold them).
            _insert_rows(s, RevisionFile.__table__, [  # type: ignore[attr-defined]
                {"revision_id": revision.id, "path": f.path, "oid": f.oid, "size": f.size, "lfs_sha256": f.lfs_sha256,
                 "lfs_size": f.lfs_size, "kind": f.kind, "held": f.held, "note": f.note} for f in new.files])
            _insert_rows(s, ChangeRecord.__table__, [  # type: ignore[attr-defined]
                {"revision_id": revision.id, "ordinal": i, "kind": c.kind, "path": c.path, "summary": c.summary,
                 "severity": c.severity, "structural": c.structural, "security": c.security, "detail": c.detail}
                for i, c in enumerate(new.changes)])
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
                point_watch(s, watch_id, new.sha, repo_meta)
            s.commit()
            return revision

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

    @staticmethod
    def _add_file_scans(s: Session, scans: list[NewFileScan], now: datetime) -> None:
        # content-addressed like weight manifests: a scan another writer stored first stands
        insert_new(s, FileScan.__table__, [  # type: ignore[attr-defined]
            {"content_id": f.content_id, "format": f.format, "result": f.result, "rules_version": f.rules_version,
             "bytes_read": f.bytes_read, "note": f.note, "scanned_oid": f.scanned_oid, "read_at": now}
            for f in {f.content_id: f for f in scans}.values()], key=lambda row: row["content_id"])

    def add_event(self, repo_id: str, event: NewEvent, revision_id: int | None = None, sha: str | None = None) -> bool:
        """Record an event not tied to a new revision (a repo made private, an advisory published).
        Returns False when an event with that id exists already (events are never rewritten)."""
        with self.session() as s:
            written = write_events(s, repo_id, [event], self.clock(), revision_id=revision_id, sha=sha)
            s.commit()
            return bool(written)

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

    def known_blobs(self, oids: Iterable[str]) -> set[str]:
        wanted = set(oids)
        if not wanted:
            return set()
        with self.session() as s:
            return set(s.exec(select(Blob.oid).where(col(Blob.oid).in_(wanted))))

    def read_blobs(self, oids: Iterable[str]) -> dict[str, bytes]:
        with self.session() as s:
            return blobs.read_blobs(s, oids)

    def read_file_scans(self, content_ids: Iterable[str]) -> dict[str, FileScan]:
        """The stored scans of these contents, by content id (contents never scanned are absent)."""
        wanted = set(content_ids)
        if not wanted:
            return {}
        with self.session() as s:
            return {f.content_id: f for f in s.exec(select(FileScan).where(col(FileScan.content_id).in_(wanted)))}

    def stale_file_scans(self, scan_format: str, rules_version: str) -> list[FileScan]:
        """The stored scans of one format judged by rules other than `rules_version` (to judge again)."""
        with self.session() as s:
            query = select(FileScan).where(FileScan.format == scan_format,
                                           sa.or_(col(FileScan.rules_version).is_(None), FileScan.rules_version != rules_version))
            return list(s.exec(query.order_by(FileScan.content_id)))

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

    def read_manifests(self, sha256s: Iterable[str]) -> dict[str, StoredManifest]:
        """The stored manifests of these weight files, as plain values (what `read_weight_files` gives, read by
        two Core selects: a large model's hundreds of tensors build no ORM objects)."""
        wanted = set(sha256s)
        if not wanted:
            return {}
        files, tensors = WeightFile.__table__.c, WeightTensor.__table__.c  # type: ignore[attr-defined]
        with self.engine.connect() as conn:
            found = conn.execute(sa.select(files.sha256, files.file_metadata, files.error).where(files.sha256.in_(wanted)))
            out = {sha: StoredManifest(metadata, error, []) for sha, metadata, error in found}
            query = (sa.select(tensors.weight_sha256, tensors.name, tensors.dtype, tensors.shape)
                     .where(tensors.weight_sha256.in_(wanted)).order_by(tensors.weight_sha256, tensors.name))
            for sha, name, dtype, shape in conn.execute(query):
                if sha in out:
                    out[sha].tensors.append((name, dtype, tuple(shape)))
        return out
