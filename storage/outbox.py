"""The webhook outbox: one Delivery row per (event, subscription), written with the event, and its state machine.

`enqueue` runs inside the transaction that writes the events (storage.event_log.write_events calls
it), so an event and its deliveries are committed together or not at all. The dispatcher
(feeds/webhooks/dispatcher.py) then works through due deliveries with `OutboxStore`: claim, send, mark.
"""

from __future__ import annotations

import threading
import uuid
import weakref
from collections.abc import Callable, Iterable
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
# PostgreSQL's channel for "deliveries were queued": NOTIFY in the writing transaction, LISTEN in dispatchers.
NOTIFY_CHANNEL = "hubwatch_outbox"


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
    first_attempt_at: datetime | None = _utc(nullable=True)  # the retry window is measured from here
    retry_step: int = Field(default=0, sa_column_kwargs={"server_default": "0"})  # scheduled retries used


class DeliveryAttempt(SQLModel, table=True):
    """The log of every try of a delivery: when, what the receiver answered, what came of it. The row is
    written as `started` before the request goes out and completed after, so a try cut short by a crash
    is logged too: the worker that takes the endpoint over marks it `interrupted`."""

    __tablename__ = "delivery_attempt"

    id: int | None = Field(default=None, primary_key=True)
    delivery_id: str = Field(foreign_key="delivery.id", index=True, ondelete="CASCADE", max_length=40)
    attempt: int
    attempted_at: datetime = _utc()
    status_code: int | None = None
    error: str | None = None
    duration_ms: int = 0
    outcome: str = Field(max_length=12)  # started, then delivered | retry | failed | dead; or interrupted
    worker_id: str | None = Field(default=None, max_length=64)  # the dispatcher worker that made it


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
    if fresh:
        signal_on_commit(session)
    return len(fresh)


# -- wake-ups: deliveries start when their event commits, not on the dispatcher's tick -------------------

_wakers: weakref.WeakKeyDictionary[sa.Engine, list[Callable[[], None]]] = weakref.WeakKeyDictionary()
_wakers_lock = threading.Lock()
_WAKE_KEY = "hubwatch_outbox_wake"


def on_deliveries_queued(engine: sa.Engine, wake: Callable[[], None]) -> Callable[[], None]:
    """Call `wake()` (from the writing thread, so it must be quick and thread-safe) after every commit on
    `engine` that queued deliveries; returns the function that stops it. Writers in other processes are
    heard through `listen_for_deliveries` (PostgreSQL)."""
    with _wakers_lock:
        _wakers.setdefault(engine, []).append(wake)

    def remove() -> None:
        with _wakers_lock:
            callbacks = _wakers.get(engine, [])
            if wake in callbacks:
                callbacks.remove(wake)

    return remove


def signal_on_commit(session: Session) -> None:
    """Mark the session's transaction as one that queued deliveries: this process's dispatchers are woken
    when it commits, and on PostgreSQL a NOTIFY (sent at commit, dropped on rollback) wakes the others."""
    if session.info.get(_WAKE_KEY):
        return
    session.info[_WAKE_KEY] = True
    if session.get_bind().dialect.name == "postgresql":
        session.connection().execute(sa.select(sa.func.pg_notify(NOTIFY_CHANNEL, "")))


def listen_for_deliveries(engine: sa.Engine, wake: Callable[[], None], stop: threading.Event,
                          on_lost: Callable[[str], None] = lambda error: None, reconnect_s: float = 5.0) -> None:
    """Until `stop` is set: on PostgreSQL, LISTEN on its own connection (outside the pool) and call
    `wake()` for every NOTIFY of queued deliveries, from any process. Returns at once on other
    databases (they have no NOTIFY: the dispatcher's slow tick covers other processes' writes). A lost
    connection (`on_lost(reason)`) is opened again after `reconnect_s`, with a `wake()`: a notification
    may have been missed meanwhile."""
    if engine.dialect.name != "postgresql":
        return
    while not stop.is_set():
        raw = None
        try:
            raw = engine.raw_connection()
            conn = raw.driver_connection
            conn.autocommit = True  # type: ignore[union-attr]
            conn.execute(f"LISTEN {NOTIFY_CHANNEL}")  # type: ignore[union-attr]
            wake()
            while not stop.is_set():
                for _ in conn.notifies(timeout=0.5, stop_after=1):  # type: ignore[union-attr]
                    wake()
        except Exception as err:  # noqa: BLE001 - a lost listener is reopened; deliveries still go on the tick
            on_lost(f"{type(err).__name__}: {err}"[:300])
            stop.wait(reconnect_s)
        finally:
            if raw is not None:
                raw.invalidate()  # never back into the pool: it is LISTENing


