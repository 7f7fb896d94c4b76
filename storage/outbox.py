"""The webhook outbox: subscriptions, and one Delivery row per (event, subscription) written with the event.

`enqueue` runs inside the transaction that writes the events (Store.save_revision and Store.add_event
call it), so an event and its deliveries are committed together or not at all. The dispatcher
(feeds/dispatcher.py) then works through due deliveries with `OutboxStore`.

Secrets: a subscription from the config file stores only the NAME of the environment variable that
holds its signing secret (`secret_env`); one created through the API stores the secret itself
(`secret`), in clear, because the dispatcher signs with it. Neither is ever logged, put in a repr or
shown in a listing.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import re
import secrets as secrets_module
import urllib.parse
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol

import sqlalchemy as sa
from sqlmodel import Field, Session, SQLModel, col, select

from storage.errors import DeliveryNotFound, SubscriptionDisabled
from storage.kinds import SEVERITY_RANK, WEBHOOK_FORMATS
from storage.models import Event, _json, _utc

Clock = Callable[[], datetime]

STATUSES = ("pending", "delivered", "failed", "dead")
SOURCES = ("config", "api")
MAX_URL_LENGTH = 2000
REMOVED_FROM_CONFIG = "removed from the config file"

_KIND_RE = re.compile(r"^[a-z0-9_.*-]{1,40}$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")
_NAMESPACE = uuid.UUID("0b3c5d7e-2f41-4a6b-8c9d-1e2f3a4b5c6d")


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class InvalidSubscription(ValueError):
    """A subscription's URL, format, filters or secret is not acceptable; the message says which."""


class Subscription(SQLModel, table=True):
    """Where to send events, in which format, and which events (repo globs, kinds, minimum severity)."""

    __tablename__ = "subscription"
    __table_args__ = {"sqlite_autoincrement": True}  # ids are never reused: they go into webhook-ids

    id: int | None = Field(default=None, primary_key=True)
    url: str = Field(max_length=MAX_URL_LENGTH)
    format: str = Field(default="generic", max_length=10)
    secret_env: str | None = Field(default=None, max_length=200)  # config: the variable's name
    secret: str | None = Field(default=None, max_length=1000, repr=False)  # api: the secret itself
    repos: list[str] = _json()
    kinds: list[str] = _json()
    min_severity: str = Field(default="notice", max_length=10)
    source: str = Field(default="api", max_length=10)  # config | api
    enabled: bool = True
    disabled_reason: str | None = None
    created_at: datetime = _utc()
    backoff_until: datetime | None = _utc(nullable=True)  # the endpoint failed: hold its deliveries
    removed_at: datetime | None = _utc(nullable=True)  # removed: listed no more, its delivery log kept


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


class SubscriptionSpec(Protocol):
    """What sync_config_subscriptions reads from each [[webhooks]] entry (tracker.config.WebhookSpec)."""

    url: str
    format: str
    secret_env: str
    repos: Sequence[str]
    kinds: Sequence[str]
    min_severity: str


# -- pure helpers ------------------------------------------------------------------------------------


def delivery_id(event_id: str, subscription_id: int) -> str:
    """The webhook-id: derived from the event and the subscription, so it never changes."""
    return "msg_" + uuid.uuid5(_NAMESPACE, f"{event_id}\n{subscription_id}").hex


def validate_url(url: object) -> str:
    """An absolute http(s) URL with a host, no credentials, no whitespace; raises InvalidSubscription."""
    if not isinstance(url, str) or not url:
        raise InvalidSubscription("the URL is empty")
    if len(url) > MAX_URL_LENGTH:
        raise InvalidSubscription(f"the URL is longer than {MAX_URL_LENGTH} characters")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise InvalidSubscription("the URL contains whitespace or control characters")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as err:
        raise InvalidSubscription(f"the URL is malformed: {err}") from err
    if parts.scheme not in ("http", "https"):
        raise InvalidSubscription(f"the URL must start with http:// or https://, got {parts.scheme or 'no'} scheme")
    if not parts.hostname:
        raise InvalidSubscription("the URL has no host")
    if parts.username is not None or parts.password is not None:
        raise InvalidSubscription("the URL carries credentials; use a signing secret instead")
    if port == 0:
        raise InvalidSubscription("the URL's port must be 1-65535")
    try:
        parts.hostname.encode("idna")
    except UnicodeError as err:
        raise InvalidSubscription(f"the URL's host is not a valid host name: {err}") from err
    return url


