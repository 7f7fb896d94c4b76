"""The webhook dispatcher: delivers due outbox rows, records every attempt, retries on the Standard
Webhooks schedule (feeds.webhooks.schedule).

- What an answer means is the subscription's format's (feeds.webhooks.formats.WebhookFormat.classify):
  2xx: delivered. 410 Gone: the subscription is disabled. 408, 429 and 5xx (and no answer at all:
  refused connection, time-out, DNS failure): retried, honouring `Retry-After` (capped; it uses up no
  step of the schedule), and the endpoint's other deliveries wait until then too. Any other status, a
  redirect among them (never followed): that delivery is retried on the schedule. Slack's permanent
  errors (`channel_is_archived`, `no_service`, `invalid_token`, ...) and Discord's unknown-webhook
  answer fail the delivery for good and disable the subscription.
- Order: one worker at a time holds an endpoint (a claim on its subscription, renewed by a heartbeat
  while it works, see storage.outbox) and sends its due deliveries one at a time, oldest event first.
  An endpoint that is down holds all of its deliveries, so they still leave in event order when it
  is back. The one exception: a delivery the receiver rejected by itself (another 4xx, a redirect)
  waits for its retry while the later ones go on, rather than blocking the endpoint for days.
  Receivers must still tolerate out-of-order and repeated webhook-ids (Standard Webhooks).
- Crashes: every attempt is logged as started before its request goes out. A worker killed mid-send
  stops renewing its claims; another worker takes its endpoints over once the lease runs out
  (`lease_s`, seconds), marks the cut-short attempt `interrupted` and sends that delivery again first,
  with the same webhook-id. A worker that lost its claim starts no further attempt.
- The URL is vetted again before every attempt (the format's `vet`) and the connection goes to the
  checked address (feeds.webhooks.safety), so DNS rebinding cannot reach a private address. A format
  that sends by itself (`send`: Apprise, feeds.webhooks.apprise) has its servers checked the same way,
  then sends, in a thread, within the time-out, every connection checked again as it is made (the same
  resolver; feeds.webhooks.socket_guard); a failure is retried as an endpoint that is down, a refused
  connection disables the subscription as a refused address does.
- At most 64 KB of a response is read; a delivery that takes longer than the time-out is a failure.
- `run_once(now)` delivers what is due and returns (tests drive it with a fake `now`, no sleeping);
  `run_forever(stop)` is the daemon's loop. It starts a round the moment deliveries are committed (a
  wake-up from the writing thread, and on PostgreSQL a NOTIFY from any process), when a retry this
  worker scheduled falls due, and otherwise every `poll_interval_s` (a slow safety tick). History is
  never touched: a failed webhook only updates its own delivery row.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import httpx
import structlog

from feeds.webhooks import FORMATS, Links
from feeds.webhooks.formats import Attempt, Reply, WebhookFormat
from feeds.webhooks.safety import Resolver, Target, TargetPolicy, UnresolvableTarget, UnsafeTarget, system_resolve
from feeds.webhooks.schedule import DEFAULT_DELAYS_S, RetrySchedule
from storage.errors import InvalidSubscription
from storage.health import Outage, write_failure
from storage.models import Subscription
from storage.outbox import Claim, OutboxItem, OutboxStore
from storage.sessions import utc_now
from storage.subscriptions import redact_url

log = structlog.get_logger(__name__)

MAX_RESPONSE_BYTES = 64 * 1024
PER_SUBSCRIPTION = 25  # deliveries of one endpoint taken per claim (they go one at a time)
STOP_CHECK_S = 0.5  # how often an idle loop looks at its stop event
OUTAGE_PAUSE_MAX_S = 30.0  # the longest pause between rounds while the database cannot be used
USER_AGENT = "hubwatch-webhooks/0.1"


@dataclass(frozen=True)
class DeliveryOptions:
    """The dispatcher's settings (tracker.config.DeliverySettings, mapped by the CLI)."""

    timeout_s: float = 15.0
    connect_timeout_s: float = 5.0
    retry_schedule_s: tuple[float, ...] = DEFAULT_DELAYS_S
    retry_after_max_s: float = 3600.0
    allow_private_targets: bool = False
    apprise_allow_plugins: tuple[str, ...] = ()  # Apprise schemes allowed although their server cannot be told
    apprise_allow_insecure_tls: bool = False  # Apprise URLs with verify=no
    concurrency: int = 4
    poll_interval_s: float = 1.0
    lease_s: float = 6.0  # a claim lasts this long without a heartbeat (renewed every lease_s / 3)
    endpoints_per_round: int = 16

    @property
    def policy(self) -> TargetPolicy:
        return TargetPolicy(self.allow_private_targets, frozenset(self.apprise_allow_plugins),
                            self.apprise_allow_insecure_tls)


