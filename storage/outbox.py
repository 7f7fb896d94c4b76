"""The webhook outbox: one Delivery row per (event, subscription), written with the event, and its state machine.

`enqueue` runs inside the transaction that writes the events (storage.event_log.write_events calls
it), so an event and its deliveries are committed together or not at all. The dispatcher
(feeds/dispatcher.py) then works through due deliveries with `OutboxStore`: claim, send, mark.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, Session, SQLModel, col, select

from storage.errors import DeliveryNotFound, SubscriptionDisabled
from storage.models import Event, _utc
from storage.sessions import EngineStore
from storage.subscriptions import Subscription, matches, redact_url

STATUSES = ("pending", "delivered", "failed", "dead")

_NAMESPACE = uuid.UUID("0b3c5d7e-2f41-4a6b-8c9d-1e2f3a4b5c6d")


class Delivery(SQLModel, table=True):
    """One event for one subscription. `id` is the Standard Webhooks `webhook-id`: the same on every try."""

    __tablename__ = "delivery"
    __table_args__ = (sa.Index("ix_delivery_due", "status", "next_attempt_at"),)

    id: str = Field(primary_key=True, max_length=40)
    subscription_id: int = Field(foreign_key="subscription.id", index=True, ondelete="CASCADE")
    event_seq: int = Field(foreign_key="event.seq", index=True, ondelete="CASCADE")
    event_id: str = Field(max_length=64)
    status: str = Field(default="pending", max_length=10)  # pending | delivered | failed | dead
    attempts: int = 0
    next_attempt_at: datetime | None = _utc(nullable=True)
    last_attempt_at: datetime | None = _utc(nullable=True)
    last_status_code: int | None = None
    last_error: str | None = None
    created_at: datetime = _utc(index=True)
    delivered_at: datetime | None = _utc(nullable=True)


class DeliveryAttempt(SQLModel, table=True):
    """The log of every try of a delivery: when, what the receiver answered, what came of it."""

    __tablename__ = "delivery_attempt"

    id: int | None = Field(default=None, primary_key=True)
    delivery_id: str = Field(foreign_key="delivery.id", index=True, ondelete="CASCADE", max_length=40)
    attempt: int
    attempted_at: datetime = _utc()
    status_code: int | None = None
    error: str | None = None
    duration_ms: int = 0
    outcome: str = Field(max_length=10)  # delivered | retry | failed | dead


@dataclass(frozen=True)
class OutboxItem:
    """A delivery with the event it carries and the subscription it goes to (detached rows)."""

    delivery: Delivery
    event: Event
    subscription: Subscription

    def as_dict(self) -> dict[str, Any]:
        """For listings: no secret, and the URL without its path (Slack and Discord URLs are secrets)."""
        d, e, s = self.delivery, self.event, self.subscription
        return {
            "id": d.id,
            "status": d.status,
            "attempts": d.attempts,
            "last_status_code": d.last_status_code,
            "last_error": d.last_error,
            "created_at": _iso(d.created_at),
            "last_attempt_at": _iso(d.last_attempt_at),
            "next_attempt_at": _iso(d.next_attempt_at),
            "delivered_at": _iso(d.delivered_at),
            "event": {"event_id": e.event_id, "seq": e.seq, "kind": e.kind, "repo_id": e.repo_id, "sha": e.sha},
            "subscription": {
                "id": s.id,
                "format": s.format,
                "url": redact_url(s.url),
                "enabled": s.enabled,
                "disabled_reason": s.disabled_reason,
            },
        }


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


# -- the store ---------------------------------------------------------------------------------------


class OutboxStore(EngineStore):
    """The delivery log and its state machine: due, claimed, delivered, retried, failed, dead."""

    def due_deliveries(
        self, now: datetime, limit: int = 100, lease_s: float | None = None, per_subscription: int | None = None
    ) -> list[OutboxItem]:
        """Pending deliveries due at `now` whose subscription is enabled and not backing off, oldest
        first. With `lease_s` they are claimed: pushed `lease_s` into the future in one transaction, so
        another dispatcher does not send them too (a crash mid-send retries them when the lease ends).
        `per_subscription` caps how many of one subscription are returned."""
        due = (
            select(Delivery.id, Delivery.subscription_id)
            .join(Subscription, col(Subscription.id) == col(Delivery.subscription_id))
            .where(
                Delivery.status == "pending",
                col(Delivery.next_attempt_at) <= now,
                col(Subscription.enabled).is_(True),
                sa.or_(col(Subscription.backoff_until).is_(None), col(Subscription.backoff_until) <= now),
            )
            .order_by(col(Delivery.next_attempt_at), col(Delivery.event_seq))
            .limit(limit * 5 if per_subscription else limit)
        )
        with self.session() as s:
            chosen: list[str] = []
            counts: dict[int, int] = {}
            for delivery_id_, subscription_id in s.exec(due):
                n = counts.get(subscription_id, 0)
                if per_subscription is None or n < per_subscription:
                    counts[subscription_id] = n + 1
                    chosen.append(delivery_id_)
                if len(chosen) == limit:
                    break
            if lease_s is not None and chosen:
                until = now + timedelta(seconds=lease_s)
                conn = s.connection()
                claimed = [
                    did for did in chosen
                    if conn.execute(
                        sa.update(Delivery)
                        .where(col(Delivery.id) == did, Delivery.status == "pending", col(Delivery.next_attempt_at) <= now)
                        .values(next_attempt_at=until)
                    ).rowcount == 1
                ]
                s.commit()
                chosen = claimed
            if not chosen:
                return []
            order = {did: i for i, did in enumerate(chosen)}
            items = [OutboxItem(*row) for row in s.exec(_items_query().where(col(Delivery.id).in_(chosen)))]
            return sorted(items, key=lambda item: order[item.delivery.id])

    def claim(self, delivery_id: str, now: datetime, lease_s: float) -> OutboxItem | None:
        """Claim one pending delivery whatever its due time or its subscription's back-off (a manual
        redelivery); None when it is not pending, is claimed by another dispatcher, or is disabled."""
        with self.session() as s:
            row = s.exec(_items_query().where(col(Delivery.id) == delivery_id)).first()
            if row is None:
                return None
            item = OutboxItem(*row)
            if item.delivery.status != "pending" or not item.subscription.enabled:
                return None
            until = now + timedelta(seconds=lease_s)
            result = s.execute(
                sa.update(Delivery)
                .where(col(Delivery.id) == delivery_id, Delivery.status == "pending",
                       col(Delivery.next_attempt_at) == item.delivery.next_attempt_at)
                .values(next_attempt_at=until)
            )
            s.commit()
            if result.rowcount != 1:  # type: ignore[attr-defined]
                return None
            item.delivery.next_attempt_at = until
            return item

    def release(self, delivery_ids: Iterable[str], until: datetime) -> None:
        """Give back claimed deliveries that were not tried, due again at `until` (no attempt counted)."""
        ids = list(delivery_ids)
        if not ids:
            return
        with self.session() as s:
            s.execute(
                sa.update(Delivery)
                .where(col(Delivery.id).in_(ids), Delivery.status == "pending")
                .values(next_attempt_at=until)
            )
            s.commit()

    def mark_delivered(self, delivery_id: str, now: datetime, status_code: int, duration_ms: int = 0) -> None:
        """The receiver answered 2xx: done. The endpoint works, so its back-off ends."""
        with self.session() as s:
            sub_id = self._attempted(s, delivery_id, now, status_code, None, duration_ms, "delivered",
                                     status="delivered", delivered_at=now, next_attempt_at=None)
            s.connection().execute(
                sa.update(Subscription)
                .where(col(Subscription.id) == sub_id, col(Subscription.backoff_until).is_not(None))
                .values(backoff_until=None)
            )
            s.commit()

    def mark_retry(
        self,
        delivery_id: str,
        now: datetime,
        next_attempt_at: datetime,
        status_code: int | None,
        error: str,
        duration_ms: int = 0,
        hold_subscription: bool = False,
    ) -> None:
        """The attempt failed; try again at `next_attempt_at`. `hold_subscription` (the endpoint itself
        is down or rate-limiting) holds the subscription's other deliveries until then too."""
        with self.session() as s:
            sub_id = self._attempted(s, delivery_id, now, status_code, error, duration_ms, "retry",
                                     status="pending", next_attempt_at=next_attempt_at)
            if hold_subscription:
                s.connection().execute(
                    sa.update(Subscription).where(col(Subscription.id) == sub_id).values(backoff_until=next_attempt_at)
                )
            s.commit()

    def mark_failed(
        self,
        delivery_id: str,
        now: datetime,
        status_code: int | None,
        error: str,
        duration_ms: int = 0,
        disable_reason: str | None = None,
    ) -> None:
        """A permanent failure (retrying cannot help). With `disable_reason` the subscription is
        disabled in the same transaction (410 Gone, an archived Slack channel, a refused address)."""
        with self.session() as s:
            sub_id = self._attempted(s, delivery_id, now, status_code, error, duration_ms, "failed",
                                     status="failed", next_attempt_at=None)
            sub = s.get(Subscription, sub_id) if disable_reason else None
            if sub is not None and disable_reason:
                switch_off(s, sub, disable_reason)
            s.commit()

    def mark_dead(
        self, delivery_id: str, now: datetime, status_code: int | None, error: str, duration_ms: int = 0
    ) -> None:
        """The last attempt of the retry schedule failed: give up on this delivery."""
        with self.session() as s:
            self._attempted(s, delivery_id, now, status_code, error, duration_ms, "dead", status="dead", next_attempt_at=None)
            s.commit()

    def redeliver(self, delivery_id: str, now: datetime | None = None) -> Delivery:
        """Queue one more attempt of a delivery, due now, with the same webhook-id."""
        now = now or self.clock()
        with self.session() as s:
            d = s.get(Delivery, delivery_id)
            if d is None:
                raise DeliveryNotFound(f"no delivery {delivery_id}")
            sub = s.get(Subscription, d.subscription_id)
            if sub is None or not sub.enabled:
                reason = sub.disabled_reason if sub is not None else "removed"
                raise SubscriptionDisabled(f"subscription {d.subscription_id} is disabled ({reason})")
            d.status, d.next_attempt_at = "pending", now
            s.add(d)
            s.commit()
            return d

    def get_delivery(self, delivery_id: str) -> OutboxItem | None:
        with self.session() as s:
            row = s.exec(_items_query().where(col(Delivery.id) == delivery_id)).first()
            return None if row is None else OutboxItem(*row)

    def list_deliveries(
        self, status: str | None = None, limit: int = 100, subscription_id: int | None = None
    ) -> list[OutboxItem]:
        """The delivery log, newest first."""
        query = _items_query().order_by(col(Delivery.created_at).desc(), col(Delivery.event_seq).desc()).limit(limit)
        if status is not None:
            query = query.where(Delivery.status == status)
        if subscription_id is not None:
            query = query.where(Delivery.subscription_id == subscription_id)
        with self.session() as s:
            return [OutboxItem(*row) for row in s.exec(query)]

    def attempts(self, delivery_id: str) -> list[DeliveryAttempt]:
        with self.session() as s:
            query = select(DeliveryAttempt).where(DeliveryAttempt.delivery_id == delivery_id)
            return list(s.exec(query.order_by(col(DeliveryAttempt.id))))

    # -- internals -----------------------------------------------------------------------------------

    @staticmethod
    def _attempted(
        s: Session, delivery_id: str, now: datetime, status_code: int | None, error: str | None,
        duration_ms: int, outcome: str, **changes: object,
    ) -> int:
        """Count an attempt on the delivery (with `changes`) and log it; returns its subscription id."""
        conn = s.connection()
        row = conn.execute(
            sa.update(Delivery)
            .where(col(Delivery.id) == delivery_id)
            .values(attempts=col(Delivery.attempts) + 1, last_attempt_at=now, last_status_code=status_code,
                    last_error=error, **changes)
            .returning(col(Delivery.attempts), col(Delivery.subscription_id))
        ).first()
        if row is None:
            raise DeliveryNotFound(f"no delivery {delivery_id}")
        conn.execute(
            sa.insert(DeliveryAttempt).values(
                delivery_id=delivery_id, attempt=row[0], attempted_at=now, status_code=status_code,
                error=error, duration_ms=duration_ms, outcome=outcome,
            )
        )
        return int(row[1])


def _items_query():  # noqa: ANN202 - a sqlmodel select of three entities
    return (
        select(Delivery, Event, Subscription)
        .join(Event, col(Event.seq) == col(Delivery.event_seq))
        .join(Subscription, col(Subscription.id) == col(Delivery.subscription_id))
    )


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()
