"""The apprise format: which URLs are taken (Apprise reads them, the address policy checks their host),
what is shown of them (never a secret), and the message it sends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from feeds.webhooks import apprise, subscribe
from feeds.webhooks.safety import UnsafeTarget
from storage.errors import InvalidSubscription
from storage.front import Storage
from storage.models import Event
from storage.subscription_store import SubscriptionStore
from storage.subscriptions import redact_url
from tests.support.served import serve
from tests.support.webhooks import LINKS
from tracker.config import WebhookSpec

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

TOKEN = "123456789:AAHsecretBotTokenValue"
PUBLIC = "93.184.215.14"


def _resolver(table: dict[str, list[str]]):
    """A resolver that knows only `table`; any other name fails the test (cloud services resolve nothing)."""

    def resolve(host: str, port: int) -> list[str]:
        assert host in table, f"{host} should not be resolved"
        return table[host]

    return resolve


@pytest.mark.parametrize(
    ("url", "table"),
    [
        ("ntfys://ntfy.example.com/alerts", {"ntfy.example.com": [PUBLIC]}),
        ("json://user:pw@hooks.example.com:8080/in", {"hooks.example.com": [PUBLIC]}),
        ("matrixs://bot:pw@matrix.example.com/#ops", {"matrix.example.com": [PUBLIC]}),
        ("mailtos://user:pw@example.com?to=ops@example.com", {"example.com": [PUBLIC]}),  # its own SMTP server
        (f"tgram://{TOKEN}/12315544/", {}),  # a cloud service: no host of the user's
        ("ntfy://mytopic", {}),  # ntfy.sh
    ],
)
def test_urls_apprise_reads_are_subscribed(subscriptions: SubscriptionStore, url: str, table: dict) -> None:
    """A URL Apprise reads is stored as given; its host, when it names one, is resolved and checked first."""
    sub = subscribe(subscriptions, url, "apprise", allow_private=False, resolve=_resolver(table))
    assert (sub.url, sub.format, sub.secret, sub.secret_env) == (url, "apprise", None, None)
    assert url not in repr(sub) and "pw@" not in repr(sub)  # the URL holds credentials: not in a repr either
    assert [s.url for s in subscriptions.list_subscriptions()] == [url]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("bogus://example.com/x", "Apprise knows no bogus:// service"),
        ("msteams://team/tokenA/tokenB/tokenC", "Teams: workflows://"),
        ("tgram://not-a-bot-token/", "Apprise cannot read this tgram:// URL"),
        ("json://", "names no target"),
        ("https://ntfy.example.com/alerts", r"for a plain http\(s\) endpoint use the generic format"),
        ("ntfys ://x/y", "whitespace"),
        ("ntfy:/x", "starts with the service's scheme"),
    ],
)
def test_urls_apprise_cannot_read_are_refused_at_creation(subscriptions: SubscriptionStore, url: str, message: str) -> None:
    """An unknown scheme or an unreadable URL is an InvalidSubscription saying why, and nothing is stored."""
    with pytest.raises(InvalidSubscription, match=message):
        subscribe(subscriptions, url, "apprise", allow_private=True, resolve=_resolver({}))
    assert subscriptions.list_subscriptions() == []


def test_apprise_subscriptions_take_no_signing_secret(subscriptions: SubscriptionStore) -> None:
    """Apprise notifications are not signed: a secret is refused rather than silently ignored."""
    with pytest.raises(InvalidSubscription, match="not signed"):
        subscriptions.add_subscription("ntfy://mytopic", "apprise", secret="whsec_" + "A" * 32)


@pytest.mark.parametrize(
    ("url", "table", "reason"),
    [
        ("json://127.0.0.1:8080/hook", {}, "127.0.0.1 is a loopback address"),
        ("xml://[::1]/hook", {}, "::1 is a loopback address"),
        ("ntfy://user:pw@10.1.2.3/topic", {}, "10.1.2.3 is a private address"),
        ("forms://intranet.example.com/x", {"intranet.example.com": ["192.168.1.20"]}, "resolves to a private address"),
        ("gotify://169.254.169.254/token", {}, "link-local"),
        ("mailto://user:pw@example.com?smtp=10.0.0.5", {}, "10.0.0.5 is a private address"),  # the SMTP server it would use
    ],
)
def test_hosts_on_private_networks_are_refused_unless_allowed(subscriptions: SubscriptionStore, url: str, table: dict, reason: str) -> None:
    """The webhook address policy applies to the host an Apprise URL names (SMTP server included), with its message."""
    with pytest.raises(UnsafeTarget, match=reason) as err:
        subscribe(subscriptions, url, "apprise", allow_private=False, resolve=_resolver(table))
    assert "allow_private_targets" in str(err.value) and "pw" not in str(err.value)
    assert subscriptions.list_subscriptions() == []
    subscribe(subscriptions, url, "apprise", allow_private=True, resolve=_resolver(table))
    assert len(subscriptions.list_subscriptions()) == 1


def test_an_unresolvable_host_is_refused_at_creation(subscriptions: SubscriptionStore) -> None:
    """A host that does not resolve cannot be subscribed (the system resolver, a reserved .invalid name)."""
    with pytest.raises(InvalidSubscription, match="cannot resolve no-such-host.invalid"):
        subscribe(subscriptions, "jsons://no-such-host.invalid/hook", "apprise", allow_private=False)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("json://user:s3cret@hooks.example.com:8080/in?token=abc", "json://hooks.example.com:8080/…"),
        ("ntfys://tk_secrettoken@ntfy.example.com/alerts", "ntfys://ntfy.example.com/…"),
        ("mailtos://user:s3cret@gmail.com?to=ops@example.com", "mailtos://gmail.com/…"),
        ("xml://[fd00::1]:81/x", "xml://[fd00::1]:81/…"),
        ("ntfy://secret-topic-name", "ntfy://…"),  # on ntfy.sh the topic is the secret
        (f"tgram://{TOKEN}/12315544/", "tgram://…"),
        ("pbul://o.secretaccesstoken", "pbul://…"),  # a token with a dot is not a host name
        ("discord://webhook_id/webhook_token", "discord://…"),
        ("https://hooks.slack.com/services/T0/B0/XXXX", "https://hooks.slack.com/…"),  # webhooks as before
    ],
)
def test_listings_show_a_redacted_url(url: str, shown: str) -> None:
    """Listings and logs show the scheme, and the host only where it is a server's name: no user, password,
    token, topic or path."""
    assert redact_url(url) == shown


def test_config_entries_apprise_cannot_read_are_named(subscriptions: SubscriptionStore) -> None:
    """A bad apprise [[webhooks]] entry is refused naming its number and redacted URL, never its secrets."""
    good = WebhookSpec(url="ntfy://mytopic", format="apprise")
    bad_scheme = WebhookSpec(url=f"bogus://user:hunter2@{TOKEN}/x", format="apprise")
    with pytest.raises(InvalidSubscription, match=r"entry 2 \(apprise bogus://…\): Apprise knows no bogus:// service") as err:
        apprise.check_config_entries([good, bad_scheme])
    assert "hunter2" not in str(err.value) and TOKEN not in str(err.value)
    with pytest.raises(InvalidSubscription, match=r"entry 1 \(apprise ntfy://…\): .*not signed"):
        subscriptions.sync_config_subscriptions([WebhookSpec(url="ntfy://mytopic", format="apprise", secret_env="X")])
    subscriptions.sync_config_subscriptions([good])
    assert [(s.url, s.source) for s in subscriptions.list_subscriptions()] == [("ntfy://mytopic", "config")]


def _event(title: str = "org/model: chat template changed (warning)", summaries: int = 2, **extra: object) -> Event:
    return Event(
        seq=3, event_id="ev-3", kind="revision.ingested", repo_id="org/model", sha="a" * 40, title=title,
        severity="warning", security=True, created_at=datetime(2025, 3, 1, tzinfo=UTC),
        payload={"commit_title": "Update tokenizer_config.json", "kinds": ["chat_template"],
                 "summaries": [f"change {i}" for i in range(summaries)], **extra},
    )


def test_the_message_is_the_title_and_a_short_body_with_the_link() -> None:
    """Title as the event's; the body names repo, severity, commit and changes, and ends with the revision page."""
    msg = apprise.message(_event(), LINKS)
    assert msg.title == "org/model: chat template changed (warning)"
    lines = msg.body.split("\n")
    assert lines[0] == f"org/model · severity warning · {'a' * 12} · security-relevant"
    assert lines[1:4] == ["Commit: Update tokenizer_config.json", "• change 0", "• change 1"]
    assert lines[-1] == f"https://hubwatch.example/repos/org/model/revisions/{'a' * 40}" == LINKS.primary(_event())
    assert msg.notify_type == "warning"
    assert json.loads(apprise.render(_event(), LINKS)) == {"title": msg.title, "body": msg.body, "type": "warning"}


