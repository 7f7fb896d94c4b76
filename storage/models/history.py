"""The history: revisions and their files, blobs, weight manifests, changes, estimates, per-repo summaries,
and the events announcing them (stores: storage/history.py, blobs.py, summaries.py, event_log.py,
read_model.py). Every foreign key here names a table of this module."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field

from storage.models.base import Table, _bigint, _json, _utc


class Revision(Table, table=True):
    """One ingested commit of a repo."""

    __tablename__ = "revision"
    __table_args__ = (
        sa.UniqueConstraint("repo_id", "sha", name="uq_revision_repo_sha"),
        sa.Index("ix_revision_repo_committed", "repo_id", "committed_at", "id"),  # a repo's history, newest first
    )

    id: int | None = Field(default=None, primary_key=True)
    repo_id: str = Field(max_length=200)
    sha: str = Field(max_length=40, index=True)
    parent_sha: str | None = Field(default=None, max_length=40)  # the revision it was diffed against
    branch: str = Field(default="main", max_length=200)
    committed_at: datetime = _utc()
    title: str = ""
    message: str = ""
    authors: list[str] = _json()
    ingested_at: datetime = _utc()
    is_baseline: bool = False
    file_count: int = 0


class Blob(Table, table=True):
    """Content-addressed file bytes, keyed by git blob oid, stored compressed."""

    __tablename__ = "blob"

    oid: str = Field(primary_key=True, max_length=40)
    size: int = _bigint()
    encoding: str = Field(default="zlib", max_length=10)
    data: bytes = Field(sa_column=sa.Column(sa.LargeBinary(), nullable=False))


class RevisionFile(Table, table=True):
    """One file of an ingested revision's tree."""

    __tablename__ = "revision_file"

    revision_id: int = Field(foreign_key="revision.id", primary_key=True, ondelete="CASCADE")
    path: str = Field(primary_key=True, max_length=1000)
    oid: str = Field(max_length=40)
    size: int = _bigint()
    lfs_sha256: str | None = Field(default=None, max_length=64, index=True)
    lfs_size: int | None = _bigint(nullable=True)
    kind: str = Field(max_length=20, index=True)
    held: bool = False  # whether the blob store holds its bytes
    note: str | None = None  # why its bytes are not held (too large, missing upstream)


class WeightFile(Table, table=True):
    """A weight file's header, read once per distinct sha256."""

    __tablename__ = "weight_file"

    sha256: str = Field(primary_key=True, max_length=64)
    tensor_count: int = 0
    parameters: int = _bigint()
    file_metadata: dict[str, Any] | None = _json(nullable=True)
    error: str | None = None
    read_at: datetime = _utc()


class WeightTensor(Table, table=True):
    """One tensor of a weight file's manifest."""

    __tablename__ = "weight_tensor"

    weight_sha256: str = Field(foreign_key="weight_file.sha256", primary_key=True, ondelete="CASCADE")
    name: str = Field(primary_key=True, max_length=500)
    dtype: str = Field(max_length=16)
    shape: list[int] = _json()
    parameters: int = _bigint()


class FileScan(Table, table=True):
    """What a format reader learned from one file's bytes (a GGUF header, a pickle's imports), read once per
    distinct content id (LFS sha256) however many revisions or repos carry the file. `scanned_oid` names the
    bytes it read, kept in the blob store so a later version of the rules can judge them again."""

    __tablename__ = "file_scan"

    content_id: str = Field(primary_key=True, max_length=64)
    format: str = Field(max_length=20)  # "gguf", "pickle"
    result: dict[str, Any] = _json()
    rules_version: str | None = Field(default=None, max_length=40)  # the rules that gave a verdict (pickle)
    bytes_read: int = _bigint()
    note: str | None = None  # what could not be read (a bad header, over the cap), in words
    scanned_oid: str | None = Field(default=None, max_length=40)
    read_at: datetime = _utc()


class ChangeRecord(Table, table=True):
    """One change of a revision against its parent."""

    __tablename__ = "change"

    id: int | None = Field(default=None, primary_key=True)
    revision_id: int = Field(foreign_key="revision.id", index=True, ondelete="CASCADE")
    ordinal: int = 0
    kind: str = Field(max_length=20, index=True)
    path: str = Field(max_length=1000)
    summary: str
    severity: str = Field(max_length=10)
    structural: bool = False
    security: bool = Field(default=False, index=True)
    detail: dict[str, Any] = _json()


class Event(Table, table=True):
    """Something to announce (a revision ingested, a history rewrite...). `event_id` never changes."""

    __tablename__ = "event"
    __table_args__ = (  # feeds read the newest events of a filter by (column, seq): no sort, no scan
        sa.Index("ix_event_repo_seq", "repo_id", "seq"),
        sa.Index("ix_event_security_seq", "security", "seq"),
        sa.Index("ix_event_revision_id", "revision_id"),
    )

    seq: int | None = Field(default=None, primary_key=True)
    event_id: str = Field(max_length=64, unique=True)
    kind: str = Field(max_length=40, index=True)
    repo_id: str = Field(max_length=200)
    revision_id: int | None = Field(default=None, foreign_key="revision.id", ondelete="CASCADE")
    sha: str | None = Field(default=None, max_length=40)
    title: str
    severity: str = Field(max_length=10)
    security: bool = False
    created_at: datetime = _utc(index=True)
    payload: dict[str, Any] = _json()


class RepoSummaryRow(Table, table=True):
    """One repo's history in a row, kept by storage.summaries in the transaction of every revision and
    event write: what the repo list, the home page and the metrics read instead of whole tables."""

    __tablename__ = "repo_summary"

    repo_id: str = Field(primary_key=True, max_length=200)
    revisions: int = 0
    changes: int = 0
    events: int = 0
    latest_revision_id: int | None = None  # the newest by (committed_at, id), as the history lists them
    latest_sha: str | None = Field(default=None, max_length=40)
    last_committed_at: datetime | None = _utc(nullable=True)
    last_ingested_at: datetime | None = _utc(nullable=True)


class EstimateRecord(Table, table=True):
    """The estimator's answer for one revision (rerun when its structure changed, or on the first)."""

    __tablename__ = "estimate"

    revision_id: int = Field(foreign_key="revision.id", primary_key=True, ondelete="CASCADE")
    created_at: datetime = _utc()
    parameters_total: int | None = _bigint(nullable=True)
    result: dict[str, Any] | None = _json(nullable=True)  # the estimate as JSON (estimator's to_dict)
    error: str | None = None  # why no estimate could be made (bad or missing config)
