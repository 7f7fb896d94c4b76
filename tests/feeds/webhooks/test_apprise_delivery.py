"""Apprise notifications end to end: the real dispatcher and Apprise against the recording receiver on
loopback (json:// and ntfy:// speak HTTP), driven with run_once and a fake `now`; and through the CLI."""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from storage.front import Storage
from storage.models import Subscription
from storage.outbox import OutboxItem, OutboxStore
from storage.subscription_store import SubscriptionStore
from tests.support.cli import cli_json, run_cli, write_config
from tests.support.clock import T0
from tests.support.webhooks import LINKS, Receiver, Reply, emit

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

PASSWORD = "hunter2-apprise-pw"
BROKEN = "hubwatch-tests/broken-model"


def _json_url(receiver: Receiver, path: str = "/notify") -> str:
    return f"json://hubwatch:{PASSWORD}@127.0.0.1:{receiver.port}{path}"


def _apprise(subscriptions: SubscriptionStore, url: str, **kwargs: object) -> Subscription:
    kwargs.setdefault("min_severity", "info")
    return subscriptions.add_subscription(url, "apprise", **kwargs)  # type: ignore[arg-type]


def _only(outbox: OutboxStore) -> OutboxItem:
    [item] = outbox.list_deliveries()
    return item


def _link(store: Storage) -> str:
    [event] = store.history.list_events()
    return LINKS.primary(event)


