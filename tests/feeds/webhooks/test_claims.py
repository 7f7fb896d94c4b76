"""Crashes and several workers: endpoints claimed by one worker at a time, taken over when a claim's
lease runs out unrenewed, every attempt logged (a cut-short one too), deliveries in event order."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa

from storage.front import Storage
from storage.outbox import OutboxStore
from storage.subscription_store import SubscriptionStore
from tests.support.clock import T0
from tests.support.webhooks import Receiver, Reply, emit, subscribe

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _seqs(receiver: Receiver) -> list[int]:
    return [json.loads(r.body)["data"]["seq"] for r in receiver.accepted]


def test_a_killed_workers_endpoint_is_taken_over_when_its_lease_runs_out(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """A worker died mid-send: nothing goes while its 6 s lease holds; at 6 s another worker takes over,
    logs the cut-short attempt as interrupted and sends everything, old and new, in event order."""
    subscribe(subscriptions, receiver.url)
    emit(store, n=3)
    [claim] = outbox.claim_due("killed", T0, lease_s=6)
    first = claim.items[0].delivery
    assert outbox.begin_attempt(first, "killed", T0, lease_s=6) is not None  # ... and then SIGKILL
    emit(store, n=2)  # newer events meanwhile
    survivor = make_dispatcher(lease_s=6)
    assert survivor.run_once(_at(5.9)).attempts == 0 and receiver.requests == []
    assert survivor.run_once(_at(6)).delivered == 5
    assert _seqs(receiver) == [1, 2, 3, 4, 5]
    log = outbox.attempts(first.id)
    assert [(a.attempt, a.outcome, a.worker_id, a.attempted_at) for a in log] == [
        (1, "interrupted", "killed", T0), (2, "delivered", survivor.worker_id, _at(6)),
    ]
    assert log[0].error.startswith("cut short: worker killed stopped during the attempt")
    assert outbox.get_delivery(first.id).delivery.attempts == 2
    assert outbox.begin_attempt(claim.items[1].delivery, "killed", _at(7), lease_s=6) is None  # it lost the endpoint


def test_a_heartbeat_keeps_the_endpoint_while_a_send_outlasts_the_lease(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """A live worker renewing its claim every 2 s keeps its endpoint however long its send takes."""
    subscribe(subscriptions, receiver.url)
    emit(store, n=2)
    [claim] = outbox.claim_due("slow", T0, lease_s=6)
    assert outbox.begin_attempt(claim.items[0].delivery, "slow", T0, lease_s=6) is not None
    other = make_dispatcher(lease_s=6)
    for t in range(2, 30, 2):
        assert outbox.renew_claims("slow", _at(t), lease_s=6) == 1
        assert other.run_once(_at(t + 3)).attempts == 0
    assert receiver.requests == []
    assert [a.outcome for a in outbox.attempts(claim.items[0].delivery.id)] == ["started"]


def test_two_live_workers_never_send_one_delivery_twice(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """Real time: worker A's send hangs 3x longer than its 0.6 s lease; worker B, polling all along, sends
    nothing of that endpoint, and A's attempt is logged as started while it is in flight."""
    receiver.plan = [Reply(stall=True)]
    subscribe(subscriptions, receiver.url)
    [event_id] = emit(store)
    slow = make_dispatcher(lease_s=0.6, timeout_s=1.8, connect_timeout_s=1.0, poll_interval_s=0.05)
    other = make_dispatcher(lease_s=0.6)
    stop = threading.Event()
    thread = threading.Thread(target=slow.run_forever, args=(stop,))
    thread.start()
    try:
        seen: set[str] = set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            [item] = outbox.list_deliveries()
            outcomes = [a.outcome for a in outbox.attempts(item.delivery.id)]
            seen.update(outcomes)
            if outcomes and outcomes[-1] != "started":
                break
            if outcomes:  # A's send is in flight (before that, B could rightly take the endpoint first)
                assert other.run_once().attempts == 0
            stop.wait(0.05)
    finally:
        stop.set()
        thread.join(timeout=30)
    [item] = outbox.list_deliveries()
    log = outbox.attempts(item.delivery.id)
    assert "started" in seen and [(a.outcome, a.worker_id) for a in log] == [("retry", slow.worker_id)]
    assert log[0].error == "no answer within 1.8 s (timed out)" and item.event.event_id == event_id


