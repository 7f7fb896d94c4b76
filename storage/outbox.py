"""The webhook outbox's state machine: due, claimed, started, delivered, retried, failed, dead.

Deliveries are queued with their events (storage/delivery_queue.py); the dispatcher (feeds/webhooks/dispatcher.py)
then works through the due ones with `OutboxStore`: claim, send, mark. It hears of new ones through
storage/wakeups.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from storage.delivery_queue import switch_off
from storage.errors import DeliveryNotFound, SubscriptionDisabled
from storage.models import Delivery, DeliveryAttempt, Event, Subscription
from storage.sessions import EngineStore
from storage.subscriptions import redact_url
from storage.wakeups import listen_for_deliveries, on_deliveries_queued, signal_on_commit

STATUSES = ("pending", "delivered", "failed", "dead")


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


@dataclass(frozen=True)
class Claim:
    """An endpoint (subscription) claimed by one dispatcher worker, with its due deliveries in event
    order. `taken_from` names the worker whose claim ran out (it stopped without letting go) and
    `interrupted` counts its attempts that were cut short."""

    subscription_id: int
    items: list[OutboxItem]
    taken_from: str | None = None
    interrupted: int = 0
    first_attempt_id: int | None = None  # the first item's attempt, begun with the claim (`claim_due(start_first=True)`)


class OutboxStore(EngineStore):
    """The delivery log and its state machine: due, claimed, started, delivered, retried, failed, dead.

    Claims are per endpoint: one worker at a time sends a subscription's deliveries, oldest event first.
    A claim lasts `lease_s` and the worker renews it (a heartbeat, and every attempt it starts); a
    worker that dies stops renewing, and another takes the endpoint over once the claim runs out. A
    worker that lost its claim cannot start another attempt (`begin_attempt` answers None)."""

    def on_queued(self, wake: Callable[[], None]) -> Callable[[], None]:
        """`wake()` after each commit of this process that queued deliveries (see `on_deliveries_queued`)."""
        return on_deliveries_queued(self.engine, wake)

    def listen(self, wake: Callable[[], None], stop: threading.Event, on_lost: Callable[[str], None],
               on_back: Callable[[], None] = lambda: None) -> None:
        """Block until `stop`, calling `wake()` on every other writer's NOTIFY (PostgreSQL; else return);
        `on_lost` once when the listening connection is lost, `on_back` once it is open again."""
        listen_for_deliveries(self.engine, wake, stop, on_lost, on_back=on_back)

    def due_deliveries(self, now: datetime, limit: int = 100) -> list[OutboxItem]:
        """Pending deliveries due at `now` whose subscription is enabled and not backing off, by event
        (read only: nothing is claimed)."""
        query = _items_query().where(*_due(now)).order_by(col(Delivery.event_seq)).limit(limit)
        with self.session() as s:
            return [OutboxItem(*row) for row in s.exec(query)]

    def claim_due(
        self, worker_id: str, now: datetime, lease_s: float, endpoints: int = 16, per_endpoint: int = 25,
        start_first: bool = False,
    ) -> list[Claim]:
        """Claim up to `endpoints` endpoints with deliveries due at `now` that no other live worker holds;
        each comes with its first `per_endpoint` due deliveries in event order. `start_first`: the first
        delivery's attempt is begun (as `begin_attempt` would) in the claim's own transaction, one write
        fewer on a delivery's path; its id is the claim's `first_attempt_id`."""
        candidates = (
            select(Delivery.subscription_id)
            .join(Subscription, col(Subscription.id) == col(Delivery.subscription_id))
            .where(*_due(now), _claimable(worker_id, now))
            .group_by(col(Delivery.subscription_id))
            .order_by(sa.func.min(Delivery.next_attempt_at))
            .limit(endpoints)
        )
        with self.session() as s:
            subscription_ids = list(s.exec(candidates))
        claims = []
        for subscription_id in subscription_ids:
            claim = self._claim(subscription_id, worker_id, now, lease_s, per_endpoint, start_first)
            if claim is not None:
                claims.append(claim)
        return claims

    def claim_one(self, delivery_id: str, worker_id: str, now: datetime, lease_s: float) -> Claim | None:
        """Claim the endpoint of one pending delivery, whatever its due time or back-off (a manual
        redelivery); None when it is not pending, its subscription is disabled, or another worker holds it."""
        item = self.get_delivery(delivery_id)
        if item is None or item.delivery.status != "pending" or not item.subscription.enabled:
            return None
        claim = self._claim(item.delivery.subscription_id, worker_id, now, lease_s, per_endpoint=0)
        if claim is None:
            return None
        fresh = self.get_delivery(delivery_id)
        if fresh is None or fresh.delivery.status != "pending":
            self.release_claims(worker_id, [item.delivery.subscription_id])
            return None
        return Claim(claim.subscription_id, [fresh], claim.taken_from, claim.interrupted)

    def renew_claims(self, worker_id: str, now: datetime, lease_s: float) -> int:
        """The heartbeat: every claim `worker_id` holds lasts `lease_s` from `now`. Returns how many it holds."""
        with self.session() as s:
            result = s.execute(
                sa.update(Subscription).where(col(Subscription.claimed_by) == worker_id)
                .values(claimed_until=now + timedelta(seconds=lease_s))
            )
            s.commit()
            return int(result.rowcount)  # type: ignore[attr-defined]

    def release_claims(self, worker_id: str, subscription_ids: Iterable[int] | None = None) -> None:
        """Let go of the worker's claims (all of them, or those endpoints'), so another worker may take them at once."""
        query = sa.update(Subscription).where(col(Subscription.claimed_by) == worker_id)
        if subscription_ids is not None:
            query = query.where(col(Subscription.id).in_(list(subscription_ids)))
        with self.session() as s:
            s.execute(query.values(claimed_by=None, claimed_until=None))
            s.commit()

    def begin_attempt(self, delivery: Delivery, worker_id: str, now: datetime, lease_s: float) -> int | None:
        """Log an attempt as started (counted on the delivery) before its request goes out, renewing the
        worker's claim on the endpoint; returns the attempt's id. None, and nothing written, when the
        worker no longer holds the endpoint or the delivery is no longer pending."""
        with self.session() as s:
            conn = s.connection()
            held = conn.execute(
                sa.update(Subscription)
                .where(col(Subscription.id) == delivery.subscription_id, col(Subscription.claimed_by) == worker_id)
                .values(claimed_until=now + timedelta(seconds=lease_s))
            ).rowcount
            attempt_id = _start_attempt(conn, delivery.id, worker_id, now) if held == 1 else None
            if attempt_id is None:
                s.rollback()
                return None
            s.commit()
            return attempt_id

    def mark_delivered(self, attempt_id: int, now: datetime, status_code: int, duration_ms: int = 0) -> None:
        """The receiver answered 2xx: done. The endpoint works, so its back-off ends."""
        with self.session() as s:
            sub_id = self._finish(s, attempt_id, status_code, None, duration_ms, "delivered", any_status=True,
                                  status="delivered", delivered_at=now, next_attempt_at=None)
            s.connection().execute(
                sa.update(Subscription)
                .where(col(Subscription.id) == sub_id, col(Subscription.backoff_until).is_not(None))
                .values(backoff_until=None)
            )
            s.commit()

    def mark_retry(
        self,
        attempt_id: int,
        next_attempt_at: datetime,
        status_code: int | None,
        error: str,
        duration_ms: int = 0,
        retry_step: int | None = None,
        hold_subscription: bool = False,
    ) -> None:
        """The attempt failed; try again at `next_attempt_at` (`retry_step`: the schedule's steps used
        so far). `hold_subscription` (the endpoint itself is down or rate-limiting) holds the
        subscription's other deliveries until then too."""
        changes: dict[str, object] = {"status": "pending", "next_attempt_at": next_attempt_at}
        if retry_step is not None:
            changes["retry_step"] = retry_step
        with self.session() as s:
            sub_id = self._finish(s, attempt_id, status_code, error, duration_ms, "retry", **changes)
            if hold_subscription:
                s.connection().execute(
                    sa.update(Subscription).where(col(Subscription.id) == sub_id).values(backoff_until=next_attempt_at)
                )
            s.commit()

    def mark_failed(
        self,
        attempt_id: int,
        status_code: int | None,
        error: str,
        duration_ms: int = 0,
        disable_reason: str | None = None,
    ) -> None:
        """A permanent failure (retrying cannot help). With `disable_reason` the subscription is
        disabled in the same transaction (410 Gone, an archived Slack channel, a refused address)."""
        with self.session() as s:
            sub_id = self._finish(s, attempt_id, status_code, error, duration_ms, "failed",
                                  status="failed", next_attempt_at=None)
            sub = s.get(Subscription, sub_id) if disable_reason else None
            if sub is not None and disable_reason:
                switch_off(s, sub, disable_reason)
            s.commit()

    def mark_dead(
        self, attempt_id: int, status_code: int | None, error: str, duration_ms: int = 0,
        hold_until: datetime | None = None,
    ) -> None:
        """The retry schedule is over and this attempt failed too: give up on this delivery. With
        `hold_until` (the endpoint is down) its other deliveries wait until then."""
        with self.session() as s:
            sub_id = self._finish(s, attempt_id, status_code, error, duration_ms, "dead", status="dead",
                                  next_attempt_at=None)
            if hold_until is not None:
                s.connection().execute(
                    sa.update(Subscription).where(col(Subscription.id) == sub_id).values(backoff_until=hold_until)
                )
            s.commit()

    def redeliver(self, delivery_id: str, now: datetime | None = None) -> Delivery:
        """Queue one more attempt of a delivery, due now, with the same webhook-id. A delivery that was
        finished (dead, failed or delivered) starts the retry schedule afresh: its first delay next, its
        window counted from the next attempt; its attempt count and the attempt log are kept. A pending
        one is only brought forward (its schedule goes on where it was)."""
        now = now or self.clock()
        with self.session() as s:
            d = s.get(Delivery, delivery_id)
            if d is None:
                raise DeliveryNotFound(f"no delivery {delivery_id}")
            sub = s.get(Subscription, d.subscription_id)
            if sub is None or not sub.enabled:
                reason = sub.disabled_reason if sub is not None else "removed"
                raise SubscriptionDisabled(f"subscription {d.subscription_id} is disabled ({reason})")
            if d.status != "pending":
                d.retry_step, d.first_attempt_at = 0, None  # the next attempt starts a new window
            d.status, d.next_attempt_at = "pending", now
            s.add(d)
            signal_on_commit(s)
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

    def _claim(
        self, subscription_id: int, worker_id: str, now: datetime, lease_s: float, per_endpoint: int,
        start_first: bool = False,
    ) -> Claim | None:
        """Take the endpoint if it is free, ours, or its holder's claim ran out (compare-and-set on the
        holder seen, so two workers cannot both win); attempts a lapsed holder left `started` become
        `interrupted`. With `per_endpoint`, None when nothing of it is due any more; with `start_first`
        too, the first due delivery's attempt is begun in the same transaction."""
        with self.session() as s:
            conn = s.connection()
            held = conn.execute(
                sa.select(col(Subscription.claimed_by), col(Subscription.claimed_until))
                .where(col(Subscription.id) == subscription_id)
            ).first()
            if held is None:
                return None
            holder, until = held
            if holder not in (None, worker_id) and until is not None and until > now:
                return None
            won = conn.execute(
                sa.update(Subscription)
                .where(col(Subscription.id) == subscription_id, _same(col(Subscription.claimed_by), holder),
                       _same(col(Subscription.claimed_until), until))
                .values(claimed_by=worker_id, claimed_until=now + timedelta(seconds=lease_s))
            ).rowcount
            if won != 1:
                s.rollback()
                return None
            taken_from = holder if holder not in (None, worker_id) else None
            interrupted = _interrupt_orphans(conn, subscription_id, worker_id, now) if taken_from else 0
            if not per_endpoint:
                s.commit()
                return Claim(subscription_id, [], taken_from, interrupted)
            # read in the claim's transaction (the endpoint is ours now: nobody else starts its attempts)
            query = (_items_query().where(Delivery.subscription_id == subscription_id, *_due(now))
                     .order_by(col(Delivery.event_seq)).limit(per_endpoint))
            items = [OutboxItem(*row) for row in s.exec(query)]
            first_attempt_id = _start_attempt(conn, items[0].delivery.id, worker_id, now) if items and start_first else None
            s.commit()
        if not items:
            self.release_claims(worker_id, [subscription_id])
            return None
        return Claim(subscription_id, items, taken_from, interrupted, first_attempt_id)

    @staticmethod
    def _finish(
        s: Session, attempt_id: int, status_code: int | None, error: str | None, duration_ms: int, outcome: str,
        any_status: bool = False, **changes: object,
    ) -> int:
        """Complete a started attempt with what came of it and apply `changes` to its delivery (unless
        something else settled the delivery meanwhile; `any_status`: whatever its state). Returns the
        delivery's subscription id."""
        conn = s.connection()
        delivery_id = conn.execute(
            sa.update(DeliveryAttempt)
            .where(col(DeliveryAttempt.id) == attempt_id)
            .values(status_code=status_code, error=error, duration_ms=duration_ms, outcome=outcome)
            .returning(col(DeliveryAttempt.delivery_id))
        ).scalar_one_or_none()
        if delivery_id is None:
            raise DeliveryNotFound(f"no delivery attempt {attempt_id}")
        update = sa.update(Delivery).where(col(Delivery.id) == delivery_id)
        if not any_status:
            update = update.where(Delivery.status == "pending")
        conn.execute(update.values(last_status_code=status_code, last_error=error, **changes))
        return int(conn.execute(sa.select(col(Delivery.subscription_id)).where(col(Delivery.id) == delivery_id)).scalar_one())


