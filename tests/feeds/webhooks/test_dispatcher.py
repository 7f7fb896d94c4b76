"""The dispatcher against real receivers on loopback, driven with run_once and a fake `now` (no sleeps).

Signatures are checked with the `standardwebhooks` package, an implementation that is not ours.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError
from structlog.testing import capture_logs

from feeds.webhooks import subscribe as subscribe_checked
from feeds.webhooks.dispatcher import DeliveryOptions, Dispatcher
from feeds.webhooks.schedule import DEFAULT_DELAYS_S
from storage.delivery_queue import delivery_id
from storage.front import Storage
from storage.outbox import OutboxItem, OutboxStore
from storage.subscription_store import SubscriptionStore
from storage.subscriptions import new_secret
from tests.support.clock import T0
from tests.support.webhooks import OLD_SECRET, SECRET, Receiver, Reply, emit, subscribe

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _drive(dispatcher: Dispatcher, outbox: OutboxStore, start: datetime = T0, rounds: int = 30) -> list[datetime]:
    """run_once at `start`, then at each next due time, until nothing is pending; the times used."""
    now, times = start, []
    for _ in range(rounds):
        dispatcher.run_once(now)
        times.append(now)
        due = [_due_at(i) for i in outbox.list_deliveries(status="pending")]
        if not due:
            return times
        now = min(due)
    raise AssertionError("deliveries still pending after every round")


def _due_at(item: OutboxItem) -> datetime:
    """When a pending delivery can go: its own time, or later if its endpoint is held back."""
    return max(item.delivery.next_attempt_at, item.subscription.backoff_until or item.delivery.next_attempt_at)


def _history(store: Storage) -> list[tuple]:
    return [(e.seq, e.event_id, e.title, e.severity, e.payload) for e in store.history.list_events(limit=10_000)]


def test_generic_deliveries_carry_verifiable_standard_webhooks_signatures(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """Body {type, timestamp, data}; webhook-id is the delivery id; every rotating secret's signature verifies."""
    sub = subscribe(subscriptions, receiver.url, secret=f"{SECRET} {OLD_SECRET}")
    [event_id] = emit(store, commit_title="fix <b>it</b>\x1b[31m", summaries=("a", "b"))
    report = make_dispatcher().run_once(T0)
    assert report.delivered == 1
    [got] = receiver.accepted
    for secret in (SECRET, OLD_SECRET):
        payload = Webhook(secret).verify(got.body, got.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(got.body, got.headers)
    assert got.headers["webhook-id"] == delivery_id(event_id, sub.id)
    assert got.headers["content-type"] == "application/json" and len(got.headers["webhook-signature"].split()) == 2
    assert payload["type"] == "revision.ingested" and payload["timestamp"] == T0.isoformat()
    data = payload["data"]
    assert data["event_id"] == event_id and data["repo_id"] == "org/model" and data["severity"] == "warning"
    assert data["commit_title"] == "fix <b>it</b>\x1b[31m"  # generic receivers get the data exactly, JSON-escaped
    assert data["change_kinds"] == ["chat_template"] and data["summaries"] == ["a", "b"]
    assert data["links"]["page"] == f"https://hubwatch.example/repos/org/model/revisions/{data['sha']}"
    assert data["links"]["commit"] == f"https://huggingface.co/org/model/commit/{data['sha']}"
    [item] = outbox.list_deliveries()
    assert (item.delivery.status, item.delivery.attempts, item.delivery.last_status_code) == ("delivered", 1, 204)
    assert item.delivery.delivered_at == T0


def test_a_receiver_down_for_n_attempts_then_back_gets_every_event_exactly_once(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """503 three times, then up: every event arrives once per webhook-id, in order, on the retry schedule."""
    receiver.plan = [Reply(503), Reply(503), Reply(503)]
    subscribe(subscriptions, receiver.url)
    event_ids = emit(store, n=4)
    times = _drive(make_dispatcher(), outbox)
    assert times == [T0, _at(5), _at(5 + 300), _at(5 + 300 + 1800)]
    accepted = receiver.accepted
    ids = [r.headers["webhook-id"] for r in accepted]
    assert len(ids) == len(set(ids)) == 4
    assert set(ids) == {i.delivery.id for i in outbox.list_deliveries()}
    assert [Webhook(SECRET).verify(r.body, r.headers)["data"]["event_id"] for r in accepted] == event_ids
    assert len(receiver.requests) == 3 + 4
    first = outbox.list_deliveries()[-1]
    log = outbox.attempts(first.delivery.id)
    assert [(a.attempted_at, a.status_code, a.outcome) for a in log] == [
        (T0, 503, "retry"), (_at(5), 503, "retry"), (_at(305), 503, "retry"), (_at(2105), 204, "delivered")
    ]
    assert sorted(i.delivery.attempts for i in outbox.list_deliveries()) == [1, 1, 1, 4]  # the others waited


def test_the_retry_schedule_ends_in_a_dead_delivery_and_history_is_untouched(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """Every attempt failing: the Standard Webhooks delays in turn, then dead; events and revisions never change."""
    receiver.default = Reply(500, body=b"boom")
    subscribe(subscriptions, receiver.url)
    emit(store)
    before = _history(store)
    times = _drive(make_dispatcher(), outbox)
    offsets = [(t - T0).total_seconds() for t in times]
    assert offsets == [sum(DEFAULT_DELAYS_S[:i]) for i in range(10)]
    [item] = outbox.list_deliveries()
    assert item.delivery.status == "dead" and item.delivery.attempts == 10
    assert item.delivery.last_error == "gave up after 10 attempts: 500: boom"
    assert _history(store) == before


def test_a_redelivered_dead_delivery_starts_the_retry_schedule_afresh(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher, clock
) -> None:
    """Dead after the whole schedule, then redelivered a day later with the receiver still failing: retried
    after the first delay, then the second (not dead at the first failure); the attempt log keeps every try."""
    receiver.default = Reply(500, body=b"boom")
    subscribe(subscriptions, receiver.url)
    emit(store)
    dispatcher = make_dispatcher()
    _drive(dispatcher, outbox)
    [item] = outbox.list_deliveries()
    assert item.delivery.status == "dead" and item.delivery.attempts == 10
    later = clock.advance(sum(DEFAULT_DELAYS_S) + 86400)
    outbox.redeliver(item.delivery.id)
    receiver.plan = [Reply(500, body=b"boom"), Reply(500, body=b"boom")]
    receiver.default = Reply(204)
    times = _drive(dispatcher, outbox, start=later)
    assert times == [later, later + timedelta(seconds=5), later + timedelta(seconds=5 + 300)]
    [item] = outbox.list_deliveries()
    assert (item.delivery.status, item.delivery.attempts) == ("delivered", 13)
    log = outbox.attempts(item.delivery.id)
    assert [a.outcome for a in log] == ["retry"] * 9 + ["dead", "retry", "retry", "delivered"]
    assert [a.attempt for a in log] == list(range(1, 14))


def test_410_gone_disables_the_subscription(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """A 410 fails the delivery, disables the subscription, kills its pending deliveries and stops new ones."""
    receiver.default = Reply(410)
    sub = subscribe(subscriptions, receiver.url)
    emit(store, n=3)
    before = _history(store)
    make_dispatcher().run_once(T0)
    assert len(receiver.requests) == 1
    statuses = sorted((i.delivery.status, i.delivery.last_error) for i in outbox.list_deliveries())
    assert statuses == [
        ("dead", "subscription disabled: 410 Gone"), ("dead", "subscription disabled: 410 Gone"),
        ("failed", "410 Gone: the receiver retired this endpoint"),
    ]
    disabled = subscriptions.get_subscription(sub.id)
    assert not disabled.enabled and disabled.disabled_reason == "410 Gone"
    assert _history(store) == before
    emit(store)
    assert len(outbox.list_deliveries()) == 3


@pytest.mark.parametrize(
    ("reply", "fmt", "wait_s"),
    [
        (Reply(429, {"Retry-After": "120"}), "generic", 120),
        (Reply(503, {"Retry-After": "45"}), "generic", 45),
        (Reply(429, {"Retry-After": "999999"}), "slack", 600),  # capped at retry_after_max_s
        (Reply(429, body=b'{"message": "You are being rate limited.", "retry_after": 2.5, "global": false}'), "discord", 2.5),
        (Reply(429, {"Retry-After": "0"}), "slack", 1),  # never sooner than a second
        (Reply(429), "slack", 5),  # none given: the schedule
    ],
)
def test_retry_after_is_honoured(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher,
    reply: Reply, fmt: str, wait_s: float,
) -> None:
    """429/503 with Retry-After (seconds, or Discord's JSON retry_after) waits that long, capped; not a moment less."""
    receiver.plan = [reply]
    subscribe(subscriptions, receiver.url, fmt)
    emit(store, n=2)
    dispatcher = make_dispatcher(retry_after_max_s=600)
    dispatcher.run_once(T0)
    assert len(receiver.requests) == 1
    assert {_due_at(i) for i in outbox.list_deliveries()} == {_at(wait_s)}
    dispatcher.run_once(_at(wait_s) - timedelta(milliseconds=1))
    assert len(receiver.requests) == 1
    dispatcher.run_once(_at(wait_s))
    assert len(receiver.accepted) == 2


def test_retry_after_as_an_http_date_is_honoured(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """Retry-After may be an HTTP date: the wait is measured from the dispatcher's clock."""
    receiver.plan = [Reply(503, {"Retry-After": format_datetime(datetime.now(UTC) + timedelta(seconds=90), usegmt=True)})]
    subscribe(subscriptions, receiver.url)
    emit(store)
    make_dispatcher().run_once(T0)
    [item] = outbox.list_deliveries()
    assert 80 <= (item.delivery.next_attempt_at - T0).total_seconds() <= 90


def test_redirects_are_not_followed(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_receiver, make_dispatcher
) -> None:
    """A 302 elsewhere (or to itself, a loop) is not followed: one request, recorded as a failed attempt."""
    elsewhere = make_receiver()
    receiver.plan = [Reply(302, {"Location": elsewhere.url + "?token=secret"}), Reply(307, {"Location": receiver.url})]
    subscribe(subscriptions, receiver.url)
    emit(store, n=2)
    make_dispatcher().run_once(T0)
    assert len(receiver.requests) == 2 and elsewhere.requests == []
    errors = sorted((i.delivery.status, i.delivery.last_status_code, i.delivery.last_error) for i in outbox.list_deliveries())
    assert errors == [
        ("pending", 302, f"redirect (302) to http://127.0.0.1:{elsewhere.port}/… not followed"),
        ("pending", 307, f"redirect (307) to http://127.0.0.1:{receiver.port}/… not followed"),
    ]


def test_a_slow_receiver_times_out(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """A receiver that never answers costs one time-out, is recorded as such, and the retry gets through."""
    receiver.plan = [Reply(stall=True)]
    subscribe(subscriptions, receiver.url)
    emit(store)
    dispatcher = make_dispatcher(timeout_s=0.5, connect_timeout_s=0.5)
    started = time.monotonic()
    dispatcher.run_once(T0)
    assert time.monotonic() - started < 5
    [item] = outbox.list_deliveries()
    assert item.delivery.status == "pending" and item.delivery.last_error == "no answer within 0.5 s (timed out)"
    assert item.delivery.next_attempt_at == _at(5)
    dispatcher.run_once(_at(5))
    assert len(receiver.accepted) == 1 and outbox.list_deliveries()[0].delivery.status == "delivered"


def test_a_huge_response_body_is_not_read(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """A 2xx with a 1 GB body is a delivery after reading at most 64 KB; a 500's huge body is cut in the log."""
    receiver.plan = [Reply(500, body=b"E" * 100_000), Reply(200, body_bytes=1 << 30)]
    subscribe(subscriptions, receiver.url)
    emit(store)
    dispatcher = make_dispatcher()
    dispatcher.run_once(T0)
    [item] = outbox.list_deliveries()
    assert item.delivery.last_error.startswith("500: EEE") and len(item.delivery.last_error) < 320
    dispatcher.run_once(_at(5))
    assert outbox.list_deliveries()[0].delivery.status == "delivered"
    assert receiver.bytes_sent < 64 << 20  # it stopped writing long before 1 GB: we hung up


def test_dns_rebinding_to_a_private_address_is_refused_at_delivery(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """A host that was public at subscription time and resolves to loopback at delivery: refused, disabled."""
    url = f"http://hooks.example:{receiver.port}/hook"
    sub = subscribe_checked(subscriptions, url, "generic", allow_private=False, secret=SECRET,
                            resolve=lambda host, port: ["93.184.215.14"])
    emit(store)
    make_dispatcher(allow_private_targets=False, resolve=lambda host, port: ["127.0.0.1"]).run_once(T0)
    assert receiver.requests == []
    [item] = outbox.list_deliveries()
    assert item.delivery.status == "failed" and "loopback address (127.0.0.1)" in item.delivery.last_error
    assert subscriptions.get_subscription(sub.id).disabled_reason.startswith("refused address: hooks.example resolves to")


def test_the_connection_goes_to_the_checked_address(
    store: Storage, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """Delivery connects to the address it vetted and sends the URL's own Host header."""
    subscribe(subscriptions, f"http://hooks.example:{receiver.port}/hook?x=1")
    emit(store)
    make_dispatcher(resolve=lambda host, port: ["127.0.0.1"]).run_once(T0)
    [got] = receiver.accepted
    assert got.headers["host"] == f"hooks.example:{receiver.port}" and got.path == "/hook?x=1"


def test_slack_permanent_errors_fail_for_good(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """Slack's plain-text channel_is_archived is permanent: delivery failed, subscription disabled."""
    receiver.default = Reply(404, body=b"channel_is_archived")
    sub = subscribe(subscriptions, receiver.url, "slack")
    emit(store, n=2)
    make_dispatcher().run_once(T0)
    assert len(receiver.requests) == 1
    assert sorted(i.delivery.status for i in outbox.list_deliveries()) == ["dead", "failed"]
    assert subscriptions.get_subscription(sub.id).disabled_reason == "Slack answered channel_is_archived"


def test_a_rejected_payload_does_not_hold_back_the_others(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """A 400 for one delivery retries that one on the schedule; the endpoint's other deliveries go on."""
    receiver.plan = [Reply(400, body=b"bad payload")]
    subscribe(subscriptions, receiver.url)
    emit(store, n=3)
    make_dispatcher().run_once(T0)
    assert len(receiver.requests) == 3
    assert sorted((i.delivery.status, i.delivery.last_error) for i in outbox.list_deliveries()) == [
        ("delivered", None), ("delivered", None), ("pending", "400: bad payload")
    ]


def test_a_missing_signing_secret_is_reported_and_nothing_is_sent_unsigned(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """A config subscription whose secret variable is unset: nothing goes out, the log says which variable."""
    subscriptions.add_subscription(receiver.url, "generic", secret_env="HOOK_SECRET", min_severity="info", source="config")
    emit(store)
    make_dispatcher(secrets={}).run_once(T0)
    assert receiver.requests == []
    [item] = outbox.list_deliveries()
    assert item.delivery.status == "pending" and item.delivery.last_error == "no signing secret: $HOOK_SECRET is not set"
    make_dispatcher(secrets={"HOOK_SECRET": SECRET}).run_once(item.delivery.next_attempt_at)
    Webhook(SECRET).verify(receiver.accepted[0].body, receiver.accepted[0].headers)


def test_endpoints_are_delivered_in_parallel_and_independently(
    store: Storage, subscriptions: SubscriptionStore, make_receiver, make_dispatcher
) -> None:
    """One endpoint down does not delay another: each subscription gets its own deliveries."""
    down, up = make_receiver(), make_receiver()
    down.default = Reply(503)
    subscribe(subscriptions, down.url)
    subscribe(subscriptions, up.url, "slack")
    emit(store, n=5)
    make_dispatcher().run_once(T0)
    assert len(up.accepted) == 5 and len(down.requests) == 1


def test_one_endpoint_is_delivered_from_the_rounds_own_thread(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver
) -> None:
    """A round with one endpoint due sends from the thread running it, in event order: no hand-off to a
    pool thread stands between a commit's wake-up and its delivery."""
    subscribe(subscriptions, receiver.url)
    emit(store, n=3)
    signed_on: list[str] = []

    def secret_for(sub: object) -> str:
        signed_on.append(threading.current_thread().name)
        return SECRET

    dispatcher = Dispatcher(outbox, DeliveryOptions(allow_private_targets=True, timeout_s=5.0), secret_for=secret_for)
    try:
        report = threading.Thread(target=dispatcher.run_once, args=(T0,), name="dispatch-round")
        report.start()
        report.join(timeout=60)
    finally:
        dispatcher.close()
    assert signed_on == ["dispatch-round"] * 3
    assert [json.loads(r.body)["data"]["seq"] for r in receiver.accepted] == [1, 2, 3]


def test_the_delivered_line_names_the_revision_and_the_wake_up_that_sent_it(
    store: Storage, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """webhook_delivered carries the event's repo_id and sha (to be joined with the ingest's lines), when the
    send began, and the wake-up its round answered: none on a round of its own, the wake-up's time after one."""
    subscribe(subscriptions, receiver.url)
    emit(store, n=1, repo_id="org/first")
    with capture_logs() as logs:
        make_dispatcher().run_once(T0)
    [line] = [entry for entry in logs if entry["event"] == "webhook_delivered"]
    assert (line["repo_id"], line["woken_at"], line["attempt_at"]) == ("org/first", None, T0.isoformat())
    assert line["sha"] is not None and len(line["sha"]) == 40

    emit(store, n=1, repo_id="org/second")
    dispatcher = make_dispatcher(poll_interval_s=3600)
    dispatcher.wake()  # as a commit does; the round that follows answers it
    stop = threading.Event()
    with capture_logs() as logs:
        thread = threading.Thread(target=dispatcher.run_forever, args=(stop,))
        thread.start()
        try:
            receiver.wait_for_accepted(2, timeout_s=30)
        finally:
            stop.set()
            thread.join(timeout=30)
    [line] = [entry for entry in logs if entry["event"] == "webhook_delivered"]
    assert line["repo_id"] == "org/second" and datetime.fromisoformat(line["woken_at"]) <= datetime.fromisoformat(line["attempt_at"])


def test_run_forever_delivers_until_stopped(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """The daemon loop delivers what is due and returns promptly once its stop event is set."""
    subscribe(subscriptions, receiver.url)
    emit(store, n=3)
    stop = threading.Event()
    thread = threading.Thread(target=make_dispatcher(poll_interval_s=0.05).run_forever, args=(stop,))
    thread.start()
    try:
        receiver.wait_for_accepted(3, timeout_s=30)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert {i.delivery.status for i in outbox.list_deliveries()} == {"delivered"}
    assert [json.loads(r.body)["data"]["seq"] for r in receiver.accepted] == [1, 2, 3]
