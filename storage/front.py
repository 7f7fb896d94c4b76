"""The front door of storage: every store, built once over one engine and one clock.

    storage = Storage.open(settings.database_url, clock)   # engine made, schema migrated
    storage = Storage(engine, clock)                        # over an engine already made
    storage.watches.add_watch(...); storage.history.save_revision(...)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa

from storage.advisories import AdvisoryStore
from storage.budget import BudgetStore
from storage.db import create_db_engine, migrate
from storage.history import HistoryStore
from storage.leases import LeaseStore
from storage.listing_state import ListingStore
from storage.outbox import OutboxStore
from storage.read_model import ReadModel
from storage.sessions import Clock, utc_now
from storage.subscription_store import SubscriptionStore
from storage.watches import WatchStore


@dataclass(frozen=True, eq=False)
class Storage:
    """The stores of one database. Each is a thin object over `engine` and `clock`: building them all
    costs nothing, and every caller shares the same ones."""

    engine: sa.Engine
    clock: Clock = utc_now
    watches: WatchStore = field(init=False)  # watches and their poll bookkeeping
    history: HistoryStore = field(init=False)  # revisions, blobs, weight manifests, changes, estimates, events
    read_model: ReadModel = field(init=False)  # what pages, feeds and the API read
    advisories: AdvisoryStore = field(init=False)  # advisory facts, OSV records, links, re-check state
    listing: ListingStore = field(init=False)  # author watches and listing high-water marks
    budget: BudgetStore = field(init=False)  # the Hub request budget the processes share
    leases: LeaseStore = field(init=False)  # watch and periodic-job leases of shared polling
    subscriptions: SubscriptionStore = field(init=False)  # outbound webhook subscriptions
    outbox: OutboxStore = field(init=False)  # their deliveries: claims, attempts, the delivery log

    def __post_init__(self) -> None:
        for name, store in (
            ("watches", WatchStore), ("history", HistoryStore), ("read_model", ReadModel),
            ("advisories", AdvisoryStore), ("listing", ListingStore), ("budget", BudgetStore),
            ("leases", LeaseStore), ("subscriptions", SubscriptionStore), ("outbox", OutboxStore),
        ):
            object.__setattr__(self, name, store(self.engine, self.clock))

    @classmethod
    def open(cls, url: str, clock: Clock = utc_now) -> Storage:
        """The database at `url`, its schema brought to the newest migrations (StorageError when it
        cannot be opened or migrated)."""
        engine = create_db_engine(url)
        migrate(engine)
        return cls(engine, clock)