def _due(now: datetime) -> tuple[Any, ...]:
    """Pending, due at `now`, its subscription enabled and not backing off (queries that join Subscription).

    A delivery never tried is due as soon as it is committed, whatever its `next_attempt_at` says: that is
    its event's `created_at`, read before the writer waited for the database, so an event committed later
    (a higher seq) can carry an earlier time. Were fresh deliveries due by that time, a dispatcher asking
    between the two times would send the later event first."""
    return (
        Delivery.status == "pending",
        sa.or_(col(Delivery.next_attempt_at) <= now, col(Delivery.attempts) == 0),
        col(Subscription.enabled).is_(True),
        sa.or_(col(Subscription.backoff_until).is_(None), col(Subscription.backoff_until) <= now),
    )


def _claimable(worker_id: str, now: datetime) -> Any:
    """The endpoint is free, held by `worker_id`, or its holder's claim ran out."""
    return sa.or_(
        col(Subscription.claimed_by).is_(None),
        col(Subscription.claimed_by) == worker_id,
        col(Subscription.claimed_until) <= now,
    )


def _same(column: Any, value: object) -> Any:
    return column.is_(None) if value is None else column == value


def _start_attempt(conn: sa.Connection, delivery_id: str, worker_id: str, now: datetime) -> int | None:
    """Count an attempt on the pending delivery and log it `started`; its id, or None when the delivery is
    no longer pending (nothing written)."""
    row = conn.execute(
        sa.update(Delivery)
        .where(col(Delivery.id) == delivery_id, Delivery.status == "pending")
        .values(attempts=col(Delivery.attempts) + 1, last_attempt_at=now,
                first_attempt_at=sa.func.coalesce(col(Delivery.first_attempt_at), now))
        .returning(col(Delivery.attempts))
    ).first()
    if row is None:
        return None
    attempt_id = conn.execute(
        sa.insert(DeliveryAttempt).values(
            delivery_id=delivery_id, attempt=row[0], attempted_at=now, outcome="started", worker_id=worker_id,
        ).returning(col(DeliveryAttempt.id))
    ).scalar_one()
    return int(attempt_id)


