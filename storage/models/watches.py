"""What is watched: watches (with the outcome of their last poll), author watches and the listing's high-water
marks (stores: storage/watches.py, listing_state.py). No foreign keys; with the subscriptions, the tables
`hubwatch watch list` needs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field

from storage.models.base import Table, _json, _utc


class Watch(Table, table=True):
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
    # What the Hub did to the repo itself (storage/kinds.py REPO_STATES), from its last typed answer: the state,
    # since when, and its detail (the Hub's words, a gated mode, whether the token could tell). History:
    # RepoStateChange. Polls in a row that met the same bad state are `error_count`.
    repo_state: str = Field(default="active", max_length=20, sa_column_kwargs={"server_default": "active"})
    state_since: datetime | None = _utc(nullable=True)
    state_detail: dict[str, Any] | None = _json(nullable=True)
    # Shared polling (several workers on one database, tracker/polling/shared.py): when the watch is next due,
    # and which worker holds it until when. Unused by a process that schedules its own polls.
    next_poll_at: datetime | None = _utc(nullable=True, index=True)
    leased_by: str | None = Field(default=None, max_length=80)
    lease_until: datetime | None = _utc(nullable=True)


class AuthorWatch(Table, table=True):
    """`watch add 'ORG/*'`: every model of an author (org or user), including ones created later.
    The listing pass adds a Watch (source "author") for each of its models it has not seen yet."""

    __tablename__ = "author_watch"

    id: int | None = Field(default=None, primary_key=True)
    author: str = Field(max_length=100, unique=True)
    interval_s: int = 900
    source: str = Field(default="cli", max_length=20)
    created_at: datetime = _utc()
    last_listed_at: datetime | None = _utc(nullable=True)  # its last complete listing


class ListingState(Table, table=True):
    """The high-water mark of one listing scope ("*": every model; "author:ORG": one author's models):
    the newest lastModified a complete pass has seen, and the repos listed at exactly that time."""

    __tablename__ = "listing_state"

    scope: str = Field(primary_key=True, max_length=120)
    high_water_at: datetime | None = _utc(nullable=True)
    high_water_ids: list[str] = _json()
    passes: int = 0
    last_pass_at: datetime | None = _utc(nullable=True)
    last_error: str | None = None
    # Hub pages (of 1,000 models) its last pass read: what choosing between per-author passes and the pass
    # over every model weighs (tracker/polling/pass_choice.py). 0: not known yet.
    pages: int = Field(default=0, sa_column_kwargs={"server_default": "0"})


class RepoStateChange(Table, table=True):
    """One change of a watched repo's state (storage/kinds.py REPO_STATES), written with its event in the
    transaction that sets the watch's state: the history of what the Hub did to the repo."""

    __tablename__ = "repo_state_change"

    id: int | None = Field(default=None, primary_key=True)
    repo_id: str = Field(index=True, max_length=200)
    branch: str = Field(max_length=200)
    state: str = Field(max_length=20)
    previous: str = Field(max_length=20)
    detail: dict[str, Any] | None = _json(nullable=True)
    changed_at: datetime = _utc()
    event_id: str | None = Field(default=None, max_length=64)


class RepoAlias(Table, table=True):
    """A name a watched repo had before the Hub renamed it, and the name its history moved to
    (storage/renames.py): readers asked for the old name answer with the new one, while no history is under
    the old name again (a new repo created there is another repo, never merged)."""

    __tablename__ = "repo_alias"

    old_repo_id: str = Field(primary_key=True, max_length=200)
    repo_id: str = Field(index=True, max_length=200)  # the name its history is under now
    uid: str | None = Field(default=None, max_length=64)  # the Hub's `_id` of the repo, the same across renames
    moved_at: datetime = _utc()
