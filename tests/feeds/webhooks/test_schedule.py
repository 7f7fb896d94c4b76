"""The retry schedule: Standard Webhooks delays by default, a setting, bounded by time; Retry-After
waits use up no step of it."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from feeds.webhooks.schedule import DEFAULT_DELAYS_S, NextTry, RetrySchedule
from storage.front import Storage
from storage.outbox import OutboxStore
from storage.subscription_store import SubscriptionStore
from tests.support.clock import T0
from tests.support.webhooks import Receiver, Reply, emit, subscribe
from tracker.config import settings_from_mapping
from tracker.errors import ConfigError

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("step", "first_s", "now_s", "retry_after_s", "expected"),
    [
        (0, 0, 0, None, NextTry(_at(5), 1)),  # the schedule's first delay uses up its first step
        (3, 0, 2105, None, NextTry(_at(2105 + 7200), 4)),
        (9, 0, 272105, None, None),  # the schedule used up: dead
        (2, 0, 305, 2, NextTry(_at(307), 2)),  # Retry-After: no step used
        (2, 0, 305, 0, NextTry(_at(306), 2)),  # never sooner than a second
        (2, 0, 305, 99999, NextTry(_at(305 + 3600), 2)),  # capped at retry_after_max_s
        (0, 0, 272104, 1, NextTry(_at(272105), 0)),  # the last second of the window
        (0, 0, 272105, 1, None),  # past the schedule's total time: dead
    ],
)
def test_next_try(step: int, first_s: float, now_s: float, retry_after_s: float | None, expected: NextTry | None) -> None:
    """Failures walk the schedule; Retry-After is honoured without a step, until the schedule's total time is over."""
    assert RetrySchedule().next_try(step, _at(first_s), _at(now_s), retry_after_s) == expected


def _drive(dispatcher, outbox: OutboxStore, rounds: int = 100) -> list[float]:
    now, offsets = T0, []
    for _ in range(rounds):
        dispatcher.run_once(now)
        offsets.append((now - T0).total_seconds())
        pending = outbox.list_deliveries(status="pending")
        if not pending:
            return offsets
        now = min(max(i.delivery.next_attempt_at, i.subscription.backoff_until or T0) for i in pending)
    raise AssertionError("still pending")


def test_retry_after_keeps_a_delivery_pending_until_the_schedules_time_runs_out(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """500 + Retry-After: 1 for ever, schedule 1 s then 2 s: tried each second for 3 s, then dead."""
    receiver.default = Reply(500, {"Retry-After": "1"}, b"busy")
    subscribe(subscriptions, receiver.url)
    emit(store)
    assert _drive(make_dispatcher(retry_schedule_s=(1, 2)), outbox) == [0, 1, 2, 3]
    [item] = outbox.list_deliveries()
    assert (item.delivery.status, item.delivery.attempts, item.delivery.retry_step) == ("dead", 4, 0)
    assert item.delivery.last_error == "gave up after 4 attempts: 500: busy"


def test_honoured_retry_afters_do_not_exhaust_the_default_schedule(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """The reported fault: 500 + Retry-After: 2 no longer kills a delivery in 19 s; after 60 s it is pending."""
    receiver.default = Reply(500, {"Retry-After": "2"})
    subscribe(subscriptions, receiver.url)
    emit(store)
    dispatcher = make_dispatcher()
    for t in range(0, 60, 2):
        dispatcher.run_once(_at(t))
    [item] = outbox.list_deliveries()
    assert (item.delivery.status, item.delivery.attempts, item.delivery.retry_step) == ("pending", 30, 0)
    assert item.delivery.next_attempt_at == _at(60)


def test_a_cut_short_attempt_uses_up_no_step(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """An attempt interrupted by a crash is retried at once on takeover, and the schedule starts from its first step."""
    receiver.plan = [Reply(503)]
    subscribe(subscriptions, receiver.url)
    emit(store)
    [claim] = outbox.claim_due("killed", T0, lease_s=6)
    outbox.begin_attempt(claim.items[0].delivery, "killed", T0, lease_s=6)
    make_dispatcher().run_once(_at(6))
    [item] = outbox.list_deliveries()
    assert (item.delivery.attempts, item.delivery.retry_step, item.delivery.next_attempt_at) == (2, 1, _at(11))


@pytest.mark.parametrize(
    ("raw", "env", "delays"),
    [
        ({}, {}, DEFAULT_DELAYS_S),
        ({"retry_schedule": ["10s", "1m", "1h"]}, {}, (10, 60, 3600)),
        ({"retry_schedule": [30, "1.5h"]}, {}, (30, 5400)),
        ({"retry_schedule": []}, {}, ()),
        ({}, {"HUBWATCH_DELIVERY_RETRY_SCHEDULE": "1s, 2m,3h"}, (1, 120, 10800)),
        ({"max_attempts": 3}, {}, (5, 300)),  # deprecated: 3 tries in all
        ({"retry_schedule": ["1m"], "max_attempts": 4}, {}, (60, 60, 60)),  # the last delay repeated
        ({"retry_schedule": ["1m"], "max_attempts": 1}, {}, ()),
    ],
)
def test_the_retry_schedule_setting(raw: dict, env: dict, delays: tuple[float, ...]) -> None:
    """[delivery] retry_schedule is a list of durations (comma-separated in the environment); max_attempts still works."""
    assert settings_from_mapping({"delivery": raw}, env=env).delivery.retry_delays_s == delays


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"retry_schedule": ["5s", "soon"]}, r"\[delivery\] retry_schedule\[1\]: expected a duration"),
        ({"retry_schedule": ["0s"]}, r"retry_schedule\[0\]: must be at least 1 second"),
        ({"retry_schedule": [True]}, r"retry_schedule\[0\]"),
        ({"retry_schedule": 5}, r"\[delivery\] retry_schedule: expected a list"),
        ({"retry_schedule": ["1s"] * 51}, "retry_schedule has more than 50"),
        ({"retry_schedule": ["30d", "1d"]}, "retry_schedule adds up to more than 30 days"),
        ({"max_attempts": 51}, "max_attempts"),
        ({"lease_s": 0.5}, "lease_s"),
    ],
)
def test_bad_retry_settings_name_the_key(raw: dict, message: str) -> None:
    """A bad schedule, max_attempts or lease is a ConfigError naming the key (and the entry)."""
    with pytest.raises(ConfigError, match=message):
        settings_from_mapping({"delivery": raw}, env={})
