"""Webhook test doubles: a recording receiver (a real HTTP server on loopback), a fake clock, an outbox
over a migrated SQLite file, and a dispatcher wired to them."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from feeds.webhooks import Links
from feeds.webhooks.dispatcher import DeliveryOptions, Dispatcher
from feeds.webhooks.safety import Resolver
from storage.db import create_db_engine, migrate
from storage.event_log import NewEvent
from storage.front import Storage
from storage.models import Subscription
from storage.outbox import OutboxStore
from storage.subscription_store import SubscriptionStore
from tracker.standins.receiver import Received, Receiver, Reply

__all__ = ["Received", "Receiver", "Reply"]  # the tests import the receiver from here

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
SECRET = "whsec_" + base64.b64encode(b"hubwatch-test-secret-0123456789").decode()
OLD_SECRET = "whsec_" + base64.b64encode(b"hubwatch-old-secret-9876543210!").decode()


class FakeClock:
    """Time that moves only when a test says so."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


@pytest.fixture
def make_receiver() -> Iterator[Callable[[], Receiver]]:
    started: list[Receiver] = []

    def make() -> Receiver:
        receiver = Receiver().start()
        started.append(receiver)
        return receiver

    yield make
    for receiver in started:
        receiver.stop()


@pytest.fixture
def receiver(make_receiver: Callable[[], Receiver]) -> Receiver:
    return make_receiver()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(database_url: str, clock: FakeClock) -> Iterator[Storage]:
    engine = create_db_engine(database_url)
    migrate(engine)
    yield Storage(engine, clock=clock)
    engine.dispose()


@pytest.fixture
def outbox(store: Storage, clock: FakeClock) -> OutboxStore:
    return store.outbox


@pytest.fixture
def subscriptions(store: Storage, clock: FakeClock) -> SubscriptionStore:
    return store.subscriptions


LINKS = Links("https://huggingface.co", "https://hubwatch.example")


@pytest.fixture
def make_dispatcher(outbox: OutboxStore) -> Iterator[Callable[..., Dispatcher]]:
    """Dispatchers over the test outbox; loopback allowed (the receiver lives there), short time-outs.
    Their clock is the real one: it stamps webhook-timestamp, which receivers check against their own."""
    made: list[Dispatcher] = []

    def make(secrets: dict[str, str] | None = None, resolve: Resolver | None = None, **options: object) -> Dispatcher:
        opts = {"allow_private_targets": True, "timeout_s": 5.0, "connect_timeout_s": 2.0, **options}
        env = secrets or {}
        dispatcher = Dispatcher(
            outbox,
            DeliveryOptions(**opts),  # type: ignore[arg-type]
            secret_for=lambda sub: sub.secret or env.get(sub.secret_env or ""),
            links=LINKS,
            resolve=resolve or _no_dns,
        )
        made.append(dispatcher)
        return dispatcher

    yield make
    for dispatcher in made:
        dispatcher.close()


def _no_dns(host: str, port: int) -> list[str]:
    raise AssertionError(f"tests resolve no host names ({host})")


def emit(
    store: Storage,
    n: int = 1,
    repo_id: str = "org/model",
    severity: str = "warning",
    kinds: tuple[str, ...] = ("chat_template",),
    kind: str = "revision.ingested",
    title: str = "model: chat template changed (warning)",
    commit_title: str = "Update tokenizer_config.json",
    summaries: tuple[str, ...] = ("chat template changed",),
) -> list[str]:
    """Record `n` standalone events (each one's deliveries are enqueued in its transaction); their ids."""
    ids = []
    for i in range(n):
        event_id = f"ev-{repo_id}-{kind}-{len(store.history.list_events(limit=10_000))}-{i}"
        payload = {"commit_title": commit_title, "baseline": False, "kinds": list(kinds), "summaries": list(summaries)}
        store.history.add_event(repo_id, NewEvent(event_id, kind, title, severity, False, payload), sha=f"{i:040x}")
        ids.append(event_id)
    return ids


def subscribe(subscriptions: SubscriptionStore, url: str, fmt: str = "generic", **kwargs: object) -> Subscription:
    """An API subscription straight into the store (loopback URLs: the receiver is local)."""
    kwargs.setdefault("secret", SECRET if fmt == "generic" else None)
    kwargs.setdefault("min_severity", "info")
    return subscriptions.add_subscription(url, fmt, **kwargs)  # type: ignore[arg-type]