def test_an_endpoint_that_is_down_keeps_its_deliveries_in_event_order(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """503 with Retry-After on the first delivery holds the later ones; when it ends they go in event order."""
    receiver.plan = [Reply(503, {"Retry-After": "1"})]
    subscribe(subscriptions, receiver.url)
    emit(store, n=4)
    dispatcher = make_dispatcher()
    dispatcher.run_once(T0)
    emit(store, n=1)
    dispatcher.run_once(_at(0.5))
    assert len(receiver.requests) == 1
    dispatcher.run_once(_at(1))
    assert _seqs(receiver) == [1, 2, 3, 4, 5]


def test_each_subscription_keeps_its_own_order_and_pace(
    store: Storage, subscriptions: SubscriptionStore, make_receiver, make_dispatcher
) -> None:
    """Two endpoints, one rate-limited: each gets every event in event order, the other is not held back."""
    slow, fast = make_receiver(), make_receiver()
    slow.plan = [Reply(429, {"Retry-After": "30"})]
    subscribe(subscriptions, slow.url)
    subscribe(subscriptions, fast.url)
    emit(store, n=3)
    dispatcher = make_dispatcher()
    dispatcher.run_once(T0)
    assert _seqs(fast) == [1, 2, 3] and _seqs(slow) == []
    dispatcher.run_once(_at(30))
    assert _seqs(slow) == [1, 2, 3]


def test_a_stopped_worker_lets_go_of_its_endpoints(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """A clean stop releases the worker's claims, so the next worker need not wait out a lease."""
    subscribe(subscriptions, receiver.url)
    emit(store)
    outbox.claim_due("stopping", T0, lease_s=600)
    outbox.release_claims("stopping")
    [claim] = outbox.claim_due("next", T0, lease_s=6)
    assert claim.taken_from is None and len(claim.items) == 1


def test_the_claim_begins_the_first_attempt_in_its_own_transaction(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """`start_first`: one commit claims the endpoint and logs its oldest due delivery's attempt as started
    (the dispatcher then sends it without a second write); the later ones are not begun."""
    subscribe(subscriptions, receiver.url)
    emit(store, n=2)
    commits: list[object] = []

    def counted(conn: object) -> None:
        commits.append(conn)

    sa.event.listen(store.engine, "commit", counted)
    try:
        [claim] = outbox.claim_due("w", T0, lease_s=6, start_first=True)
    finally:
        sa.event.remove(store.engine, "commit", counted)
    assert len(commits) == 1
    first, second = (item.delivery for item in claim.items)
    [started] = outbox.attempts(first.id)
    assert (started.id, started.attempt, started.outcome, started.worker_id) == (claim.first_attempt_id, 1, "started", "w")
    assert outbox.attempts(second.id) == [] and outbox.get_delivery(second.id).delivery.attempts == 0
    outbox.release_claims("w")
    dispatcher = make_dispatcher()
    assert dispatcher.run_once(_at(1)).delivered == 2 and _seqs(receiver) == [1, 2]
    assert [(a.attempt, a.outcome) for a in outbox.attempts(second.id)] == [(1, "delivered")]


def test_a_dispatcher_round_sends_the_begun_attempt_with_one_attempt_logged(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """The attempt begun with the claim is the one completed: each delivery has exactly one attempt, delivered."""
    subscribe(subscriptions, receiver.url)
    emit(store, n=3)
    dispatcher = make_dispatcher()
    assert dispatcher.run_once(T0).delivered == 3
    assert _seqs(receiver) == [1, 2, 3]
    for item in outbox.list_deliveries():
        assert item.delivery.attempts == 1
        assert [(a.attempt, a.outcome, a.attempted_at) for a in outbox.attempts(item.delivery.id)] == [(1, "delivered", T0)]