def redact_url(url: str) -> str:
    """scheme://host[:port]/… : enough to tell endpoints apart without showing a path that is a token."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<malformed URL>"
    host = f"[{host}]" if ":" in host else host
    tail = "/…" if parts.path not in ("", "/") or parts.query else ""
    return f"{parts.scheme}://{host}{port}{tail}"


def new_secret() -> str:
    """A fresh Standard Webhooks signing secret (24 random bytes, `whsec_` + base64)."""
    return "whsec_" + base64.b64encode(secrets_module.token_bytes(24)).decode("ascii")


def secret_keys(secret: str) -> list[bytes]:
    """The HMAC keys in a secret value: one or more space-separated `whsec_<base64>` (key rotation)."""
    keys = []
    for part in secret.split():
        if not part.startswith("whsec_"):
            raise InvalidSubscription("a signing secret must look like whsec_<base64>")
        try:
            key = base64.b64decode(part[len("whsec_"):], validate=True)
        except (binascii.Error, ValueError) as err:
            raise InvalidSubscription("a signing secret's part after whsec_ is not base64") from err
        if not 24 <= len(key) <= 64:
            raise InvalidSubscription("a signing secret must hold 24 to 64 bytes")
        keys.append(key)
    if not keys:
        raise InvalidSubscription("the signing secret is empty")
    return keys


def matches(subscription: Subscription, event: Event) -> bool:
    """Does the event pass the subscription's repo globs, kinds and minimum severity?"""
    if not subscription.enabled:
        return False
    repo = event.repo_id.lower()
    if not any(fnmatch.fnmatchcase(repo, glob.lower()) for glob in subscription.repos or ["*"]):
        return False
    if SEVERITY_RANK.get(event.severity, 0) < SEVERITY_RANK.get(subscription.min_severity, 0):
        return False
    if subscription.kinds:
        offered = {event.kind, *((event.payload or {}).get("kinds") or [])}
        if not any(fnmatch.fnmatchcase(k, want) for want in subscription.kinds for k in offered):
            return False
    return True


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


# -- the store ---------------------------------------------------------------------------------------


