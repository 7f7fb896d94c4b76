"""The outbox: subscriptions, matching, deliveries written in the event's transaction, the delivery log."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest
from sqlmodel import Session, select
from standardwebhooks import Webhook

from storage.delivery_queue import delivery_id, enqueue
from storage.errors import DeliveryNotFound, InvalidSubscription, SubscriptionDisabled
from storage.event_log import NewEvent
from storage.front import Storage
from storage.history import NewChange, NewRevision
from storage.models import Delivery, Event, Subscription
from storage.outbox import OutboxStore
from storage.subscription_store import SubscriptionStore
from storage.subscriptions import matches
from tests.support.clock import T0
from tests.support.webhooks import SECRET, emit, subscribe

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

HOOK = "https://hooks.example.com/hook"


def _event(repo_id: str = "meta-llama/Llama-3.1-8B", severity: str = "warning", kind: str = "revision.ingested",
           kinds: tuple[str, ...] = ("chat_template",)) -> Event:
    return Event(event_id="e", kind=kind, repo_id=repo_id, title="t", severity=severity,
                 created_at=T0, payload={"kinds": list(kinds)})


def _sub(repos: tuple[str, ...] = ("*",), kinds: tuple[str, ...] = (), min_severity: str = "notice",
         enabled: bool = True) -> Subscription:
    return Subscription(url=HOOK, repos=list(repos), kinds=list(kinds), min_severity=min_severity, enabled=enabled,
                        created_at=T0)


@pytest.mark.parametrize(
    ("sub", "event", "expected"),
    [
        (_sub(), _event(), True),
        (_sub(repos=("meta-llama/*",)), _event(), True),
        (_sub(repos=("META-LLAMA/*",)), _event(), True),
        (_sub(repos=("mistralai/*",)), _event(), False),
        (_sub(repos=("mistralai/*", "meta-llama/Llama-3.1-*")), _event(), True),
        (_sub(kinds=("chat_template",)), _event(), True),
        (_sub(kinds=("weights", "custom_code")), _event(), False),
        (_sub(kinds=("advisory.published",)), _event(kind="advisory.published", kinds=()), True),
        (_sub(kinds=("advisory.*",)), _event(kind="advisory.published", kinds=()), True),
        (_sub(kinds=("estimate.changed",)), _event(), False),
        (_sub(min_severity="warning"), _event(severity="warning"), True),
        (_sub(min_severity="critical"), _event(severity="warning"), False),
        (_sub(min_severity="notice"), _event(severity="info"), False),
        (_sub(min_severity="info"), _event(severity="info"), True),
        (_sub(enabled=False), _event(), False),
    ],
)
def test_matching_by_repo_glob_kind_and_severity(sub: Subscription, event: Event, expected: bool) -> None:
    """A subscription takes events whose repo matches a glob, a kind is wanted, and severity is high enough."""
    assert matches(sub, event) is expected


def test_deliveries_are_written_with_the_event_for_matching_subscriptions(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore
) -> None:
    """add_event writes one pending Delivery per matching enabled subscription, due at once, id derived."""
    wanted = subscribe(subscriptions, HOOK, kinds=("chat_template",))
    also = subscribe(subscriptions, "https://other.example.com/x", "slack", repos=("org/*",))
    subscribe(subscriptions, "https://third.example.com/x", "discord", kinds=("weights",))
    disabled = subscribe(subscriptions, "https://fourth.example.com/x", "slack")
    subscriptions.disable_subscription(disabled.id, "testing")
    [event_id] = emit(store)
    items = outbox.list_deliveries()
    assert {i.subscription.id for i in items} == {wanted.id, also.id}
    for item in items:
        assert item.delivery.id == delivery_id(event_id, item.subscription.id)
        assert item.delivery.status == "pending" and item.delivery.next_attempt_at == T0
        assert item.event.event_id == event_id


def _revision(sha: str, severity: str = "warning") -> NewRevision:
    return NewRevision(
        repo_id="org/model", sha=sha, parent_sha=None, branch="main", committed_at=T0, title="Update",
        message="", authors=[], is_baseline=False, files=[], blobs={}, weight_files=[],
        changes=[NewChange(kind="chat_template", path="tokenizer_config.json", summary="changed", severity=severity)],
        events=[NewEvent(event_id=f"ev-{sha}", kind="revision.ingested", title="t", severity=severity,
                         payload={"kinds": ["chat_template"]})],
    )


def test_a_revision_and_its_deliveries_commit_together_or_not_at_all(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore
) -> None:
    """save_revision writes the deliveries in its own transaction: a failure inside it leaves neither."""
    subscribe(subscriptions, HOOK)

    def crash(session: Session, revision: object) -> None:
        raise RuntimeError("crash inside the transaction")

    with pytest.raises(RuntimeError):
        store.history.save_revision(_revision("a" * 40), extra_writes=[crash])
    assert store.history.list_events() == [] and outbox.list_deliveries() == []
    store.history.save_revision(_revision("b" * 40))
    [item] = outbox.list_deliveries()
    assert item.event.sha == "b" * 40
    with Session(store.engine) as s:  # the same transaction: the event and its delivery share created_at
        assert s.exec(select(Delivery.created_at)).one() == s.exec(select(Event.created_at)).one()


def test_an_event_recorded_twice_is_delivered_once(store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore) -> None:
    """Events are never rewritten, so a second add_event of the same id adds no delivery."""
    subscribe(subscriptions, HOOK)
    event = NewEvent("ev-same", "advisory.published", "advisory", "critical")
    assert store.history.add_event("org/model", event) is True
    assert store.history.add_event("org/model", event) is False
    assert len(outbox.list_deliveries()) == 1


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "empty"),
        ("hooks.example.com/x", "http"),
        ("ftp://hooks.example.com/x", "http"),
        ("javascript:alert(1)", "http"),
        ("http://", "no host"),
        ("http:///path", "no host"),
        ("https://exa mple.com/", "whitespace"),
        ("https://example.com/\r\nX-Injected: 1", "control"),
        ("https://user:pass@example.com/", "credentials"),
        ("https://example.com:99999/", "malformed"),
        ("https://example.com:0/", "port"),
        ("https://[::1/", "malformed"),
        ("https://example.com/" + "a" * 2001, "longer"),
    ],
)
def test_malformed_urls_are_refused_at_subscription_time(subscriptions: SubscriptionStore, url: str, message: str) -> None:
    """A malformed subscription URL is refused with a message saying what is wrong, and nothing is stored."""
    with pytest.raises(InvalidSubscription, match=message):
        subscriptions.add_subscription(url, "slack")
    assert subscriptions.list_subscriptions() == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"format": "teams"}, "format"),
        ({"min_severity": "loud"}, "min_severity"),
        ({"kinds": ["Chat Template"]}, "kinds"),
        ({"repos": [""]}, "repos"),
        ({"secret": "not-a-secret"}, "whsec_"),
        ({"secret": "whsec_!!!"}, "base64"),
        ({"secret": "whsec_c2hvcnQ="}, "24 to 64 bytes"),
        ({"secret": SECRET, "secret_env": "X"}, "not both"),
        ({"secret_env": "NOT A NAME"}, "variable name"),
    ],
)
def test_bad_subscription_settings_are_refused(subscriptions: SubscriptionStore, kwargs: dict, message: str) -> None:
    """Formats, severities, kinds, repo globs and secrets are checked before anything is stored."""
    args = {"format": "generic", **kwargs}
    with pytest.raises(InvalidSubscription, match=message):
        subscriptions.add_subscription(HOOK, **args)


def test_a_generic_subscription_without_a_secret_gets_one(subscriptions: SubscriptionStore) -> None:
    """A signed subscription created without a secret gets a fresh whsec_ one, hidden from its repr."""
    sub = subscriptions.add_subscription(HOOK, "generic")
    assert sub.secret and sub.secret.startswith("whsec_")
    Webhook(sub.secret)  # the reference implementation accepts it
    assert sub.secret not in repr(sub) and sub.secret not in repr(subscriptions.list_subscriptions())


@dataclass(frozen=True)
class Spec:
    url: str
    format: str = "slack"
    secret_env: str = ""
    repos: tuple[str, ...] = ("*",)
    kinds: tuple[str, ...] = ()
    min_severity: str = "notice"


def test_config_webhooks_are_synced(store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore) -> None:
    """[[webhooks]] become config subscriptions; edits update them; removal disables them, keeping the log."""
    subscriptions.sync_config_subscriptions([Spec(HOOK), Spec("https://ci.example.com/h", "generic", "CI_SECRET")])
    subs = {s.url: s for s in subscriptions.list_subscriptions()}
    assert subs[HOOK].source == "config" and subs["https://ci.example.com/h"].secret_env == "CI_SECRET"
    assert subs["https://ci.example.com/h"].secret is None
    subscriptions.sync_config_subscriptions([Spec(HOOK, min_severity="critical"), Spec("https://ci.example.com/h", "generic", "CI_SECRET")])
    assert {s.url: s for s in subscriptions.list_subscriptions()}[HOOK].min_severity == "critical"
    emit(store, severity="critical")
    subscriptions.sync_config_subscriptions([Spec(HOOK, min_severity="critical")])
    ci = {s.url: s for s in subscriptions.list_subscriptions()}["https://ci.example.com/h"]
    assert not ci.enabled and ci.disabled_reason == "removed from the config file"
    [dead] = outbox.list_deliveries(subscription_id=ci.id)
    assert dead.delivery.status == "dead" and "removed from the config file" in dead.delivery.last_error
    subscriptions.sync_config_subscriptions([Spec(HOOK, min_severity="critical"), Spec("https://ci.example.com/h", "generic", "CI_SECRET")])
    assert all(s.enabled for s in subscriptions.list_subscriptions())
    assert len(subscriptions.list_subscriptions()) == 2


def test_a_subscription_the_receiver_retired_stays_disabled_across_restarts(subscriptions: SubscriptionStore) -> None:
    """A config subscription disabled by a 410 is not re-enabled by the next start, only by editing it."""
    subscriptions.sync_config_subscriptions([Spec(HOOK)])
    [sub] = subscriptions.list_subscriptions()
    subscriptions.disable_subscription(sub.id, "410 Gone")
    subscriptions.sync_config_subscriptions([Spec(HOOK)])
    assert subscriptions.get_subscription(sub.id).disabled_reason == "410 Gone"
    subscriptions.sync_config_subscriptions([Spec(HOOK, repos=("org/*",))])
    assert subscriptions.get_subscription(sub.id).enabled


def test_redeliver_queues_the_same_webhook_id_again(store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, clock) -> None:
    """A delivered delivery can be queued again; it keeps its id; unknown ids and disabled subscriptions are refused."""
    sub = subscribe(subscriptions, HOOK)
    emit(store)
    [item] = outbox.list_deliveries()
    [claim] = outbox.claim_due("worker", T0, lease_s=6)
    outbox.mark_delivered(outbox.begin_attempt(item.delivery, "worker", T0, lease_s=6), T0, 204)
    outbox.release_claims("worker")
    later = clock.advance(3600)
    again = outbox.redeliver(item.delivery.id)
    assert again.id == item.delivery.id and again.status == "pending" and again.next_attempt_at == later
    assert [i.delivery.id for i in outbox.due_deliveries(later)] == [item.delivery.id]
    with pytest.raises(DeliveryNotFound):
        outbox.redeliver("msg_nope")
    subscriptions.disable_subscription(sub.id, "410 Gone")
    with pytest.raises(SubscriptionDisabled, match="410 Gone"):
        outbox.redeliver(item.delivery.id)


def test_removing_a_subscription_keeps_its_delivery_log(store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore) -> None:
    """A removed subscription is no longer listed or delivered to; its deliveries stay, pending ones dead."""
    sub = subscribe(subscriptions, HOOK)
    emit(store)
    assert subscriptions.remove_subscription(sub.id) is True
    assert subscriptions.remove_subscription(sub.id) is False and subscriptions.remove_subscription(999) is False
    assert subscriptions.list_subscriptions() == [] and len(subscriptions.list_subscriptions(include_removed=True)) == 1
    [item] = outbox.list_deliveries()
    assert item.delivery.status == "dead"
    emit(store)
    assert len(outbox.list_deliveries()) == 1


def test_a_claimed_endpoint_is_not_handed_out_twice(store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore) -> None:
    """Two workers asking at once: the endpoint is claimed by the first, with its due deliveries in
    event order, until its lease runs out unrenewed."""
    subscribe(subscriptions, HOOK)
    emit(store, n=3)
    [first] = outbox.claim_due("a", T0, lease_s=6)
    assert [i.event.seq for i in first.items] == [1, 2, 3] and first.taken_from is None
    assert outbox.claim_due("b", T0, lease_s=6) == []
    assert outbox.claim_due("b", T0 + timedelta(seconds=5.9), lease_s=6) == []
    [taken] = outbox.claim_due("b", T0 + timedelta(seconds=6), lease_s=6)  # "a" stopped renewing
    assert taken.taken_from == "a" and len(taken.items) == 3


def test_fresh_deliveries_leave_in_event_order_whatever_their_times(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, clock
) -> None:
    """An event committed later can carry an earlier time (its writer read the clock, then waited for the
    database): a dispatcher asking between the two times still gets both, in event order."""
    subscribe(subscriptions, HOOK)
    clock.advance(10)
    emit(store, repo_id="org/first")  # seq 1, created at T0+10
    clock.now = T0 + timedelta(seconds=5)
    emit(store, repo_id="org/second")  # seq 2, created at T0+5 (its time was read before the first committed)
    between = T0 + timedelta(seconds=7)
    assert [i.event.repo_id for i in outbox.due_deliveries(between)] == ["org/first", "org/second"]
    [claim] = outbox.claim_due("a", between, lease_s=6)
    assert [i.event.seq for i in claim.items] == [1, 2]


def test_enqueue_twice_in_one_transaction_adds_each_delivery_once(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore
) -> None:
    """A writer that enqueues its own events inside save_revision's transaction does not duplicate them."""
    subscribe(subscriptions, HOOK)

    def own_enqueue(session: Session, revision: object) -> None:
        enqueue(session, session.exec(select(Event)).all())

    store.history.save_revision(_revision("c" * 40), extra_writes=[own_enqueue])
    assert len(outbox.list_deliveries()) == 1
