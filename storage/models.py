"""Every table, in one place (Alembic's env reads them from here). Every change to them comes with an Alembic
migration (storage/migrations/versions); the stores that read and write them are the other storage modules."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from storage.types import UTCDateTime

MAX_URL_LENGTH = 2000  # of a webhook subscription's URL


def _utc(nullable: bool = False, index: bool = False) -> Any:
    return Field(default=None, sa_column=sa.Column(UTCDateTime(), nullable=nullable, index=index))


def _json(nullable: bool = False) -> Any:
    return Field(default=None, sa_column=sa.Column(sa.JSON(), nullable=nullable))


def _bigint(nullable: bool = False) -> Any:
    return Field(default=None, sa_column=sa.Column(sa.BigInteger(), nullable=nullable))


class Watch(SQLModel, table=True):
    """A repo branch hubwatch polls, with the outcome of its last poll."""

    __tablename__ = "watch"
    __table_args__ = (sa.UniqueConstraint("repo_id", "branch", name="uq_watch_repo_branch"),)

    id: int | None = Field(default=None, primary_key=True)
    repo_id: str = Field(index=True, max_length=200)
    branch: str = Field(default="main", max_length=200)
    interval_s: int = 900
    source: str = Field(default="cli", max_length=20)  # config | cli | api
    backfill: int = 0
    created_at: datetime = _utc()
    last_sha: str | None = Field(default=None, max_length=40)
    repo_meta: dict[str, Any] | None = _json(nullable=True)  # private/gated as last seen
    last_polled_at: datetime | None = _utc(nullable=True)
    last_ok_at: datetime | None = _utc(nullable=True)
    last_error: str | None = None
    error_count: int = 0
    next_retry_at: datetime | None = _utc(nullable=True)
    # Shared polling (several workers on one database, tracker/polling/shared.py): when the watch is next due,
    # and which worker holds it until when. Unused by a process that schedules its own polls.
    next_poll_at: datetime | None = _utc(nullable=True, index=True)
    leased_by: str | None = Field(default=None, max_length=80)
    lease_until: datetime | None = _utc(nullable=True)


class Revision(SQLModel, table=True):
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


class Blob(SQLModel, table=True):
    """Content-addressed file bytes, keyed by git blob oid, stored compressed."""

    __tablename__ = "blob"

    oid: str = Field(primary_key=True, max_length=40)
    size: int = _bigint()
    encoding: str = Field(default="zlib", max_length=10)
    data: bytes = Field(sa_column=sa.Column(sa.LargeBinary(), nullable=False))


class RevisionFile(SQLModel, table=True):
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


class WeightFile(SQLModel, table=True):
    """A weight file's header, read once per distinct sha256."""

    __tablename__ = "weight_file"

    sha256: str = Field(primary_key=True, max_length=64)
    tensor_count: int = 0
    parameters: int = _bigint()
    file_metadata: dict[str, Any] | None = _json(nullable=True)
    error: str | None = None
    read_at: datetime = _utc()


class WeightTensor(SQLModel, table=True):
    """One tensor of a weight file's manifest."""

    __tablename__ = "weight_tensor"

    weight_sha256: str = Field(foreign_key="weight_file.sha256", primary_key=True, ondelete="CASCADE")
    name: str = Field(primary_key=True, max_length=500)
    dtype: str = Field(max_length=16)
    shape: list[int] = _json()
    parameters: int = _bigint()


class ChangeRecord(SQLModel, table=True):
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


class Event(SQLModel, table=True):
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


class RepoSummaryRow(SQLModel, table=True):
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


class EstimateRecord(SQLModel, table=True):
    """The estimator's answer for one revision (rerun when its structure changed, or on the first)."""

    __tablename__ = "estimate"

    revision_id: int = Field(foreign_key="revision.id", primary_key=True, ondelete="CASCADE")
    created_at: datetime = _utc()
    parameters_total: int | None = _bigint(nullable=True)
    result: dict[str, Any] | None = _json(nullable=True)  # the estimate as JSON (estimator's to_dict)
    error: str | None = None  # why no estimate could be made (bad or missing config)


class AuthorWatch(SQLModel, table=True):
    """`watch add 'ORG/*'`: every model of an author (org or user), including ones created later.
    The listing pass adds a Watch (source "author") for each of its models it has not seen yet."""

    __tablename__ = "author_watch"

    id: int | None = Field(default=None, primary_key=True)
    author: str = Field(max_length=100, unique=True)
    interval_s: int = 900
    source: str = Field(default="cli", max_length=20)
    created_at: datetime = _utc()
    last_listed_at: datetime | None = _utc(nullable=True)  # its last complete listing


class ListingState(SQLModel, table=True):
    """The high-water mark of one listing scope ("*": every model; "author:ORG": one author's models):
    the newest lastModified a complete pass has seen, and the repos listed at exactly that time."""

    __tablename__ = "listing_state"

    scope: str = Field(primary_key=True, max_length=120)
    high_water_at: datetime | None = _utc(nullable=True)
    high_water_ids: list[str] = _json()
    passes: int = 0
    last_pass_at: datetime | None = _utc(nullable=True)
    last_error: str | None = None


class HubBudgetWindow(SQLModel, table=True):
    """The Hub request budget shared by every process on this database: per pool ("api", "resolvers"),
    the current 5-minute window and how many of its requests the processes have claimed."""

    __tablename__ = "hub_budget"

    pool: str = Field(primary_key=True, max_length=20)
    window_ends_at: datetime | None = _utc(nullable=True)
    used: int = 0


