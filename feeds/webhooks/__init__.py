"""Outbound webhooks: the message formats (generic Standard Webhooks, Slack, Discord, and Apprise
notifications to the service an Apprise URL names), the address policy for user-given URLs, and
`subscribe`, the one way to add a subscription from user input.

A format module has `CONTENT_TYPE` and `render(event, links) -> bytes`; the dispatcher
(feeds/dispatcher.py) adds the Standard Webhooks headers and signs generic deliveries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

from feeds.webhooks import apprise, discord, generic, slack
from feeds.webhooks.safety import Resolver, check_url, system_resolve
from storage.models import Event, Subscription
from storage.subscription_store import SubscriptionStore

FORMATS: dict[str, ModuleType] = {"generic": generic, "slack": slack, "discord": discord, "apprise": apprise}


@dataclass(frozen=True)
class Links:
    """Where a message points: the commit on the Hub, and this server's page when it has a public URL."""

    hub_endpoint: str = "https://huggingface.co"
    public_url: str = ""

    def for_event(self, event: Event) -> dict[str, str]:
        hub = self.hub_endpoint.rstrip("/")
        links = {"repo": f"{hub}/{event.repo_id}"}
        if event.sha:
            links["commit"] = f"{hub}/{event.repo_id}/commit/{event.sha}"
        if self.public_url:
            page = f"{self.public_url.rstrip('/')}/repos/{event.repo_id}"
            links["page"] = f"{page}/revisions/{event.sha}" if event.sha else page
        return links

    def primary(self, event: Event) -> str:
        """The one link a chat message leads to: our revision page, else the commit, else the repo."""
        links = self.for_event(event)
        return links.get("page") or links.get("commit") or links["repo"]


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
) -> Subscription:
    """Add an API subscription from user input: the URL is checked (syntax, then every address it
    resolves to) before it is stored. Raises InvalidSubscription or safety.UnsafeTarget with a message
    for the user. A generic subscription without a secret gets a new one on the returned row."""
    (apprise.check_url if format == "apprise" else check_url)(url, allow_private=allow_private, resolve=resolve)
    return subscriptions.add_subscription(
        url, format, secret=secret, repos=repos, kinds=kinds, min_severity=min_severity, source="api"
    )
