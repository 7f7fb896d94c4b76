"""The front door of storage: every store, built once over one engine and one clock.

    storage = Storage.open(settings.database_url, clock)   # engine made, schema migrated
    storage = Storage(engine, clock)                        # over an engine already made
    storage.watches.add_watch(...); storage.history.save_revision(...)

Each store is built, and its module (with the tables it reads) imported, on first use: `hubwatch watch list`
loads the watch-side stores and tables alone, never the history, outbox or advisory ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import sqlalchemy as sa

from storage.db import create_db_engine, migrate
from storage.sessions import Clock, utc_now

if TYPE_CHECKING:
    from storage.advisories import AdvisoryStore
    from storage.budget import BudgetStore
    from storage.derivatives import DerivativeStore
    from storage.history import HistoryStore
    from storage.leases import LeaseStore
    from storage.listing_state import ListingStore
    from storage.osv_index import OsvIndexStore
    from storage.outbox import OutboxStore
    from storage.read_model import ReadModel
    from storage.renames import RenameStore
    from storage.subscription_store import SubscriptionStore
    from storage.watches import WatchStore


@dataclass(frozen=True, eq=False)
class Storage:
    """The stores of one database. Each is a thin object over `engine` and `clock`, built on first use and
    shared by every caller after. (Two threads first using a store at once may each build one: a store holds
    nothing but the engine and the clock, so either serves.)"""

    engine: sa.Engine
    clock: Clock = utc_now

    @cached_property
    def watches(self) -> WatchStore:
        """Watches and their poll bookkeeping."""
        from storage.watches import WatchStore

        return WatchStore(self.engine, self.clock)

    @cached_property
    def history(self) -> HistoryStore:
        """Revisions, blobs, weight manifests, changes, estimates, events."""
        from storage.history import HistoryStore

        return HistoryStore(self.engine, self.clock)

    @cached_property
    def read_model(self) -> ReadModel:
        """What pages, feeds and the API read."""
        from storage.read_model import ReadModel

        return ReadModel(self.engine, self.clock)

    @cached_property
    def advisories(self) -> AdvisoryStore:
        """Advisory facts, OSV records, links, re-check state."""
        from storage.advisories import AdvisoryStore

        return AdvisoryStore(self.engine, self.clock)

    @cached_property
    def osv_index(self) -> OsvIndexStore:
        """Own records by id, repo and time, and the commit graph: what OSV queries and exports read."""
        from storage.osv_index import OsvIndexStore

        return OsvIndexStore(self.engine, self.clock)

    @cached_property
    def listing(self) -> ListingStore:
        """Author watches and listing high-water marks."""
        from storage.listing_state import ListingStore

        return ListingStore(self.engine, self.clock)

    @cached_property
    def budget(self) -> BudgetStore:
        """The Hub request budget the processes share."""
        from storage.budget import BudgetStore

        return BudgetStore(self.engine, self.clock)

    @cached_property
    def leases(self) -> LeaseStore:
        """Watch and periodic-job leases of shared polling."""
        from storage.leases import LeaseStore

        return LeaseStore(self.engine, self.clock)

    @cached_property
    def subscriptions(self) -> SubscriptionStore:
        """Outbound webhook subscriptions."""
        from storage.subscription_store import SubscriptionStore

        return SubscriptionStore(self.engine, self.clock)

    @cached_property
    def derivatives(self) -> DerivativeStore:
        """Followed families: the derivatives of a base and where each stands against it."""
        from storage.derivatives import DerivativeStore

        return DerivativeStore(self.engine, self.clock)

    @cached_property
    def renames(self) -> RenameStore:
        """The names renamed repos had, and the names their histories moved to."""
        from storage.renames import RenameStore

        return RenameStore(self.engine, self.clock)

    @cached_property
    def outbox(self) -> OutboxStore:
        """Their deliveries: claims, attempts, the delivery log."""
        from storage.outbox import OutboxStore

        return OutboxStore(self.engine, self.clock)

    @classmethod
    def open(cls, url: str, clock: Clock = utc_now) -> Storage:
        """The database at `url`, its schema brought to the newest migrations (StorageError when it
        cannot be opened or migrated)."""
        engine = create_db_engine(url)
        migrate(engine)
        return cls(engine, clock)
