"""Wiring: settings -> database (migrated) -> store, Hub client and ingestor, shared by CLI and daemon."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

import structlog

from storage.errors import StorageError
from storage.db import create_db_engine, migrate
from storage.models import Watch
from storage.outbox import InvalidSubscription, OutboxStore
from storage.store import Clock, Store, utc_now
from tracker.advisories.service import AdvisoryService
from tracker.config import Settings
from tracker.errors import ConfigError, NotWatched
from tracker.hub import HubClient
from tracker.ingest import Ingestor, PollOutcome

log = structlog.get_logger(__name__)


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
            OutboxStore(engine, clock=self.clock).sync_config_subscriptions(self.settings.webhooks)
        except InvalidSubscription as err:
            raise ConfigError(f"{self.settings.source}: [[webhooks]]: {err}") from err
        return store

    @cached_property
    def outbox(self) -> OutboxStore:
        """Webhook subscriptions and the delivery log (the config's [[webhooks]] synced by `store`)."""
        return OutboxStore(self.store.engine, clock=self.clock)

    @cached_property
    def hub(self) -> HubClient:
        return HubClient(self.settings.hub.endpoint, self.settings.hub_token, self.settings.hub.timeout_s)

    @cached_property
    def advisories(self) -> AdvisoryService:
        """OSV matches, loader advice and hubwatch's own advisories per revision."""
        return AdvisoryService.from_settings(self.settings, self.store, clock=self.clock)

    @cached_property
    def ingestor(self) -> Ingestor:
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
        log.info(
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
            log.info("repo_poll_deferred", repo_id=repo_id, branch=branch, until=watch.next_retry_at.isoformat())
            return None
        return self.ingestor.poll(watch)
