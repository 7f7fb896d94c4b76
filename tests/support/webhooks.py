"""Webhook test doubles: the recording receiver (a real HTTP server on loopback), signing secrets, links,
and events and subscriptions written straight into a store."""

from __future__ import annotations

import base64

from feeds.webhooks import Links
from storage.event_log import NewEvent
from storage.front import Storage
from storage.models import Subscription
from storage.subscription_store import SubscriptionStore
from tracker.standins.receiver import Received, Receiver, Reply

__all__ = ["LINKS", "OLD_SECRET", "SECRET", "Received", "Receiver", "Reply", "emit", "refuse_dns", "subscribe"]

SECRET = "whsec_" + base64.b64encode(b"hubwatch-test-secret-0123456789").decode()
OLD_SECRET = "whsec_" + base64.b64encode(b"hubwatch-old-secret-9876543210!").decode()
LINKS = Links("https://huggingface.co", "https://hubwatch.example")


def refuse_dns(host: str, port: int) -> list[str]:
    """A resolver for dispatchers under test: the tests resolve no host names."""
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
