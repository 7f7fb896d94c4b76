"""Webhook subscriptions: where to send events and which ones (stores: storage/subscription_store.py; their
rules: storage/subscriptions.py). Synced from the config file by every command that opens the database."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field

from storage.models.base import MAX_URL_LENGTH, Table, _json, _utc


class Subscription(Table, table=True):
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