def test_long_and_hostile_events_make_a_short_plain_message() -> None:
    """Many changes are cut to a few and counted; control characters show, line breaks cannot be forged,
    and `@everyone` cannot mention anyone."""
    msg = apprise.message(_event(title="@everyone \x1b[31mred\x1b[0m\nforged line " + "x" * 1000, summaries=40), LINKS)
    assert len(msg.title) <= apprise.MAX_TITLE and msg.title.endswith("…") and "\n" not in msg.title
    assert "\x1b" not in msg.title and "\u241b" in msg.title and "@everyone" not in msg.title
    assert msg.body.count("• ") == apprise.MAX_SUMMARIES and "… and 35 more change(s)" in msg.body
    assert len(msg.body) < 2000


def test_errors_are_scrubbed_of_the_urls_secrets() -> None:
    """Every user, password, token, path part and query value of the URL is masked in an error text."""
    url = "ntfys://alice:hunter2pass@ntfy.example.com/private-topic?token=tk_abcdef123&priority=high"
    text = "failed for alice with hunter2pass at /private-topic using tk_abcdef123 (ntfy.example.com)"
    scrubbed = apprise.scrub(text, url)
    for secret in ("alice", "hunter2pass", "private-topic", "tk_abcdef123"):
        assert secret not in scrubbed
    assert "ntfy.example.com" in scrubbed  # the host is no secret where it names a server
    assert TOKEN not in apprise.scrub(f"bot {TOKEN} said no", f"tgram://{TOKEN}/12315544/")