class JobLease(SQLModel, table=True):
    """A periodic job that one worker of a database runs at a time (the listing pass, the OSV re-check):
    who holds it until when, and when it last ran, so that N workers run it once an interval, not N times."""

    __tablename__ = "job_lease"

    name: str = Field(primary_key=True, max_length=60)
    holder: str | None = Field(default=None, max_length=80)
    lease_until: datetime | None = _utc(nullable=True)
    last_run_at: datetime | None = _utc(nullable=True)


# -- webhook subscriptions and their deliveries (storage/outbox.py) --------------------


class Subscription(SQLModel, table=True):
    """Where to send events, in which format, and which events (repo globs, kinds, minimum severity)."""

    __tablename__ = "subscription"
    __table_args__ = {"sqlite_autoincrement": True}  # ids are never reused: they go into webhook-ids

    id: int | None = Field(default=None, primary_key=True)
    url: str = Field(max_length=MAX_URL_LENGTH, repr=False)  # Slack, Discord and Apprise URLs hold tokens
    format: str = Field(default="generic", max_length=10)
    secret_env: str | None = Field(default=None, max_length=200)  # config: the variable's name
    secret: str | None = Field(default=None, max_length=1000, repr=False)  # api: the secret itself
    repos: list[str] = _json()
    kinds: list[str] = _json()
    min_severity: str = Field(default="notice", max_length=10)
    source: str = Field(default="api", max_length=10)  # config | api
    enabled: bool = True
    disabled_reason: str | None = None
    created_at: datetime = _utc()
    backoff_until: datetime | None = _utc(nullable=True)  # the endpoint failed: hold its deliveries
    removed_at: datetime | None = _utc(nullable=True)  # removed: listed no more, its delivery log kept
    # The dispatcher worker sending this endpoint's deliveries now, and until when its claim holds
    # without a heartbeat (storage.outbox: one worker per endpoint, so deliveries leave in order).
    claimed_by: str | None = Field(default=None, max_length=64)
    claimed_until: datetime | None = _utc(nullable=True)


class Delivery(SQLModel, table=True):
    """One event for one subscription. `id` is the Standard Webhooks `webhook-id`: the same on every try."""

    __tablename__ = "delivery"
    __table_args__ = (sa.Index("ix_delivery_due", "status", "next_attempt_at"),)

    id: str = Field(primary_key=True, max_length=40)
    subscription_id: int = Field(foreign_key="subscription.id", index=True, ondelete="CASCADE")
    event_seq: int = Field(foreign_key="event.seq", index=True, ondelete="CASCADE")
    event_id: str = Field(max_length=64)
    status: str = Field(default="pending", max_length=10)  # pending | delivered | failed | dead
    attempts: int = 0
    next_attempt_at: datetime | None = _utc(nullable=True)
    last_attempt_at: datetime | None = _utc(nullable=True)
    last_status_code: int | None = None
    last_error: str | None = None
    created_at: datetime = _utc(index=True)
    delivered_at: datetime | None = _utc(nullable=True)
    first_attempt_at: datetime | None = _utc(nullable=True)  # the retry window is measured from here
    retry_step: int = Field(default=0, sa_column_kwargs={"server_default": "0"})  # scheduled retries used


class DeliveryAttempt(SQLModel, table=True):
    """The log of every try of a delivery: when, what the receiver answered, what came of it. The row is
    written as `started` before the request goes out and completed after, so a try cut short by a crash
    is logged too: the worker that takes the endpoint over marks it `interrupted`."""

    __tablename__ = "delivery_attempt"

    id: int | None = Field(default=None, primary_key=True)
    delivery_id: str = Field(foreign_key="delivery.id", index=True, ondelete="CASCADE", max_length=40)
    attempt: int
    attempted_at: datetime = _utc()
    status_code: int | None = None
    error: str | None = None
    duration_ms: int = 0
    outcome: str = Field(max_length=12)  # started, then delivered | retry | failed | dead; or interrupted
    worker_id: str | None = Field(default=None, max_length=64)  # the dispatcher worker that made it


# -- advisories (storage/advisories.py) ------------------------------------------------


class RevisionFacts(SQLModel, table=True):
    """The dependency facts of one revision, their diff against its parent, and its loader advice."""

    __tablename__ = "advisory_facts"

    revision_id: int = Field(foreign_key="revision.id", primary_key=True, ondelete="CASCADE")
    # The documents live in the content-addressed blob store: most revisions repeat their parent's.
    facts_oid: str = Field(max_length=40)
    advice_oid: str | None = Field(default=None, max_length=40)
    fact_changes: list[dict[str, Any]] = _json()
    checked_at: datetime = _utc()


class OsvRecord(SQLModel, table=True):
    """An OSV record as last fetched, kept until OSV says it was modified."""

    __tablename__ = "osv_record"

    id: str = Field(primary_key=True, max_length=100)
    modified: str = Field(max_length=40)
    aliases: list[str] = _json()
    record: dict[str, Any] = _json()
    withdrawn: bool = False
    fetched_at: datetime = _utc()


class AdvisoryLink(SQLModel, table=True):
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


class OwnAdvisory(SQLModel, table=True):
    """An OSV record hubwatch published for a security-relevant change."""

    __tablename__ = "own_advisory"

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


class AdvisoryState(SQLModel, table=True):
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


class AdvisoryRecheck(SQLModel, table=True):
    """The last re-check of a repo's head."""

    __tablename__ = "advisory_recheck"

    repo_id: str = Field(primary_key=True, max_length=200)
    revision_id: int | None = None
    checked_at: datetime = _utc()
    error: str | None = None


class AdvisoryPending(SQLModel, table=True):
    """A revision whose OSV look-up failed (OSV down, malformed answer): asked again later."""

    __tablename__ = "advisory_pending"

    revision_id: int = Field(foreign_key="revision.id", primary_key=True, ondelete="CASCADE")
    reason: str
    marked_at: datetime = _utc()
    attempts: int = 1
    last_attempt_at: datetime = _utc()
