"""Wiring: settings -> database (migrated) -> its stores, Hub client and ingestor, shared by CLI and daemon.

Each part is built on first use and imports its stack then: a command that only reads the database
never loads the Hub client, the differs or the advisory service.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from storage.errors import InvalidSubscription, StorageError
from storage.front import Storage
from storage.sessions import Clock, utc_now
from tracker.config import Settings
from tracker.errors import ConfigError

if TYPE_CHECKING:
    from tracker.advisories.service import AdvisoryService
    from tracker.hub.client import HubClient
    from tracker.pipeline.ingest import Ingestor
    from tracker.polling.poller import Poller


@dataclass
class App:
    settings: Settings
    clock: Clock = field(default=utc_now)

    @cached_property
    def store(self) -> Storage:
        """Every store of the database (migrated on first use), with the config's watches and [[webhooks]] synced."""
        try:
            store = Storage.open(self.settings.database_url, clock=self.clock)
        except StorageError as err:
            raise ConfigError(str(err)) from err
        store.watches.sync_config_watches(
            (spec.key, spec.branch, self.settings.interval_s(spec)) for spec in self.settings.watch
        )
        follows = [(spec.key, spec.derivatives, spec.derivatives_limit) for spec in self.settings.watch if spec.derivatives]
        if follows:
            store.derivatives.sync_config_follows(follows)
        try:
            store.subscriptions.sync_config_subscriptions(self.settings.webhooks)
        except InvalidSubscription as err:
            raise ConfigError(f"{self.settings.source}: [[webhooks]]: {err}") from err
        return store

    @cached_property
    def hub(self) -> HubClient:
        from tracker.hub.client import HubClient

        return HubClient(self.settings.hub.endpoint, self.settings.hub_token, self.settings.hub.timeout_s)

    @cached_property
    def advisories(self) -> AdvisoryService:
        """OSV matches, loader advice and hubwatch's own advisories per revision."""
        from tracker.advisories.service import AdvisoryService

        return AdvisoryService.from_settings(self.settings, self.store, clock=self.clock)

    @cached_property
    def ingestor(self) -> Ingestor:
        from tracker.pipeline.ingest import Ingestor

        return Ingestor(self.store, self.hub, self.settings, advisories=self.advisories)

    @cached_property
    def poller(self) -> Poller:
        """Polls: `hubwatch poll`'s pass over the watches and the schedulers' one watch at a time."""
        from tracker.polling.poller import Poller

        return Poller(self, self.settings.poll, self.clock)

    def follow_derivatives(self, repo_id: str) -> None:
        """A base's followed derivatives checked after its own poll (the poller calls this; it never imports
        the family room above it)."""
        from tracker.family.derivatives import run_follow

        run_follow(self.store, self.ingestor, repo_id)