@pytest.fixture
def api(store: Storage) -> Iterator:
    with serve(store, api_token="api-token", allow_private_targets=False) as served, served.client() as client:
        yield client


def test_the_api_creates_apprise_subscriptions_and_never_shows_their_secrets(api) -> None:
    """POST /api/v1/subscriptions takes an Apprise URL; the answer and the listing show it redacted; a bad
    URL is a 422 saying why."""
    auth = {"Authorization": "Bearer api-token"}
    url = f"tgram://{TOKEN}/12315544/"
    created = api.post("/api/v1/subscriptions", json={"url": url, "format": "apprise", "min_severity": "warning"}, headers=auth)
    unknown = api.post("/api/v1/subscriptions", json={"url": "bogus://x/y", "format": "apprise"}, headers=auth)
    private = api.post("/api/v1/subscriptions", json={"url": "json://10.0.0.7/hook", "format": "apprise"}, headers=auth)
    webhook = api.post("/api/v1/subscriptions", json={"url": "ntfys://ntfy.example.com/x", "format": "slack"}, headers=auth)
    listed = api.get("/api/v1/subscriptions")
    assert created.status_code == 201, created.text
    assert created.json()["url"] == "tgram://…" and created.json()["format"] == "apprise" and created.json()["secret"] is None
    assert unknown.status_code == 422 and "Apprise knows no bogus:// service" in unknown.text
    assert private.status_code == 422 and "private address" in private.text
    assert webhook.status_code == 422 and "http:// or https://" in webhook.text
    assert [s["url"] for s in listed.json()] == ["tgram://…"]
    assert TOKEN not in created.text + listed.text and "AAHsecret" not in created.text + listed.text
