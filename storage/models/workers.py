"""What the worker processes of one database share: the Hub request budget, and the leases of periodic jobs
(stores: storage/budget.py, leases.py; the leases of watches are columns of the watch table)."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field

from storage.models.base import Table, _utc


class HubBudgetWindow(Table, table=True):
    """The Hub request budget shared by every process on this database: per pool ("api", "resolvers"),
    the current 5-minute window and how many of its requests the processes have claimed."""

    __tablename__ = "hub_budget"

    pool: str = Field(primary_key=True, max_length=20)
    window_ends_at: datetime | None = _utc(nullable=True)
    used: int = 0


class JobLease(Table, table=True):
    """A periodic job that one worker of a database runs at a time (the listing pass, the OSV re-check):
    who holds it until when, and when it last ran, so that N workers run it once an interval, not N times."""

    __tablename__ = "job_lease"

    name: str = Field(primary_key=True, max_length=60)
    holder: str | None = Field(default=None, max_length=80)
    lease_until: datetime | None = _utc(nullable=True)
    last_run_at: datetime | None = _utc(nullable=True)
