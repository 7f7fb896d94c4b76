"""Outbound webhooks: the message formats (generic Standard Webhooks, Slack, Discord, and Apprise
notifications to the service an Apprise URL names), the address policy for user-given URLs, and
`subscribe`, the one way to add a subscription from user input.

Each format is one module holding one `WebhookFormat` (feeds.webhooks.formats): its URL rules, redaction,
secret, rendering, headers and how a receiver's answer is classified. `FORMATS` is the registry, by the
name a subscription's `format` holds; the dispatcher (feeds/webhooks/dispatcher.py), the API and the CLI's config
check look formats up there. A new format is a module with its `FORMAT`, a line here, and its name in
storage.kinds (WEBHOOK_FORMATS, and HTTP_WEBHOOK_FORMATS / SIGNED_WEBHOOK_FORMATS as it applies).
"""

from __future__ import annotations

from collections.abc import Sequence

from feeds.webhooks import apprise, discord, generic, slack
from feeds.webhooks.formats import Links, WebhookFormat
from feeds.webhooks.safety import Resolver, TargetPolicy, system_resolve
from storage.errors import InvalidSubscription
from storage.kinds import WEBHOOK_FORMATS
from storage.models import Event, Subscription
from storage.subscription_store import SubscriptionStore

__all__ = ["FORMATS", "Links", "WebhookFormat", "render", "subscribe", "webhook_format"]

FORMATS: dict[str, WebhookFormat] = {f.name: f for f in (generic.FORMAT, slack.FORMAT, discord.FORMAT, apprise.FORMAT)}


def webhook_format(name: str) -> WebhookFormat:
    """The format a subscription names; InvalidSubscription (naming the known ones) for any other."""
    try:
        return FORMATS[name]
    except KeyError:
        raise InvalidSubscription(f"format must be one of {', '.join(WEBHOOK_FORMATS)}, got {name!r}") from None


def render(event: Event, format: str, links: Links) -> bytes:  # noqa: A002 - the setting's name
    return FORMATS[format].render(event, links)


def subscribe(
    subscriptions: SubscriptionStore,
    url: str,
    format: str,  # noqa: A002 - the subscription setting's name, as the API and config spell it
    *,
    allow_private: bool,
    secret: str | None = None,
    repos: Sequence[str] = ("*",),
    kinds: Sequence[str] = (),
    min_severity: str = "notice",
    resolve: Resolver = system_resolve,
    apprise_plugins: Sequence[str] = (),
    apprise_insecure_tls: bool = False,
) -> Subscription:
    """Add an API subscription from user input: the URL is checked (syntax, then every address it
    resolves to) before it is stored. Raises InvalidSubscription or safety.UnsafeTarget with a message
    for the user. A subscription whose format signs every delivery gets a new secret when given none.
    `apprise_plugins` and `apprise_insecure_tls`: the [delivery] settings of the same names."""
    policy = TargetPolicy(allow_private, frozenset(apprise_plugins), apprise_insecure_tls)
    webhook_format(format).check_url(url, policy, resolve)
    return subscriptions.add_subscription(
        url, format, secret=secret, repos=repos, kinds=kinds, min_severity=min_severity, source="api"
    )
