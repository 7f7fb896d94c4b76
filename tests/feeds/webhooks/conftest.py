"""Webhook fixtures: recording receivers, a fake clock, an outbox over a migrated database, and dispatchers
wired to them (the doubles themselves: tests/support/webhooks.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from feeds.webhooks.dispatcher import DeliveryOptions, Dispatcher
from feeds.webhooks.safety import Resolver
from storage.db import create_db_engine, migrate
from storage.front import Storage
from storage.outbox import OutboxStore
from storage.subscription_store import SubscriptionStore
from tests.support.clock import FakeClock
from tests.support.databases import premigrated
from tests.support.webhooks import LINKS, Receiver, refuse_dns


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
    engine = create_db_engine(premigrated(database_url))
    migrate(engine)
    yield Storage(engine, clock=clock)
    engine.dispose()


@pytest.fixture
def outbox(store: Storage, clock: FakeClock) -> OutboxStore:
    return store.outbox


@pytest.fixture
def subscriptions(store: Storage, clock: FakeClock) -> SubscriptionStore:
    return store.subscriptions


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
            resolve=resolve or refuse_dns,
        )
        made.append(dispatcher)
        return dispatcher

    yield make
    for dispatcher in made:
        dispatcher.close()
