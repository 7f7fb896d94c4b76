"""Wiring: settings -> database (migrated) -> store, Hub client and ingestor, shared by CLI and daemon.

Each part is built on first use and imports its stack then: a command that only reads the database
never loads the Hub client, the differs or the advisory service.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from storage.db import create_db_engine, migrate
from storage.errors import InvalidSubscription, StorageError
from storage.outbox import OutboxStore
from storage.sessions import Clock, utc_now
from storage.store import Store
from storage.subscription_store import SubscriptionStore
from tracker.config import Settings
from tracker.errors import ConfigError

if TYPE_CHECKING:
    from tracker.advisories.service import AdvisoryService
    from tracker.hub import HubClient
    from tracker.ingest import Ingestor
    from tracker.polling.poller import Poller


@dataclass
class App:
    settings: Settings
    clock: Clock = field(default=utc_now)

    @cached_property
    def store(self) -> Store:
        try:
            engine = create_db_engine(self.settings.database_url)
            migrate(engine)
        except StorageError as err:
            raise ConfigError(str(err)) from err
        store = Store(engine, clock=self.clock)
        store.sync_config_watches(
            (spec.repo, spec.branch, self.settings.interval_s(spec)) for spec in self.settings.watch
        )
        try:
            SubscriptionStore(engine, clock=self.clock).sync_config_subscriptions(self.settings.webhooks)
        except InvalidSubscription as err:
            raise ConfigError(f"{self.settings.source}: [[webhooks]]: {err}") from err
        return store

    @cached_property
    def subscriptions(self) -> SubscriptionStore:
        """Webhook subscriptions (the config's [[webhooks]] synced by `store`, the API's beside them)."""
        return SubscriptionStore(self.store.engine, clock=self.clock)

    @cached_property
    def outbox(self) -> OutboxStore:
        """The delivery log of outbound webhooks: due deliveries, attempts, redeliveries."""
        return OutboxStore(self.store.engine, clock=self.clock)

    @cached_property
    def hub(self) -> HubClient:
        from tracker.hub import HubClient

        return HubClient(self.settings.hub.endpoint, self.settings.hub_token, self.settings.hub.timeout_s)

    @cached_property
    def advisories(self) -> AdvisoryService:
        """OSV matches, loader advice and hubwatch's own advisories per revision."""
        from tracker.advisories.service import AdvisoryService

        return AdvisoryService.from_settings(self.settings, self.store, clock=self.clock)

    @cached_property
    def ingestor(self) -> Ingestor:
        from tracker.ingest import Ingestor

        return Ingestor(self.store, self.hub, self.settings, advisories=self.advisories)

    @cached_property
    def poller(self) -> Poller:
        """Polls: `hubwatch poll`'s pass over the watches and the schedulers' one watch at a time."""
        from tracker.polling.poller import Poller

        return Poller(self, self.settings.poll, self.clock)
