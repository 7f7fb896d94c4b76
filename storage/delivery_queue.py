"""Queueing webhook deliveries: one Delivery row per (event, subscription), written with the event.

`enqueue` runs inside the transaction that writes the events (storage.event_log.write_events calls
it), so an event and its deliveries are committed together or not at all; the commit wakes the
dispatchers (storage/wakeups.py), which work through them with storage.outbox.OutboxStore.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import sqlalchemy as sa
from sqlmodel import Session, col, select

from storage.models import Delivery, Event, Subscription
from storage.subscriptions import matches
from storage.wakeups import signal_on_commit

_NAMESPACE = uuid.UUID("0b3c5d7e-2f41-4a6b-8c9d-1e2f3a4b5c6d")


def delivery_id(event_id: str, subscription_id: int) -> str:
    """The webhook-id: derived from the event and the subscription, so it never changes."""
    return "msg_" + uuid.uuid5(_NAMESPACE, f"{event_id}\n{subscription_id}").hex


def enqueue(session: Session, events: Iterable[Event]) -> int:
    """Add a pending Delivery for every enabled subscription each event matches, in the caller's
    session, so in the events' own transaction. Safe to call twice for the same events (a delivery
    that exists is not added again). Returns how many were added."""
    events = list(events)
    if not events:
        return 0
    subscriptions = list(session.exec(select(Subscription).where(col(Subscription.enabled).is_(True))))
    if not subscriptions:
        return 0
    if any(e.seq is None for e in events):
        session.flush()
    wanted: dict[str, Delivery] = {}
    for event in sorted(events, key=lambda e: e.seq or 0):
        for subscription in subscriptions:
            if not matches(subscription, event):
                continue
            assert subscription.id is not None and event.seq is not None
            did = delivery_id(event.event_id, subscription.id)
            wanted[did] = Delivery(
                id=did,
                subscription_id=subscription.id,
                event_seq=event.seq,
                event_id=event.event_id,
                status="pending",
                next_attempt_at=event.created_at,
                created_at=event.created_at,
            )
    if not wanted:
        return 0
    present = set(session.exec(select(Delivery.id).where(col(Delivery.id).in_(list(wanted)))))
    fresh = [d for did, d in wanted.items() if did not in present]
    session.add_all(fresh)
    if fresh:
        signal_on_commit(session)
    return len(fresh)


def switch_off(session: Session, subscription: Subscription, reason: str) -> None:
    """Disable a subscription in `session`: its pending deliveries become dead, with the reason."""
    subscription.enabled, subscription.disabled_reason, subscription.backoff_until = False, reason, None
    session.add(subscription)
    session.execute(
        sa.update(Delivery)
        .where(Delivery.subscription_id == subscription.id, Delivery.status == "pending")
        .values(status="dead", next_attempt_at=None, last_error=f"subscription disabled: {reason}")
    )
