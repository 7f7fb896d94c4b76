"""Wiring: settings -> database (migrated) -> store, Hub client and ingestor, shared by CLI and daemon.

Each part is built on first use and imports its stack then: a command that only reads the database
never loads the Hub client, the differs or the advisory service.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from storage.db import create_db_engine, migrate
from storage.errors import InvalidSubscription, StorageError
from storage.outbox import OutboxStore
from storage.sessions import Clock, utc_now
from storage.store import Store
from storage.subscription_store import SubscriptionStore
from tracker.config import Settings
from tracker.errors import ConfigError, NotWatched

if TYPE_CHECKING:
    from storage.models import Watch
    from tracker.advisories.service import AdvisoryService
    from tracker.hub import HubClient
    from tracker.ingest import Ingestor, PollOutcome

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

    def watches_for(self, repo_ids: Iterable[str]) -> list[Watch]:
        """The watches of the named repos (all watches when none are named)."""
        watches = self.store.list_watches()
        wanted = list(repo_ids)
        if not wanted:
            return watches
        out = []
        for repo_id in wanted:
            matched = [w for w in watches if w.repo_id == repo_id]
            if not matched:
                raise NotWatched(f"{repo_id} is not watched (add it with: hubwatch watch add {repo_id})")
            out.extend(matched)
        return out

    def poll(self, repo_ids: Iterable[str] = (), backfill: int | None = None) -> list[PollOutcome]:
        """One ingest pass over the named watches (all when none are named); one summary log line."""
        outcomes = [self.ingestor.poll(w, backfill=backfill) for w in self.watches_for(repo_ids)]
        _log().info(
            "poll_finished",
            repos=len(outcomes),
            failed=sum(o.failed for o in outcomes),
            revisions=sum(len(o.revisions) for o in outcomes),
        )
        return outcomes

    def poll_if_due(self, repo_id: str, branch: str) -> PollOutcome | None:
        """The scheduler's job: poll unless the watch is backing off after errors."""
        watch = self.store.get_watch(repo_id, branch)
        if watch is None:
            return None
        if watch.next_retry_at is not None and watch.next_retry_at > self.clock():
            _log().info("repo_poll_deferred", repo_id=repo_id, branch=branch, until=watch.next_retry_at.isoformat())
            return None
        return self.ingestor.poll(watch)


def _log() -> Any:
    """structlog's logger, imported with the polling stack: commands that only read never load it."""
    import structlog

    return structlog.get_logger(__name__)
