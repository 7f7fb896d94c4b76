"""The webhook dispatcher: delivers due outbox rows, records every attempt, retries on the Standard
Webhooks schedule.

- 2xx: delivered. 410 Gone: the subscription is disabled. 408, 429 and 5xx (and no answer at all:
  refused connection, time-out, DNS failure): retried, honouring `Retry-After` (capped), and the
  endpoint's other deliveries wait until then too. Any other status, a redirect among them (never
  followed): that delivery is retried on the schedule. Slack's permanent errors
  (`channel_is_archived`, `no_service`, `invalid_token`, ...) and Discord's unknown-webhook answer fail
  the delivery for good and disable the subscription.
- The URL is vetted again before every attempt and the connection goes to the checked address
  (feeds.webhooks.safety), so DNS rebinding cannot reach a private address.
- At most 64 KB of a response is read; a delivery that takes longer than the time-out is a failure.
- `run_once(now)` delivers what is due and returns (tests drive it with a fake `now`, no sleeping);
  `run_forever(stop)` is the daemon's loop. History is never touched: a failed webhook only updates
  its own delivery row.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

import httpx
import structlog

from feeds.webhooks import Links, generic, render
from feeds.webhooks.chat_text import visible
from feeds.webhooks.safety import (
    Resolver,
    UnresolvableTarget,
    UnsafeTarget,
    system_resolve,
    vet,
)
from storage.errors import InvalidSubscription
from storage.outbox import OutboxItem, OutboxStore
from storage.sessions import utc_now
from storage.subscriptions import Subscription, redact_url

log = structlog.get_logger(__name__)

# Seconds before attempt n+1 (Standard Webhooks): now, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h.
SCHEDULE_S = (0, 5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400)
MAX_RESPONSE_BYTES = 64 * 1024
PER_SUBSCRIPTION = 25  # deliveries of one endpoint claimed per round (they go one at a time)
USER_AGENT = "hubwatch-webhooks/0.1"
SLACK_PERMANENT = frozenset({
    "channel_is_archived", "channel_not_found", "invalid_token", "no_service", "no_service_id",
    "no_team", "team_disabled", "action_prohibited", "posting_to_general_channel_denied",
})
DISCORD_PERMANENT = frozenset({10015, 50027})  # Unknown Webhook, Invalid Webhook Token


@dataclass(frozen=True)
class DeliveryOptions:
    """The dispatcher's settings (tracker.config.DeliverySettings, mapped by the CLI)."""

    timeout_s: float = 15.0
    connect_timeout_s: float = 5.0
    max_attempts: int = 10
    retry_after_max_s: float = 3600.0
    allow_private_targets: bool = False
    concurrency: int = 4
    poll_interval_s: float = 1.0
    batch_size: int = 100


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


@dataclass
class DispatchReport:
    """Counts of one run_once."""

    delivered: int = 0
    retried: int = 0
    failed: int = 0
    dead: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def count(self, outcome: str) -> None:
        with self._lock:
            setattr(self, outcome, getattr(self, outcome) + 1)

    @property
    def attempts(self) -> int:
        return self.delivered + self.retried + self.failed + self.dead