class DatabaseOutage:
    """A database the dispatcher cannot use: one line when the outage starts, one when it ends, and a pause
    between rounds that doubles (from `first_s` to `max_s`) while it lasts, instead of a traceback a tick.
    `on_failed` hears the reason once an outage and `on_ended` its end (the CLI reports both to the storage
    state /healthz shows)."""

    def __init__(self, worker_id: str, first_s: float, max_s: float, on_failed: Callable[[str], object] | None = None,
                 on_ended: Callable[[], object] | None = None) -> None:
        self.worker_id = worker_id
        self.on_failed, self.on_ended = on_failed, on_ended
        self.count = Outage(first_s, max_s)

    def failed(self, reason: str) -> float:
        """A round or a heartbeat could not use the database: how long to pause before the next round."""
        first, pause_s = self.count.failed()
        if first:
            log.warning("webhook_dispatch_paused", reason=reason, worker_id=self.worker_id, retry_in_s=pause_s)
            if self.on_failed is not None:
                self.on_failed(reason)
        return pause_s

    def ended(self) -> None:
        """A round went through: the outage, if there was one, is over."""
        down_s = self.count.ended()
        if down_s is not None:
            log.info("webhook_dispatch_resumed", worker_id=self.worker_id, down_s=round(down_s, 1))
            if self.on_ended is not None:
                self.on_ended()


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
    """Delivers the outbox over one keep-alive httpx client (no redirects, no proxies from the environment),
    as one worker (`worker_id`) among any number sharing the database."""

    def __init__(
        self,
        outbox: OutboxStore,
        options: DeliveryOptions = DeliveryOptions(),
        secret_for: Callable[[Subscription], str | None] = lambda sub: sub.secret,
        links: Links | None = None,
        resolve: Resolver = system_resolve,
        clock: Callable[[], datetime] = utc_now,
        worker_id: str | None = None,
        on_database_failed: Callable[[str], object] | None = None,
        on_database_back: Callable[[], object] | None = None,
    ) -> None:
        self.outbox = outbox
        self.options = options
        self.secret_for = secret_for
        self.links = links or Links()
        self.resolve = resolve
        self.clock = clock
        self.worker_id = worker_id or new_worker_id()
        self.schedule = RetrySchedule(options.retry_schedule_s, options.retry_after_max_s)
        self.outage = DatabaseOutage(self.worker_id, max(options.poll_interval_s, 0.5), OUTAGE_PAUSE_MAX_S,
                                     on_database_failed, on_database_back)
        self._wake = threading.Event()
        self._woken_at: datetime | None = None  # the first wake-up since the last round began
        self._round_woken_at: datetime | None = None  # the wake-up the round in progress answers (None: its tick)
        self._retry_lock = threading.Lock()
        self._next_retry_at: datetime | None = None  # the earliest retry this worker scheduled in its round
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
        return self.options.lease_s

    def close(self) -> None:
        self._client.close()

    # -- modes -----------------------------------------------------------------------------------------

    def run_once(self, now: datetime | None = None, stop: threading.Event | None = None) -> DispatchReport:
        """Deliver everything due, endpoints in parallel, each endpoint's deliveries oldest first; return
        when nothing more is due. With `now`, everything happens at that time; without, on the clock."""
        at: Callable[[], datetime] = (lambda: now) if now is not None else self.clock
        report = DispatchReport()
        with ThreadPoolExecutor(max_workers=self.options.concurrency, thread_name_prefix="webhook") as pool:
            while not (stop is not None and stop.is_set()):
                claimed_at = at()
                # each endpoint's first attempt is begun in its claim's transaction: one write fewer before the send
                claims = self.outbox.claim_due(self.worker_id, claimed_at, self.lease_s,
                                               self.options.endpoints_per_round, PER_SUBSCRIPTION, start_first=True)
                if not claims:
                    break
                tried = report.attempts
                if len(claims) == 1:  # one endpoint (a commit's usual round): sent from this thread, no hop to a pool's
                    self._deliver_claim(claims[0], at, report, stop, claimed_at)
                else:
                    futures = [pool.submit(self._deliver_claim, claim, at, report, stop, claimed_at) for claim in claims]
                    for future in futures:
                        future.result()
                if report.attempts == tried:
                    break  # every claim was lost before its first attempt: leave the rest to their holders
        return report

    def run_forever(self, stop: threading.Event) -> None:
        """The daemon's loop: deliver what is due, then wait for a wake-up (deliveries committed, here or,
        on PostgreSQL, anywhere), the earliest retry this worker scheduled, or `poll_interval_s`, or until
        stopped; again. A heartbeat renews this worker's claims meanwhile; they are let go on the way out."""
        log.info("dispatcher_started", concurrency=self.options.concurrency, worker_id=self.worker_id,
                 poll_interval_s=self.options.poll_interval_s)
        stop_wakeups = self.outbox.on_queued(self.wake)
        listener_stop = threading.Event()
        listener = threading.Thread(target=self.outbox.listen,
                                    args=(self.wake, listener_stop, self._listener_lost, self._listener_back),
                                    name="webhook-listener", daemon=True)
        listener.start()
        try:
            with self._heartbeat():
                while not stop.is_set():
                    self._wake.clear()  # a commit from now on wakes the next wait
                    self._round_woken_at, self._woken_at = self._woken_at, None
                    with self._retry_lock:  # a retry not yet due is kept: an early wake-up (on PostgreSQL, the
                        # NOTIFY of a commit this worker was already woken for) must not make it wait for the tick
                        if self._next_retry_at is not None and self._next_retry_at <= self.clock():
                            self._next_retry_at = None
                    try:
                        self.run_once(None, stop)
                    except Exception as err:  # classified: a failing database pauses, anything else is a bug
                        reason = write_failure(err)
                        if reason is None:
                            log.exception("dispatcher_round_failed", worker_id=self.worker_id)
                        else:  # the next round after a pause, or at once when a commit says the database is back
                            self._idle(stop, self.outage.failed(reason))
                            continue
                    self.outage.ended()
                    self._idle(stop)
        finally:
            stop_wakeups()
            listener_stop.set()
            listener.join(timeout=5)
            try:
                self.outbox.release_claims(self.worker_id)
            finally:
                self.close()
                log.info("dispatcher_stopped", worker_id=self.worker_id)

    def wake(self) -> None:
        """Start the next round now (deliveries were queued). Thread-safe and quick: writers call it."""
        if self._woken_at is None:  # a race between two writers keeps either time: both are the same wake-up
            self._woken_at = self.clock()
        self._wake.set()

    def _idle(self, stop: threading.Event, wait_s: float | None = None) -> None:
        """Wait for a wake-up, this worker's earliest retry, the safety tick (or `wait_s`) or `stop`, whichever
        is first."""
        wait_s = self.options.poll_interval_s if wait_s is None else wait_s
        with self._retry_lock:
            retry_at = self._next_retry_at
        if retry_at is not None:
            wait_s = min(wait_s, max(0.0, (retry_at - self.clock()).total_seconds()))
        deadline = time.monotonic() + wait_s
        while not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or self._wake.wait(min(left, STOP_CHECK_S)):
                return

    def _listener_lost(self, error: str) -> None:
        log.warning("webhook_listener_lost", error=error, worker_id=self.worker_id)

    def _listener_back(self) -> None:
        log.info("webhook_listener_back", worker_id=self.worker_id)

    def _retry_due(self, at: datetime) -> None:
        """A retry (or an endpoint's hold) this worker set: the idle loop wakes for it."""
        with self._retry_lock:
            if self._next_retry_at is None or at < self._next_retry_at:
                self._next_retry_at = at

    def deliver_now(self, delivery_id: str) -> Attempt | None:
        """Try one pending delivery at once, whatever its schedule (a manual redelivery). None when it is
        not pending, another worker holds its endpoint, or its subscription is disabled."""
        now = self.clock()
        claim = self.outbox.claim_one(delivery_id, self.worker_id, now, self.lease_s)
        if claim is None:
            return None
        self._log_takeover(claim)
        try:
            with self._heartbeat():
                [item] = claim.items
                attempt_id = self.outbox.begin_attempt(item.delivery, self.worker_id, now, self.lease_s)
                if attempt_id is None:
                    return None
                attempt = self._attempt(item)
                self._record(item, attempt, attempt_id, now)
                return attempt
        finally:
            self.outbox.release_claims(self.worker_id, [claim.subscription_id])

    # -- one endpoint --------------------------------------------------------------------------------

    def _deliver_claim(
        self, claim: Claim, at: Callable[[], datetime], report: DispatchReport, stop: threading.Event | None,
        claimed_at: datetime | None = None,
    ) -> None:
        """The claimed endpoint's deliveries in event order, until one holds the endpoint back; then let go.
        The first one's attempt may have been begun with the claim (at `claimed_at`): it is sent whatever
        `stop` says, so that no attempt is left started and never sent."""
        self._log_takeover(claim)
        try:
            for n, item in enumerate(claim.items):
                begun = claim.first_attempt_id if n == 0 else None
                if begun is None and stop is not None and stop.is_set():
                    return
                now = claimed_at if begun is not None and claimed_at is not None else at()
                attempt_id = begun if begun is not None else self.outbox.begin_attempt(item.delivery, self.worker_id, now, self.lease_s)
                if attempt_id is None:
                    log.warning("webhook_claim_lost", subscription_id=claim.subscription_id, worker_id=self.worker_id)
                    return
                attempt = self._attempt(item)
                outcome, holds = self._record(item, attempt, attempt_id, now)
                report.count(outcome)
                if attempt.disable_reason or holds:
                    return  # disabled (the rest are dead), or the endpoint waits: the rest wait with it
        finally:
            self.outbox.release_claims(self.worker_id, [claim.subscription_id])

    def _log_takeover(self, claim: Claim) -> None:
        if claim.taken_from:
            log.warning("webhook_endpoint_taken_over", subscription_id=claim.subscription_id,
                        from_worker=claim.taken_from, worker_id=self.worker_id, interrupted=claim.interrupted)

    @contextmanager
    def _heartbeat(self) -> Iterator[None]:
        """Renew this worker's claims every lease_s / 3 while the block runs (a send may outlast a lease)."""
        done = threading.Event()

        def beat() -> None:
            while not done.wait(self.lease_s / 3):
                try:
                    self.outbox.renew_claims(self.worker_id, self.clock(), self.lease_s)
                except Exception as err:  # classified: a failing database is the outage's one line, not a traceback
                    reason = write_failure(err)
                    if reason is None:
                        log.exception("webhook_heartbeat_failed", worker_id=self.worker_id)
                    else:
                        self.outage.failed(reason)

        thread = threading.Thread(target=beat, name="webhook-heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join(timeout=5)

    def _attempt(self, item: OutboxItem) -> Attempt:
        sub = item.subscription
        fmt = FORMATS[sub.format]
        started = time.monotonic()
        try:
            target = fmt.vet(sub.url, self.options.policy, self.resolve)
        except UnsafeTarget as err:
            return Attempt("failed", error=str(err), disable_reason=f"refused address: {err}")
        except UnresolvableTarget as err:
            return Attempt("retry", error=str(err), endpoint_down=True)
        except InvalidSubscription as err:
            return Attempt("failed", error=str(err), disable_reason=f"invalid URL: {err}")
        if fmt.send is not None:  # the format sends by itself (Apprise connects on its own, off this thread)
            attempt = fmt.send(sub.url, item.event, self.links, self.options.timeout_s, self.options.connect_timeout_s,
                               self.options.policy, self.resolve)
            return replace(attempt, duration_ms=int((time.monotonic() - started) * 1000))
        if target is None:  # a format without `send` must name an address: one that does not is a bug, not the endpoint's
            return Attempt("failed", error=f"the {fmt.name} format gave no address to send to",
                           disable_reason=f"{fmt.name}: no address to send to")
        return self._post(fmt, item, target, started)

    def _post(self, fmt: WebhookFormat, item: OutboxItem, target: Target, started: float) -> Attempt:
        """POST the rendered event to the vetted address, reading at most MAX_RESPONSE_BYTES of the answer
        within the time-out; the format says what the answer means."""
        sub, delivery = item.subscription, item.delivery
        secret = self.secret_for(sub)
        if fmt.needs_secret and not secret:
            where = f"${sub.secret_env} is not set" if sub.secret_env else "the subscription has none"
            return Attempt("retry", error=f"no signing secret: {where}", endpoint_down=True)
        body = fmt.render(item.event, self.links)
        try:
            signed = fmt.headers(delivery.id, int(self.clock().timestamp()), body, secret)
        except InvalidSubscription as err:
            return Attempt("retry", error=f"cannot sign: {err}", endpoint_down=True)
        headers = {"content-type": fmt.content_type, "accept-encoding": "identity", "host": target.host_header, **signed}
        extensions = {"sni_hostname": target.hostname} if target.scheme == "https" else {}
        deadline = started + self.options.timeout_s
        try:
            with self._client.stream("POST", target.pinned_url, content=body, headers=headers, extensions=extensions) as resp:
                head = _read_at_most(resp, MAX_RESPONSE_BYTES, deadline)
                reply = Reply(resp.status_code, resp.headers, head.decode("utf-8", "replace").strip(), self.clock())
                attempt = fmt.classify(reply)
        except httpx.TimeoutException:
            attempt = Attempt("retry", error=f"no answer within {self.options.timeout_s:g} s (timed out)", endpoint_down=True)
        except httpx.HTTPError as err:
            attempt = Attempt("retry", error=f"{type(err).__name__}: {err}"[:500], endpoint_down=True)
        return replace(attempt, duration_ms=int((time.monotonic() - started) * 1000))

    def _record(self, item: OutboxItem, attempt: Attempt, attempt_id: int, now: datetime) -> tuple[str, bool]:
        """Complete the started attempt; returns the outcome counted and whether the endpoint's other
        deliveries now wait (it is down, or disabled)."""
        d, sub = item.delivery, item.subscription
        attempts = d.attempts + 1
        woken_at = self._round_woken_at
        fields = {"delivery_id": d.id, "subscription_id": sub.id, "event_id": d.event_id, "attempt": attempts,
                  "status_code": attempt.status_code, "duration_ms": attempt.duration_ms, "worker_id": self.worker_id,
                  # where the path from a Hub webhook spent its time: read with the ingest's lines by repo_id and sha
                  "repo_id": item.event.repo_id, "sha": item.event.sha, "attempt_at": now.isoformat(),
                  "woken_at": woken_at.isoformat() if woken_at is not None else None}
        if attempt.outcome == "delivered":
            self.outbox.mark_delivered(attempt_id, now, attempt.status_code, attempt.duration_ms)  # None: apprise (no HTTP status)
            log.info("webhook_delivered", **fields)
            return "delivered", False
        error = attempt.error or "failed"
        if attempt.outcome == "failed":
            self.outbox.mark_failed(attempt_id, attempt.status_code, error, attempt.duration_ms, attempt.disable_reason)
            log.warning("webhook_failed", error=error, permanent=True, **fields)
            if attempt.disable_reason:
                log.warning("webhook_subscription_disabled", subscription_id=sub.id, url=redact_url(sub.url),
                            reason=attempt.disable_reason)
            return "failed", True
        nxt = self.schedule.next_try(d.retry_step, d.first_attempt_at or now, now, attempt.retry_after_s)
        if nxt is None:
            hold_until = now + timedelta(seconds=self.schedule.delays_s[0] if self.schedule.delays_s else 1)
            self.outbox.mark_dead(attempt_id, attempt.status_code, f"gave up after {attempts} attempts: {error}",
                                  attempt.duration_ms, hold_until=hold_until if attempt.endpoint_down else None)
            if attempt.endpoint_down:
                self._retry_due(hold_until)
            log.error("webhook_dead", error=error, **fields)
            return "dead", attempt.endpoint_down
        self.outbox.mark_retry(attempt_id, nxt.at, attempt.status_code, error, attempt.duration_ms,
                               retry_step=nxt.step, hold_subscription=attempt.endpoint_down)
        self._retry_due(nxt.at)
        log.warning("webhook_failed", error=error, next_attempt_at=nxt.at.isoformat(), **fields)
        return "retried", attempt.endpoint_down


def new_worker_id() -> str:
    """host:pid:random, at most 64 characters: unique per dispatcher, readable in the attempt log."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _read_at_most(resp: httpx.Response, limit: int, deadline: float) -> bytes:
    """Up to `limit` bytes of the body, stopping early at the deadline; the rest is never read."""
    buf = bytearray()
    for chunk in resp.iter_raw():
        buf += chunk
        if len(buf) >= limit or time.monotonic() > deadline:
            break
    return bytes(buf[:limit])