def _interrupt_orphans(conn: sa.Connection, subscription_id: int, worker_id: str, now: datetime) -> int:
    """Attempts another worker left `started` on this endpoint's pending deliveries were cut short:
    mark them `interrupted` (their deliveries stay due, to be tried again at once)."""
    pending = sa.select(col(Delivery.id)).where(Delivery.subscription_id == subscription_id, Delivery.status == "pending")
    orphans = conn.execute(
        sa.select(col(DeliveryAttempt.id), col(DeliveryAttempt.delivery_id), col(DeliveryAttempt.worker_id))
        .where(DeliveryAttempt.outcome == "started", col(DeliveryAttempt.delivery_id).in_(pending),
               sa.or_(col(DeliveryAttempt.worker_id).is_(None), col(DeliveryAttempt.worker_id) != worker_id))
    ).all()
    for attempt_id, delivery_id_, previous in orphans:
        error = f"cut short: worker {previous} stopped during the attempt (taken over at {now.isoformat()})"
        conn.execute(sa.update(DeliveryAttempt).where(col(DeliveryAttempt.id) == attempt_id)
                     .values(outcome="interrupted", error=error))
        conn.execute(sa.update(Delivery).where(col(Delivery.id) == delivery_id_)
                     .values(last_status_code=None, last_error=error))
    return len(orphans)


def _items_query():  # noqa: ANN202 - a sqlmodel select of three entities
    return (
        select(Delivery, Event, Subscription)
        .join(Event, col(Event.seq) == col(Delivery.event_seq))
        .join(Subscription, col(Subscription.id) == col(Delivery.subscription_id))
    )


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()
