"""Webhook deliveries and the log of their attempts (stores: storage/delivery_queue.py, outbox.py)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field

# The ORM resolves a foreign key (on the metadata) when it first writes a row: the modules of the tables
# these foreign keys name are loaded with this one.
from storage.models import history, subscriptions  # noqa: F401 - delivery -> event, subscription
from storage.models.base import Table, _utc


class Delivery(Table, table=True):
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


class DeliveryAttempt(Table, table=True):
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
