"""Advisories: dependency facts per revision, OSV records and their links, hubwatch's own advisories, and
the re-check's state (store: storage/advisories.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field

# The ORM resolves a foreign key (on the metadata) when it first writes a row: the modules of the tables
# these foreign keys name are loaded with this one.
from storage.models import history  # noqa: F401 - revision_id -> revision.id
from storage.models.base import Table, _json, _utc


class RevisionFacts(Table, table=True):
    """The dependency facts of one revision, their diff against its parent, and its loader advice."""

    __tablename__ = "advisory_facts"

    revision_id: int = Field(foreign_key="revision.id", primary_key=True, ondelete="CASCADE")
    # The documents live in the content-addressed blob store: most revisions repeat their parent's.
    facts_oid: str = Field(max_length=40)
    advice_oid: str | None = Field(default=None, max_length=40)
    fact_changes: list[dict[str, Any]] = _json()
    checked_at: datetime = _utc()


class OsvRecord(Table, table=True):
    """An OSV record as last fetched, kept until OSV says it was modified."""

    __tablename__ = "osv_record"

    id: str = Field(primary_key=True, max_length=100)
    modified: str = Field(max_length=40)
    aliases: list[str] = _json()
    record: dict[str, Any] = _json()
    withdrawn: bool = False
    fetched_at: datetime = _utc()


class AdvisoryLink(Table, table=True):
    """An OSV advisory matching a package version a revision names."""

    __tablename__ = "advisory_link"

    revision_id: int = Field(foreign_key="revision.id", primary_key=True, ondelete="CASCADE")
    advisory_key: str = Field(primary_key=True, max_length=100, index=True)
    package: str = Field(primary_key=True, max_length=200)
    version: str = Field(default="", max_length=100)
    status: str = Field(max_length=20)  # affected | unknown | withdrawn
    reason: str | None = None
    verdict: str = Field(default="unclassified", max_length=20)  # repo | runtime | unclassified
    rule: str | None = Field(default=None, max_length=60)
    ids: list[str] = _json()
    modified: str = Field(default="", max_length=40)
    summary: str = ""
    checked_at: datetime = _utc()
    # An affected version is listed either way; one about other models is marked, with the reason.
    relevant: bool = Field(default=True, sa_column_kwargs={"server_default": sa.true()})
    relevance: str | None = None


class OwnAdvisory(Table, table=True):
    """An OSV record hubwatch published for a security-relevant change."""

    __tablename__ = "own_advisory"
    # What an OSV query matches on (storage/osv_index.py), all in the index: a batch of a thousand revisions joins
    # their ancestors to it without reading a record.
    __table_args__ = (sa.Index("ix_own_advisory_match", "repo_id", "sha", "fixed_sha", "last_affected_sha", "withdrawn",
                               "modified", "id"),)

    id: str = Field(primary_key=True, max_length=60)
    repo_id: str = Field(max_length=200, index=True)
    revision_id: int = Field(foreign_key="revision.id", index=True, ondelete="CASCADE")
    sha: str = Field(max_length=40)
    class_id: str = Field(max_length=40)
    severity: str = Field(max_length=20)
    record: dict[str, Any] = _json()
    published_at: datetime = _utc()
    modified_at: datetime = _utc()
    fixed_sha: str | None = Field(default=None, max_length=40)
    # Copies of the record's own values (storage/advisories.py `own_columns` writes all of them from the record):
    # its `modified`, whether it is withdrawn, and its range's `last_affected` commit.
    modified: str = Field(default="", max_length=40, sa_column_kwargs={"server_default": ""})
    withdrawn: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    last_affected_sha: str | None = Field(default=None, max_length=40)


class AdvisoryState(Table, table=True):
    """Which advisory (at which `modified`) a repo has been told about: the re-check's memory."""

    __tablename__ = "advisory_state"

    repo_id: str = Field(primary_key=True, max_length=200)
    advisory_key: str = Field(primary_key=True, max_length=100)
    modified: str = Field(max_length=40)
    first_seen_at: datetime = _utc()
    last_seen_at: datetime = _utc()
    # A digest of what a re-announcement is about (ranges, severity, aliases, withdrawal): a `modified`
    # that moves without it is stored silently. None: told before digests were kept.
    substance: str | None = Field(default=None, max_length=64)


class AdvisoryRecheck(Table, table=True):
    """The last re-check of a repo's head."""

    __tablename__ = "advisory_recheck"

    repo_id: str = Field(primary_key=True, max_length=200)
    revision_id: int | None = None
    checked_at: datetime = _utc()
    error: str | None = None


class AdvisoryPending(Table, table=True):
    """A revision whose OSV look-up failed (OSV down, malformed answer): asked again later."""

    __tablename__ = "advisory_pending"

    revision_id: int = Field(foreign_key="revision.id", primary_key=True, ondelete="CASCADE")
    reason: str
    marked_at: datetime = _utc()
    attempts: int = 1
    last_attempt_at: datetime = _utc()