class Dispatcher:
    """Delivers the outbox over one keep-alive httpx client (no redirects, no proxies from the environment)."""

    def __init__(
        self,
        outbox: OutboxStore,
        options: DeliveryOptions = DeliveryOptions(),
        secret_for: Callable[[Subscription], str | None] = lambda sub: sub.secret,
        links: Links | None = None,
        resolve: Resolver = system_resolve,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.outbox = outbox
        self.options = options
        self.secret_for = secret_for
        self.links = links or Links()
        self.resolve = resolve
        self.clock = clock
        self._client = httpx.Client(
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(options.timeout_s, connect=options.connect_timeout_s),
            limits=httpx.Limits(
                max_connections=options.concurrency * 2, max_keepalive_connections=options.concurrency * 2
            ),
            headers={"user-agent": USER_AGENT},
        )

    @property
    def lease_s(self) -> float:
        """How long claimed deliveries stay ours: long enough to try a whole round of one endpoint."""
        return PER_SUBSCRIPTION * (self.options.timeout_s + self.options.connect_timeout_s) + 30

    def close(self) -> None:
        self._client.close()

    # -- modes -----------------------------------------------------------------------------------------

    def run_once(self, now: datetime | None = None, stop: threading.Event | None = None) -> DispatchReport:
        """Deliver everything due at `now`, endpoints in parallel, each endpoint's deliveries oldest first;
        return when nothing more is due at `now`."""
        now = now or self.clock()
        report = DispatchReport()
        with ThreadPoolExecutor(max_workers=self.options.concurrency, thread_name_prefix="webhook") as pool:
            while not (stop is not None and stop.is_set()):
                items = self.outbox.due_deliveries(
                    now, limit=self.options.batch_size, lease_s=self.lease_s, per_subscription=PER_SUBSCRIPTION
                )
                if not items:
                    break
                groups: dict[int, list[OutboxItem]] = defaultdict(list)
                for item in items:
                    groups[item.delivery.subscription_id].append(item)
                futures = [
                    pool.submit(self._deliver_group, sorted(g, key=lambda i: i.delivery.event_seq), now, report, stop)
                    for g in groups.values()
                ]
                for future in futures:
                    future.result()
        return report

    def run_forever(self, stop: threading.Event) -> None:
        """The daemon's loop: deliver what is due, wait `poll_interval_s` (or until stopped), again."""
        log.info("dispatcher_started", concurrency=self.options.concurrency)
        try:
            while not stop.is_set():
                try:
                    self.run_once(self.clock(), stop)
                except Exception:
                    log.exception("dispatcher_round_failed")
                stop.wait(self.options.poll_interval_s)
        finally:
            self.close()
            log.info("dispatcher_stopped")

    def deliver_now(self, delivery_id: str) -> Attempt | None:
        """Try one pending delivery at once, whatever its schedule (a manual redelivery). None when it is
        not pending, is being sent by another dispatcher, or its subscription is disabled."""
        now = self.clock()
        item = self.outbox.claim(delivery_id, now, self.lease_s)
        if item is None:
            return None
        attempt = self._attempt(item)
        self._record(item, attempt, now)
        return attempt

    # -- one endpoint --------------------------------------------------------------------------------

    def _deliver_group(
        self, items: list[OutboxItem], now: datetime, report: DispatchReport, stop: threading.Event | None
    ) -> None:
        for i, item in enumerate(items):
            if stop is not None and stop.is_set():
                self.outbox.release([it.delivery.id for it in items[i:]], now)
                return
            attempt = self._attempt(item)
            outcome, hold_until = self._record(item, attempt, now)
            report.count(outcome)
            if attempt.disable_reason:
                return  # disabling made the rest dead
            if hold_until is not None:
                self.outbox.release([it.delivery.id for it in items[i + 1:]], hold_until)
                return

    def _attempt(self, item: OutboxItem) -> Attempt:
        sub, delivery = item.subscription, item.delivery
        started = time.monotonic()
        try:
            target = vet(sub.url, self.options.allow_private_targets, self.resolve)
        except UnsafeTarget as err:
            return Attempt("failed", error=str(err), disable_reason=f"refused address: {err}")
        except UnresolvableTarget as err:
            return Attempt("retry", error=str(err), endpoint_down=True)
        except InvalidSubscription as err:
            return Attempt("failed", error=str(err), disable_reason=f"invalid URL: {err}")
        secret = self.secret_for(sub)
        if sub.format == "generic" and not secret:
            where = f"${sub.secret_env} is not set" if sub.secret_env else "the subscription has none"
            return Attempt("retry", error=f"no signing secret: {where}", endpoint_down=True)
        body = render(item.event, sub.format, self.links)
        try:
            signed = generic.headers(delivery.id, int(self.clock().timestamp()), body, secret)
        except InvalidSubscription as err:
            return Attempt("retry", error=f"cannot sign: {err}", endpoint_down=True)
        headers = {"content-type": "application/json", "accept-encoding": "identity", "host": target.host_header, **signed}
        extensions = {"sni_hostname": target.hostname} if target.scheme == "https" else {}
        deadline = started + self.options.timeout_s
        try:
            with self._client.stream("POST", target.pinned_url, content=body, headers=headers, extensions=extensions) as resp:
                head = _read_at_most(resp, MAX_RESPONSE_BYTES, deadline)
                attempt = self._classify(sub, resp.status_code, resp.headers, head)
        except httpx.TimeoutException:
            attempt = Attempt("retry", error=f"no answer within {self.options.timeout_s:g} s (timed out)", endpoint_down=True)
        except httpx.HTTPError as err:
            attempt = Attempt("retry", error=f"{type(err).__name__}: {err}"[:500], endpoint_down=True)
        return replace(attempt, duration_ms=int((time.monotonic() - started) * 1000))

    def _classify(self, sub: Subscription, code: int, headers: httpx.Headers, head: bytes) -> Attempt:
        text = head.decode("utf-8", "replace").strip()
        snippet = visible(text[:300], newlines=False)
        if 200 <= code < 300:
            return Attempt("delivered", code)
        if code == 410:
            return Attempt("failed", code, "410 Gone: the receiver retired this endpoint", disable_reason="410 Gone")
        if code in (408, 429) or code >= 500:
            wait_s = _retry_after_s(headers.get("retry-after"), text if sub.format == "discord" else "", self.clock())
            return Attempt("retry", code, f"{code}: {snippet}" if snippet else str(code), wait_s, endpoint_down=True)
        if 300 <= code < 400:
            return Attempt("retry", code, f"redirect ({code}) to {_where(headers.get('location'))} not followed")
        if sub.format == "slack" and text in SLACK_PERMANENT:
            return Attempt("failed", code, f"Slack: {text}", disable_reason=f"Slack answered {text}")
        if sub.format == "discord" and code in (401, 404) and _discord_code(text) in DISCORD_PERMANENT:
            return Attempt("failed", code, f"Discord: {snippet}", disable_reason=f"Discord answered {code}: {snippet}")
        return Attempt("retry", code, f"{code}: {snippet}" if snippet else str(code))

    def _record(self, item: OutboxItem, attempt: Attempt, now: datetime) -> tuple[str, datetime | None]:
        """Write the attempt; returns the outcome counted and, when the endpoint is down, until when
        its other deliveries wait."""
        d, sub = item.delivery, item.subscription
        fields = {"delivery_id": d.id, "subscription_id": sub.id, "event_id": d.event_id,
                  "status_code": attempt.status_code, "duration_ms": attempt.duration_ms}
        if attempt.outcome == "delivered":
            self.outbox.mark_delivered(d.id, now, attempt.status_code or 200, attempt.duration_ms)
            log.info("webhook_delivered", attempt=d.attempts + 1, **fields)
            return "delivered", None
        error = attempt.error or "failed"
        if attempt.outcome == "failed":
            self.outbox.mark_failed(d.id, now, attempt.status_code, error, attempt.duration_ms, attempt.disable_reason)
            log.warning("webhook_failed", error=error, permanent=True, **fields)
            if attempt.disable_reason:
                log.warning("webhook_subscription_disabled", subscription_id=sub.id, url=redact_url(sub.url),
                            reason=attempt.disable_reason)
            return "failed", None
        attempts = d.attempts + 1
        next_at = now + timedelta(seconds=self._delay_s(attempts, attempt.retry_after_s))
        if attempts >= self.options.max_attempts:
            self.outbox.mark_dead(d.id, now, attempt.status_code, f"gave up after {attempts} attempts: {error}",
                                  attempt.duration_ms)
            log.error("webhook_dead", attempts=attempts, error=error, **fields)
            return "dead", next_at if attempt.endpoint_down else None
        self.outbox.mark_retry(d.id, now, next_at, attempt.status_code, error, attempt.duration_ms,
                               hold_subscription=attempt.endpoint_down)
        log.warning("webhook_failed", error=error, attempt=attempts, next_attempt_at=next_at.isoformat(), **fields)
        return "retried", next_at if attempt.endpoint_down else None

    def _delay_s(self, attempts: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None:
            return min(max(retry_after_s, 1.0), self.options.retry_after_max_s)
        return SCHEDULE_S[min(attempts, len(SCHEDULE_S) - 1)]


def _read_at_most(resp: httpx.Response, limit: int, deadline: float) -> bytes:
    """Up to `limit` bytes of the body, stopping early at the deadline; the rest is never read."""
    buf = bytearray()
    for chunk in resp.iter_raw():
        buf += chunk
        if len(buf) >= limit or time.monotonic() > deadline:
            break
    return bytes(buf[:limit])


def _retry_after_s(header: str | None, body: str, now: datetime) -> float | None:
    """Retry-After as seconds or an HTTP date; else Discord's JSON `retry_after` (seconds)."""
    if header:
        try:
            return max(0.0, float(header))
        except ValueError:
            pass
        try:
            return max(0.0, (parsedate_to_datetime(header) - now).total_seconds())
        except (TypeError, ValueError):
            pass
    if body.startswith("{"):
        try:
            value = json.loads(body).get("retry_after")
            return max(0.0, float(value)) if value is not None else None
        except (ValueError, TypeError, AttributeError):
            return None
    return None


def _discord_code(text: str) -> int | None:
    try:
        code = json.loads(text).get("code")
    except (ValueError, AttributeError):
        return None
    return code if isinstance(code, int) else None


def _where(location: str | None) -> str:
    if not location:
        return "nowhere (no Location)"
    return redact_url(location) if "://" in location else "a relative location"
