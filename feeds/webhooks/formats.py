"""What a webhook format is: one typed object (`WebhookFormat`) per format, built in that format's module
and listed once in the registry (feeds.webhooks.FORMATS).

A format says how its URL is checked when a subscription is made (`check_url`) and before every attempt
(`vet`), how its URL is shown (`redact`), whether it needs a signing secret or takes one at all, how an
event becomes its message (`render`) and headers (`headers`), and what a receiver's answer means
(`classify`). A format whose `send` is set delivers by itself (Apprise); the others are POSTed by the
dispatcher to the address `vet` checked.

Which formats exist, which are signed and which are sent over plain HTTP is vocabulary that storage and
the config check need too: it lives in storage.kinds (WEBHOOK_FORMATS, HTTP_WEBHOOK_FORMATS,
SIGNED_WEBHOOK_FORMATS), and a format object reads its secret and URL rules from there.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from feeds.webhooks import safety
from feeds.webhooks.chat_text import visible
from feeds.webhooks.safety import Resolver, Target, TargetPolicy
from storage.backoff import retry_after_s
from storage.kinds import HTTP_WEBHOOK_FORMATS, SIGNED_WEBHOOK_FORMATS
from storage.models import Event
from storage.subscriptions import redact_url, secret_keys

RETRY_STATUSES = frozenset({408, 429})  # and every 5xx: the endpoint is down or busy, try again later


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


@dataclass(frozen=True)
class Attempt:
    """What one try came to: delivered, retry (later) or failed (for good)."""

    outcome: str
    status_code: int | None = None
    error: str | None = None
    retry_after_s: float | None = None
    endpoint_down: bool = False  # hold the subscription's other deliveries too
    disable_reason: str | None = None
    duration_ms: int = 0


@dataclass(frozen=True)
class Reply:
    """A receiver's answer to one POST: its status, headers, the start of its body (decoded, stripped)
    and when it came (a `Retry-After` date is measured from then)."""

    status_code: int
    headers: Mapping[str, str]  # case-insensitive lookups (httpx.Headers): keys asked for in lower case
    text: str
    received_at: datetime

    @property
    def retryable(self) -> bool:
        """408, 429 or 5xx: the endpoint is down or busy; it may say when to come back."""
        return self.status_code in RETRY_STATUSES or self.status_code >= 500

    @property
    def refused(self) -> bool:
        """The receiver rejected this delivery by itself (a 4xx other than 408, 410 and 429, or another
        status that is neither success, redirect nor retryable): where formats look for permanent errors."""
        code = self.status_code
        return not (200 <= code < 400 or code == 410 or self.retryable)

    @property
    def snippet(self) -> str:
        return visible(self.text[:300], newlines=False)

    def described(self) -> str:
        return f"{self.status_code}: {self.snippet}" if self.snippet else str(self.status_code)


def classify_reply(reply: Reply, told_wait_s: float | None = None) -> Attempt:
    """What any HTTP receiver's answer means. 2xx: delivered. 410: the subscription is disabled. 408, 429,
    5xx: retried after the `Retry-After` it sent (else `told_wait_s`, a wait the format's body gave), and
    the endpoint's other deliveries wait too. A redirect is never followed; it and any other status retry
    that delivery on the schedule."""
    code = reply.status_code
    if 200 <= code < 300:
        return Attempt("delivered", code)
    if code == 410:
        return Attempt("failed", code, "410 Gone: the receiver retired this endpoint", disable_reason="410 Gone")
    if reply.retryable:
        wait_s = retry_after_s(reply.headers.get("retry-after"), reply.received_at)
        return Attempt("retry", code, reply.described(), told_wait_s if wait_s is None else wait_s, endpoint_down=True)
    if 300 <= code < 400:
        return Attempt("retry", code, f"redirect ({code}) to {_where(reply.headers.get('location'))} not followed")
    return Attempt("retry", code, reply.described())


def sign(msg_id: str, timestamp: int, body: bytes, secret: str) -> str:
    """The `webhook-signature` value: one `v1,<base64>` per key in the secret, space-separated."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return " ".join(
        "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode("ascii")
        for key in secret_keys(secret)
    )


def standard_headers(msg_id: str, timestamp: int, body: bytes, secret: str | None) -> dict[str, str]:
    """Standard Webhooks headers (`webhook-id`, `webhook-timestamp`), and `webhook-signature` when the
    subscription has a secret; InvalidSubscription when that secret is malformed."""
    out = {"webhook-id": msg_id, "webhook-timestamp": str(timestamp)}
    if secret:
        out["webhook-signature"] = sign(msg_id, timestamp, body, secret)
    return out


# url, policy, resolve -> None, or raise InvalidSubscription / safety.UnsafeTarget.
UrlCheck = Callable[[str, TargetPolicy, Resolver], None]
# url, policy, resolve -> the address to POST to; None when the format sends by itself.
Vet = Callable[[str, TargetPolicy, Resolver], Target | None]
# url, event, links, timeout_s, connect_timeout_s, policy, resolve -> what the attempt came to (the format
# holds its connections to the policy itself).
Send = Callable[[str, Event, Links, float, float, TargetPolicy, Resolver], Attempt]


def check_http_url(url: str, policy: TargetPolicy, resolve: Resolver) -> None:
    """A posted format's URL at subscription time: the address policy of feeds.webhooks.safety."""
    safety.check_url(url, policy.allow_private, resolve)


def vet_http_url(url: str, policy: TargetPolicy, resolve: Resolver) -> Target:
    """A posted format's URL before an attempt: the checked address the dispatcher connects to."""
    return safety.vet(url, policy.allow_private, resolve)


@dataclass(frozen=True)
class WebhookFormat:
    """Everything hubwatch knows about one webhook format (the `format` of a subscription)."""

    name: str
    render: Callable[[Event, Links], bytes]  # the message (for a format that sends by itself: its preview)
    classify: Callable[[Reply], Attempt] = classify_reply
    headers: Callable[[str, int, bytes, str | None], dict[str, str]] = standard_headers
    check_url: UrlCheck = check_http_url  # when a subscription is made from user input
    vet: Vet = vet_http_url  # before every attempt (the dispatcher connects to the address it returns)
    send: Send | None = None  # set: the format delivers by itself, the dispatcher posts nothing
    redact: Callable[[str], str] = redact_url  # the URL as listings and logs show it
    content_type: str = "application/json"

    @property
    def posted(self) -> bool:
        """Sent by HTTP POST to an http(s) URL (else the URL names a service, e.g. an Apprise URL)."""
        return self.name in HTTP_WEBHOOK_FORMATS

    @property
    def needs_secret(self) -> bool:
        """Every delivery is signed: a subscription without a secret gets one, and is not sent without."""
        return self.name in SIGNED_WEBHOOK_FORMATS

    @property
    def takes_secret(self) -> bool:
        """A secret may be given (and then signs). Formats not posted carry their credentials in the URL."""
        return self.posted

    def shown_url(self, url: str, full: bool = False) -> str:
        """The URL as a listing shows it: redacted. `full` (the answer that created the subscription) shows
        it whole, unless the format's URLs carry credentials (an Apprise URL is redacted even then)."""
        return url if full and self.posted else self.redact(url)


def _where(location: str | None) -> str:
    if not location:
        return "nowhere (no Location)"
    return redact_url(location) if "://" in location else "a relative location"
