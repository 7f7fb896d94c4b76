"""Webhook subscriptions kept: added through the API, synced from the config file, listed, switched off and on."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Protocol

import sqlalchemy as sa
from sqlmodel import Session, col, select

from storage.errors import InvalidSubscription
from storage.kinds import SIGNED_WEBHOOK_FORMATS
from storage.models import Subscription
from storage.sessions import EngineStore
from storage.subscriptions import new_secret, redact_url, validated

REMOVED_FROM_CONFIG = "removed from the config file"


def _find(s: Session, subscription_id: int) -> Subscription | None:
    """The subscription with this id. The id is bound as BIGINT: a user-given id past PostgreSQL's INTEGER
    key range (the API takes up to 2**62) finds nothing instead of failing the query."""
    return s.exec(select(Subscription).where(col(Subscription.id) == sa.literal(subscription_id, sa.BigInteger))).first()


def _switch_off(s: Session, subscription: Subscription, reason: str) -> None:
    """storage.delivery_queue.switch_off, imported when a subscription is switched off: it loads the delivery and
    event tables, which syncing the config's [[webhooks]] at every start seldom needs."""
    from storage.delivery_queue import switch_off

    switch_off(s, subscription, reason)


class SubscriptionSpec(Protocol):
    """What sync_config_subscriptions reads from each [[webhooks]] entry (tracker.config.WebhookSpec)."""

    url: str
    format: str
    secret_env: str
    repos: Sequence[str]
    kinds: Sequence[str]
    min_severity: str


class SubscriptionStore(EngineStore):
    """Subscriptions, read and written. Callers get detached rows back."""

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
        if format in SIGNED_WEBHOOK_FORMATS and not secret and not secret_env:
            secret = new_secret()
        subscription = validated(
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
            for number, spec in enumerate(specs, start=1):
                key = (spec.url, spec.format)
                seen.add(key)
                wanted = _validated_spec(number, spec, self.clock())
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
                    _switch_off(s, sub, REMOVED_FROM_CONFIG)
            s.commit()

    def list_subscriptions(self, include_removed: bool = False) -> list[Subscription]:
        query = select(Subscription).order_by(col(Subscription.id))
        if not include_removed:
            query = query.where(col(Subscription.removed_at).is_(None))
        with self.session() as s:
            return list(s.exec(query))

    def get_subscription(self, subscription_id: int) -> Subscription | None:
        with self.session() as s:
            return _find(s, subscription_id)

    def remove_subscription(self, subscription_id: int) -> bool:
        """Remove a subscription: it gets no more events and is no longer listed; its pending deliveries
        become dead and its delivery log stays. Returns False when there was none (or it was removed)."""
        with self.session() as s:
            sub = _find(s, subscription_id)
            if sub is None or sub.removed_at is not None:
                return False
            sub.removed_at = self.clock()
            _switch_off(s, sub, "removed")
            s.commit()
            return True

    def disable_subscription(self, subscription_id: int, reason: str) -> bool:
        """Stop delivering to a subscription; its pending deliveries become dead, with the reason."""
        with self.session() as s:
            sub = _find(s, subscription_id)
            if sub is None:
                return False
            _switch_off(s, sub, reason)
            s.commit()
            return True

    def enable_subscription(self, subscription_id: int) -> bool:
        """Deliver to a disabled subscription again (its dead deliveries stay dead: redeliver them)."""
        with self.session() as s:
            sub = _find(s, subscription_id)
            if sub is None or sub.removed_at is not None:
                return False
            sub.enabled, sub.disabled_reason, sub.backoff_until = True, None, None
            s.add(sub)
            s.commit()
            return True


def _validated_spec(number: int, spec: SubscriptionSpec, created_at: datetime) -> Subscription:
    """The config entry as a row; an InvalidSubscription names the entry (its number, format and redacted URL)."""
    try:
        return validated(
            Subscription(
                url=spec.url,
                format=spec.format,
                secret_env=spec.secret_env or None,
                repos=list(spec.repos),
                kinds=list(spec.kinds),
                min_severity=spec.min_severity,
                source="config",
                created_at=created_at,
            )
        )
    except InvalidSubscription as err:
        raise InvalidSubscription(f"entry {number} ({spec.format} {redact_url(spec.url)}): {err}") from err