@sa.event.listens_for(sa.orm.Session, "after_commit")
def _wake_after_commit(session: Session) -> None:
    if not session.info.pop(_WAKE_KEY, False):
        return
    with _wakers_lock:
        callbacks = list(_wakers.get(session.get_bind(), []))  # type: ignore[call-overload]
    for wake in callbacks:
        wake()


@sa.event.listens_for(sa.orm.Session, "after_rollback")
def _forget_after_rollback(session: Session) -> None:
    session.info.pop(_WAKE_KEY, None)


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


@dataclass(frozen=True)
class Claim:
    """An endpoint (subscription) claimed by one dispatcher worker, with its due deliveries in event
    order. `taken_from` names the worker whose claim ran out (it stopped without letting go) and
    `interrupted` counts its attempts that were cut short."""

    subscription_id: int
    items: list[OutboxItem]
    taken_from: str | None = None
    interrupted: int = 0


class OutboxStore(EngineStore):
    """The delivery log and its state machine: due, claimed, started, delivered, retried, failed, dead.

    Claims are per endpoint: one worker at a time sends a subscription's deliveries, oldest event first.
    A claim lasts `lease_s` and the worker renews it (a heartbeat, and every attempt it starts); a
    worker that dies stops renewing, and another takes the endpoint over once the claim runs out. A
    worker that lost its claim cannot start another attempt (`begin_attempt` answers None)."""

    def on_queued(self, wake: Callable[[], None]) -> Callable[[], None]:
        """`wake()` after each commit of this process that queued deliveries (see `on_deliveries_queued`)."""
        return on_deliveries_queued(self.engine, wake)

    def listen(self, wake: Callable[[], None], stop: threading.Event, on_lost: Callable[[str], None]) -> None:
        """Block until `stop`, calling `wake()` on every other writer's NOTIFY (PostgreSQL; else return)."""
        listen_for_deliveries(self.engine, wake, stop, on_lost)

    def due_deliveries(self, now: datetime, limit: int = 100) -> list[OutboxItem]:
        """Pending deliveries due at `now` whose subscription is enabled and not backing off, by event
        (read only: nothing is claimed)."""
        query = _items_query().where(*_due(now)).order_by(col(Delivery.event_seq)).limit(limit)
        with self.session() as s:
            return [OutboxItem(*row) for row in s.exec(query)]

    def claim_due(
        self, worker_id: str, now: datetime, lease_s: float, endpoints: int = 16, per_endpoint: int = 25
    ) -> list[Claim]:
        """Claim up to `endpoints` endpoints with deliveries due at `now` that no other live worker holds;
        each comes with its first `per_endpoint` due deliveries in event order."""
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
            claim = self._claim(subscription_id, worker_id, now, lease_s, per_endpoint)
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
            row = conn.execute(
                sa.update(Delivery)
                .where(col(Delivery.id) == delivery.id, Delivery.status == "pending")
                .values(attempts=col(Delivery.attempts) + 1, last_attempt_at=now,
                        first_attempt_at=sa.func.coalesce(col(Delivery.first_attempt_at), now))
                .returning(col(Delivery.attempts))
            ).first() if held == 1 else None
            if row is None:
                s.rollback()
                return None
            attempt_id = conn.execute(
                sa.insert(DeliveryAttempt).values(
                    delivery_id=delivery.id, attempt=row[0], attempted_at=now, outcome="started", worker_id=worker_id,
                ).returning(col(DeliveryAttempt.id))
            ).scalar_one()
            s.commit()
            return int(attempt_id)

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
        self, subscription_id: int, worker_id: str, now: datetime, lease_s: float, per_endpoint: int
    ) -> Claim | None:
        """Take the endpoint if it is free, ours, or its holder's claim ran out (compare-and-set on the
        holder seen, so two workers cannot both win); attempts a lapsed holder left `started` become
        `interrupted`. With `per_endpoint`, None when nothing of it is due any more."""
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
            s.commit()
            if not per_endpoint:
                return Claim(subscription_id, [], taken_from, interrupted)
            query = (_items_query().where(Delivery.subscription_id == subscription_id, *_due(now))
                     .order_by(col(Delivery.event_seq)).limit(per_endpoint))
            items = [OutboxItem(*row) for row in s.exec(query)]
        if not items:
            self.release_claims(worker_id, [subscription_id])
            return None
        return Claim(subscription_id, items, taken_from, interrupted)

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
    """Pending, due at `now`, its subscription enabled and not backing off (queries that join Subscription)."""
    return (
        Delivery.status == "pending",
        col(Delivery.next_attempt_at) <= now,
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