class OutboxStore:
    """Subscriptions and the delivery log. Callers get detached rows back."""

    def __init__(self, engine: sa.Engine, clock: Clock = utc_now) -> None:
        self.engine = engine
        self.clock = clock

    @contextmanager
    def session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session:
            yield session

    # -- subscriptions -------------------------------------------------------------------------------

    def add_subscription(
        self,
        url: str,
        format: str,  # noqa: A002 - the user-facing name of the setting
        secret_env: str | None = None,
        secret: str | None = None,
        repos: Sequence[str] = ("*",),
        kinds: Sequence[str] = (),
        min_severity: str = "notice",
        source: str = "api",
    ) -> Subscription:
        """Validate and store a subscription. A generic (signed) one created without a secret gets a new
        one, returned on the row so the caller can show it once. Does not resolve the host: callers
        taking URLs from users check the address first (feeds.webhooks.safety.check_url)."""
        if format == "generic" and not secret and not secret_env:
            secret = new_secret()
        subscription = self._validated(
            Subscription(
                url=url,
                format=format,
                secret_env=secret_env or None,
                secret=secret or None,
                repos=list(repos),
                kinds=list(kinds),
                min_severity=min_severity,
                source=source,
                created_at=self.clock(),
            )
        )
        with self.session() as s:
            s.add(subscription)
            s.commit()
            return subscription

    def sync_config_subscriptions(self, specs: Iterable[SubscriptionSpec]) -> None:
        """Make the config file's [[webhooks]] exist (matched by URL and format) with their filters;
        ones no longer in the file are disabled, keeping their delivery log. A subscription the
        dispatcher disabled (410 Gone, a refused address) stays disabled until its entry changes."""
        with self.session() as s:
            query = select(Subscription).where(Subscription.source == "config", col(Subscription.removed_at).is_(None))
            existing = {(sub.url, sub.format): sub for sub in s.exec(query)}
            seen = set()
            for spec in specs:
                key = (spec.url, spec.format)
                seen.add(key)
                wanted = self._validated(
                    Subscription(
                        url=spec.url,
                        format=spec.format,
                        secret_env=spec.secret_env or None,
                        repos=list(spec.repos),
                        kinds=list(spec.kinds),
                        min_severity=spec.min_severity,
                        source="config",
                        created_at=self.clock(),
                    )
                )
                sub = existing.get(key)
                if sub is None:
                    s.add(wanted)
                    continue
                changed = (sub.secret_env, sub.repos, sub.kinds, sub.min_severity) != (
                    wanted.secret_env, wanted.repos, wanted.kinds, wanted.min_severity
                )
                sub.secret_env, sub.repos, sub.kinds, sub.min_severity = (
                    wanted.secret_env, wanted.repos, wanted.kinds, wanted.min_severity
                )
                if not sub.enabled and (changed or sub.disabled_reason == REMOVED_FROM_CONFIG):
                    sub.enabled, sub.disabled_reason, sub.backoff_until = True, None, None
                s.add(sub)
            for key, sub in existing.items():
                if key not in seen and sub.enabled:
                    self._disable(s, sub, REMOVED_FROM_CONFIG)
            s.commit()

    def list_subscriptions(self, include_removed: bool = False) -> list[Subscription]:
        query = select(Subscription).order_by(col(Subscription.id))
        if not include_removed:
            query = query.where(col(Subscription.removed_at).is_(None))
        with self.session() as s:
            return list(s.exec(query))

    def get_subscription(self, subscription_id: int) -> Subscription | None:
        with self.session() as s:
            return s.get(Subscription, subscription_id)

    def remove_subscription(self, subscription_id: int) -> bool:
        """Remove a subscription: it gets no more events and is no longer listed; its pending deliveries
        become dead and its delivery log stays. Returns False when there was none (or it was removed)."""
        with self.session() as s:
            sub = s.get(Subscription, subscription_id)
            if sub is None or sub.removed_at is not None:
                return False
            sub.removed_at = self.clock()
            self._disable(s, sub, "removed")
            s.commit()
            return True

    def disable_subscription(self, subscription_id: int, reason: str) -> bool:
        """Stop delivering to a subscription; its pending deliveries become dead, with the reason."""
        with self.session() as s:
            sub = s.get(Subscription, subscription_id)
            if sub is None:
                return False
            self._disable(s, sub, reason)
            s.commit()
            return True

    def enable_subscription(self, subscription_id: int) -> bool:
        """Deliver to a disabled subscription again (its dead deliveries stay dead: redeliver them)."""
        with self.session() as s:
            sub = s.get(Subscription, subscription_id)
            if sub is None or sub.removed_at is not None:
                return False
            sub.enabled, sub.disabled_reason, sub.backoff_until = True, None, None
            s.add(sub)
            s.commit()
            return True

    # -- deliveries ----------------------------------------------------------------------------------

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
                self._disable(s, sub, disable_reason)
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
    def _validated(sub: Subscription) -> Subscription:
        validate_url(sub.url)
        if sub.format not in WEBHOOK_FORMATS:
            raise InvalidSubscription(f"format must be one of {', '.join(WEBHOOK_FORMATS)}, got {sub.format!r}")
        if sub.min_severity not in SEVERITY_RANK:
            raise InvalidSubscription(f"min_severity must be one of {', '.join(SEVERITY_RANK)}, got {sub.min_severity!r}")
        if sub.source not in SOURCES:
            raise InvalidSubscription(f"source must be config or api, got {sub.source!r}")
        if not sub.repos:
            sub.repos = ["*"]
        if not all(isinstance(r, str) and 0 < len(r) <= 200 for r in sub.repos):
            raise InvalidSubscription("repos must be globs like 'org/*' (1-200 characters each)")
        if not all(isinstance(k, str) and _KIND_RE.match(k) for k in sub.kinds):
            raise InvalidSubscription("kinds must be change kinds (chat_template) or event kinds (advisory.published)")
        if sub.secret and sub.secret_env:
            raise InvalidSubscription("give a secret or the name of the variable holding it, not both")
        if sub.secret_env and not _ENV_NAME_RE.match(sub.secret_env):
            raise InvalidSubscription("secret_env must be an environment variable name")
        if sub.secret:
            secret_keys(sub.secret)
        return sub

    @staticmethod
    def _disable(s: Session, sub: Subscription, reason: str) -> None:
        sub.enabled, sub.disabled_reason, sub.backoff_until = False, reason, None
        s.add(sub)
        s.execute(
            sa.update(Delivery)
            .where(Delivery.subscription_id == sub.id, Delivery.status == "pending")
            .values(status="dead", next_attempt_at=None, last_error=f"subscription disabled: {reason}")
        )

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