def test_json_notifications_carry_the_title_and_the_link(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """json://user:password@host:port/path: Apprise POSTs the title and a body ending with the revision link,
    with the URL's credentials; the delivery is logged as delivered, the password nowhere in the log."""
    _apprise(subscriptions, _json_url(receiver))
    emit(store, title="model: chat template changed (warning)", summaries=("chat template changed",))
    report = make_dispatcher().run_once(T0)
    assert report.delivered == 1
    [got] = receiver.accepted
    body = json.loads(got.body)
    assert got.path == "/notify" and body["title"] == "model: chat template changed (warning)"
    assert body["message"].endswith(_link(store)) and "• chat template changed" in body["message"]
    assert body["type"] == "warning"
    assert got.headers["authorization"] == "Basic " + base64.b64encode(f"hubwatch:{PASSWORD}".encode()).decode()
    item = _only(outbox)
    assert (item.delivery.status, item.delivery.attempts, item.delivery.last_status_code) == ("delivered", 1, None)  # no HTTP status seen
    assert item.as_dict()["subscription"]["url"] == f"json://127.0.0.1:{receiver.port}/…"
    assert PASSWORD not in json.dumps(item.as_dict())


def test_ntfy_notifications_reach_a_self_hosted_server(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """ntfy://host:port/topic publishes to that server: the topic, the title and the link arrive."""
    _apprise(subscriptions, f"ntfy://127.0.0.1:{receiver.port}/hubwatch-alerts")
    receiver.default = Reply(200, body=b'{"id":"m1"}')  # ntfy answers 200 (Apprise takes any other code as a failure)
    emit(store, title="model: weights changed (critical)", severity="critical", kinds=("weights",))
    assert make_dispatcher().run_once(T0).delivered == 1
    [got] = receiver.accepted
    body = json.loads(got.body)
    assert body["topic"] == "hubwatch-alerts" and body["title"] == "model: weights changed (critical)"
    assert _link(store) in body["message"] and _only(outbox).delivery.status == "delivered"


class _Records(logging.Handler):
    """What reaches the root logger's handlers (where the daemon's log output hangs)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def root_records() -> Iterator[_Records]:
    root, handler = logging.getLogger(), _Records()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield handler
    root.removeHandler(handler)
    root.setLevel(level)


def test_a_failing_receiver_gets_retries_and_the_delivery_log_says_why(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher, root_records
) -> None:
    """An error from the service is retried on the schedule like an HTTP failure (the endpoint held meanwhile),
    every try is in the delivery log with Apprise's reason, and no secret reaches the log or our log lines."""
    sub = _apprise(subscriptions, _json_url(receiver))
    emit(store)
    receiver.plan = [Reply(500, body=b"boom")]
    dispatcher = make_dispatcher()
    with capture_logs() as logs:
        first = dispatcher.run_once(T0)
    assert (first.retried, first.delivered) == (1, 0)
    item = _only(outbox)
    assert item.delivery.status == "pending" and item.delivery.attempts == 1
    assert "Apprise" in item.delivery.last_error and "500" in item.delivery.last_error
    assert item.delivery.next_attempt_at == T0 + timedelta(seconds=5)
    assert subscriptions.get_subscription(sub.id).backoff_until == T0 + timedelta(seconds=5)  # the endpoint waits too
    assert dispatcher.run_once(T0 + timedelta(seconds=4)).attempts == 0  # not due yet
    second = dispatcher.run_once(T0 + timedelta(seconds=5))
    assert second.delivered == 1 and len(receiver.requests) == 2
    tries = outbox.attempts(item.delivery.id)
    assert [t.outcome for t in tries] == ["retry", "delivered"] and "500" in tries[0].error
    assert [entry["event"] for entry in logs] == ["webhook_failed"]
    seen = json.dumps(logs, default=str) + json.dumps(_only(outbox).as_dict()) + repr(tries)
    assert PASSWORD not in seen and "urllib3" in {r.name.split(".")[0] for r in root_records.records}  # the handler saw records
    assert not [r for r in root_records.records if r.name.startswith("apprise")]  # Apprise's own (debug lines show payloads) stay out


def test_a_receiver_that_keeps_failing_makes_the_delivery_dead(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """When the schedule is used up the delivery is dead, its last error saying how many tries failed and why."""
    _apprise(subscriptions, _json_url(receiver))
    emit(store)
    receiver.default = Reply(503)
    dispatcher = make_dispatcher(retry_schedule_s=(5.0,))
    assert dispatcher.run_once(T0).retried == 1
    assert dispatcher.run_once(T0 + timedelta(seconds=5)).dead == 1
    item = _only(outbox)
    assert item.delivery.status == "dead" and item.delivery.attempts == 2 and len(receiver.requests) == 2
    assert item.delivery.last_error.startswith("gave up after 2 attempts: Apprise") and "503" in item.delivery.last_error


def test_a_receiver_that_never_answers_times_out(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """A service that does not answer within [delivery] timeout_s is a retry, as an HTTP time-out is."""
    _apprise(subscriptions, _json_url(receiver))
    emit(store)
    receiver.default = Reply(stall=True)
    report = make_dispatcher(timeout_s=0.5, connect_timeout_s=0.5).run_once(T0)
    assert report.retried == 1
    error = _only(outbox).delivery.last_error
    assert "timed out" in error.lower() or "connection error" in error.lower(), error
    assert PASSWORD not in error


def test_filtered_out_events_are_not_sent(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """An apprise subscription's repo globs, kinds and minimum severity filter as for the other formats."""
    _apprise(subscriptions, _json_url(receiver), repos=["org/*"], kinds=["weights"], min_severity="critical")
    emit(store, severity="critical", kinds=("chat_template",))  # another kind
    emit(store, severity="warning", kinds=("weights",))  # below the minimum
    emit(store, repo_id="other/model", severity="critical", kinds=("weights",))  # another repo
    assert outbox.list_deliveries() == []
    emit(store, severity="critical", kinds=("weights",), title="model: weights changed (critical)")
    assert make_dispatcher().run_once(T0).delivered == 1
    assert [json.loads(r.body)["title"] for r in receiver.requests] == ["model: weights changed (critical)"]


def test_a_private_host_is_refused_at_delivery_too(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, receiver: Receiver, make_dispatcher
) -> None:
    """The address is checked before every try: a dispatcher that refuses private targets sends nothing and
    disables the subscription, as it does for a webhook."""
    sub = _apprise(subscriptions, _json_url(receiver))
    emit(store)
    report = make_dispatcher(allow_private_targets=False).run_once(T0)
    assert report.failed == 1 and receiver.requests == []
    after = subscriptions.get_subscription(sub.id)
    assert after.enabled is False and "refused address" in after.disabled_reason and "loopback" in after.disabled_reason
    assert _only(outbox).delivery.status == "failed"


@pytest.fixture
def apprise_config(replay, receiver: Receiver, database_url: str, tmp_path: Path) -> Path:
    extra = f"""
[delivery]
allow_private_targets = true
timeout_s = 5.0

[[webhooks]]
url = "{_json_url(receiver)}"
format = "apprise"
min_severity = "info"
"""
    return write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url, extra)


def test_the_cli_delivers_a_config_apprise_subscription(replay, receiver: Receiver, apprise_config: Path) -> None:
    """From the config file: `poll` queues the revision's notification, `deliveries list` shows the URL redacted,
    `deliveries redeliver` sends it through Apprise."""
    replay.set_head(BROKEN, 1)
    assert run_cli("watch", "add", BROKEN, config=apprise_config).returncode == 0
    assert run_cli("poll", config=apprise_config).returncode == 0
    [pending] = cli_json("deliveries", "list", config=apprise_config)
    assert pending["subscription"] == {**pending["subscription"], "format": "apprise", "url": f"json://127.0.0.1:{receiver.port}/…"}
    sent = run_cli("deliveries", "redeliver", pending["id"], config=apprise_config)
    assert sent.returncode == 0, sent.stderr
    assert re.search(rf"{pending['id']} delivered \(\d+ ms\)", sent.stdout), sent.stdout  # no HTTP status through Apprise
    [got] = receiver.accepted
    body = json.loads(got.body)
    assert body["title"].startswith("broken-model: ") and body["message"].startswith(f"{BROKEN} · severity ")
    assert body["message"].endswith(f"/{BROKEN}/commit/{replay.head_sha(BROKEN)}")  # no public_url: the commit on the Hub
    listing = run_cli("deliveries", "list", config=apprise_config)
    assert PASSWORD not in listing.stdout + listing.stderr + sent.stdout + sent.stderr


def test_a_config_apprise_url_apprise_cannot_read_stops_the_cli(replay, database_url: str, tmp_path: Path) -> None:
    """Loading a config whose apprise entry Apprise cannot read is an error naming the entry, not its secrets."""
    extra = f"""
[[webhooks]]
url = "https://ci.example.com/hook"
format = "slack"

[[webhooks]]
url = "tgram://{PASSWORD}/12315544/"
format = "apprise"
"""
    config = write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url, extra)
    result = run_cli("watch", "list", config=config)
    assert result.returncode != 0
    assert "[[webhooks]] entry 2 (apprise tgram://…): Apprise cannot read this tgram:// URL" in result.stderr
    assert PASSWORD not in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("delivery", "url", "message"),
    [
        ("", f"zulip://bot@127.0.0.1/{'a' * 32}", r"\(apprise zulip://…\): 127\.0\.0\.1 is a loopback address"),
        ("", "json://2130706433:8080/hook", "2130706433 resolves to a loopback address"),
        ("", "syslog://local5", r'cannot tell which server.*apprise_allow_plugins = \["syslog"\]'),
        ("", "jsons://hooks.example.com/in?verify=no", "verify=no.*apprise_allow_insecure_tls"),
        ("allow_private_targets = true", "json://127.0.0.1:8080/hook", None),
        ('apprise_allow_plugins = ["syslog"]', "syslog://local5", None),
        ("apprise_allow_insecure_tls = true", "jsons://hooks.example.com/in?verify=no", None),
    ],
)
def test_the_config_is_checked_against_the_apprise_policy(
    replay, database_url: str, tmp_path: Path, delivery: str, url: str, message: str | None
) -> None:
    """Loading the config refuses an apprise entry naming a loopback server, an undetermined service or
    verify=no, in one line naming the entry, unless [delivery] allows it (no DNS asked at load)."""
    extra = f'\n[delivery]\n{delivery}\n\n[[webhooks]]\nurl = "{url}"\nformat = "apprise"\n'
    config = write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url, extra)
    result = run_cli("watch", "list", config=config)
    if message is None:
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode != 0
    [line] = result.stderr.strip().splitlines()
    assert re.search(rf"\[\[webhooks\]\] entry 1 .*{message}", line), line
