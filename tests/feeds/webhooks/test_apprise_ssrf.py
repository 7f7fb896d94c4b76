"""Apprise and server-side request forgery (issue 21): for every service Apprise ships, the server it
connects to is read from Apprise's parsed plugin; a loopback server is refused when the subscription is
made (API and config), a vendor-hosted service cannot be steered to loopback at connect time, a service
whose server hubwatch cannot tell is refused unless allowed by name, a rebinding name is refused at
connect, verify=no is refused unless allowed, and a canary on loopback counts no connection."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from feeds.webhooks import apprise, subscribe, webhook_format
from feeds.webhooks.apprise_targets import FIXED, UNDETERMINED, names_host, servers
from feeds.webhooks.safety import TargetPolicy, UnresolvableTarget, literal_address
from storage.errors import InvalidSubscription
from storage.front import Storage
from storage.outbox import OutboxStore
from storage.subscription_store import SubscriptionStore
from tests.support.apprise_urls import NEEDS_PACKAGES, any_url, plugin_classes, readable, url_with_host
from tests.support.canary import PUBLIC, Canary, Rebinding, canary, everything_is
from tests.support.clock import T0
from tests.support.served import serve
from tests.support.webhooks import emit
from tracker.config import WebhookSpec

LOOPBACK = ["127.0.0.1", "127.1", "0x7f000001", "2130706433", "[::1]", "localhost", "0.0.0.0", "[::ffff:127.0.0.1]"]
STRICT = TargetPolicy()
ZULIP_TOKEN = "a" * 32
ACS_KEY = "a2V5a2V5a2V5a2V5"  # base64, as Azure's access keys are
# Services that neither name a server nor sit at fixed hosts: local desktop services, and services that
# follow addresses found at run time or read local files. A new Apprise service shows up here for review.
LOCAL_OR_DYNAMIC = frozenset({
    "NotifyDBus", "NotifyGLib", "NotifyGnome", "NotifyMacOSX", "NotifyWindows", "NotifyBlink1", "NotifySyslog",
    "NotifyNostr", "NotifyBlueSky", "NotifyVapid", "NotifyFCM",
})
HOST_NAMING = sorted(name for name, cls in plugin_classes().items() if any("{host}" in t for t in cls.templates))


def no_dns(host: str, port: int) -> list[str]:
    """Loopback in every spelling is refused without DNS; any other name is a test bug."""
    raise UnresolvableTarget(f"tests resolve no host names ({host})")


def test_every_service_apprise_ships_is_classified() -> None:
    """Each service names its server, is reviewed as vendor-hosted, or is undetermined; the reviewed lists
    name only services Apprise ships, and a vendor-hosted one has no {host} in its URL forms."""
    shipped = plugin_classes()
    assert len(shipped) > 150
    assert FIXED <= shipped.keys() and UNDETERMINED <= shipped.keys() and LOCAL_OR_DYNAMIC <= shipped.keys()
    for name in FIXED:
        assert not any("{host}" in t for t in shipped[name].templates), name
    special = {"NotifyZulip", "NotifyACS"}
    unclassified = {n for n, cls in shipped.items()
                    if n not in FIXED | UNDETERMINED | LOCAL_OR_DYNAMIC | special and not any("{host}" in t for t in cls.templates)}
    assert unclassified == set()
    assert {n for n in HOST_NAMING if not names_host(shipped[n])} <= UNDETERMINED | {"NotifyMatrix", "NotifyNtfy"}


def _unavailable(name: str) -> bool:
    """Apprise reads no URL of the service here (an optional package is missing): it refuses every one."""
    if readable(url_with_host(name, "example.com")) is not None:
        return False
    assert not getattr(plugin_classes()[name], "enabled", True) or name in NEEDS_PACKAGES, (
        f"no URL of {name} can be read: add one to tests/support/apprise_urls.HAND_WRITTEN")
    return True


@pytest.mark.parametrize("host", LOOPBACK)
@pytest.mark.parametrize("name", HOST_NAMING)
def test_every_service_with_a_loopback_server_is_refused_at_creation(name: str, host: str) -> None:
    """Every service whose URL has a {host}, given loopback in any spelling, is refused when subscribed (the
    format's check_url, which the API's subscribe runs first) and when the config loads, unless the plugin
    does not connect to that host (a vendor-hosted service: the connect-time tests below)."""
    url = url_with_host(name, host)
    plugin = readable(url)
    found = servers(plugin) if plugin is not None else None
    if plugin is not None and found is not None and all(literal_address(h) is None for h, _ in found):
        # the spelled host is not a server of this plugin: a vendor's account field (WeChat's corporate id,
        # Mailgun's mail domain), a topic on ntfy.sh, or a name the plugin puts under the vendor's domain
        assert all(host not in (h, f"[{h}]") for h, _ in found), found
        return
    with pytest.raises(InvalidSubscription) as err:
        webhook_format("apprise").check_url(url, STRICT, no_dns)
    said = str(err.value)
    if plugin is None:
        assert "Apprise cannot read" in said or "Apprise knows no" in said
    elif found is None:
        assert "cannot tell which server" in said and "apprise_allow_plugins" in said
    else:
        assert "address" in said and "refused" in said and "allow_private_targets" in said, said
    with pytest.raises(InvalidSubscription, match=r"entry 1 \(apprise "):
        apprise.check_config_entries([WebhookSpec(url=url, format="apprise")], STRICT)


@pytest.mark.parametrize("name", HOST_NAMING)
def test_every_service_naming_its_server_is_refused_by_the_address_policy(name: str) -> None:
    """Not only refused as unreadable: every loadable service that names its server reads some loopback
    spelling and refuses it for its address (or, undetermined, for its service)."""
    if _unavailable(name):
        pytest.skip(f"{name}: Apprise cannot load it here")
    said = []
    for host in LOOPBACK:
        url = url_with_host(name, host)
        if readable(url) is None:
            continue
        try:
            webhook_format("apprise").check_url(url, STRICT, no_dns)
        except InvalidSubscription as err:
            said.append(str(err))
    policy = [s for s in said if "allow_private_targets" in s or "apprise_allow_plugins" in s]
    vendor = name in {"NotifyMailgun", "NotifySparkPost", "NotifySendPulse", "NotifySMTP2Go", "NotifyWeChat"}
    assert vendor or policy, f"{name}: no loopback spelling was refused by the policy ({said})"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        (f"zulip://bot@127.0.0.1/{ZULIP_TOKEN}", "127.0.0.1 is a loopback address"),  # issue 21
        (f"zulip://bot@org.localhost/{ZULIP_TOKEN}", "org.localhost resolves to a loopback address"),
        (f"zulip://bot@org.10.0.0.5/{ZULIP_TOKEN}", "org.10.0.0.5"),
        (f"acs://sender@example.com/{ACS_KEY}/evil.localhost", "evil.localhost resolves to a loopback address"),
        ("mailto://user:pw@example.com?smtp=127.1", "127.1 resolves to a loopback address"),
        ("ntfys://0x7f000001/alerts", "0x7f000001 resolves to a loopback address"),
    ],
)
def test_servers_named_outside_the_host_are_read_from_the_plugin(subscriptions: SubscriptionStore, url: str, reason: str) -> None:
    """The server a plugin keeps in another field (Zulip's organization, ACS's endpoint, mailto's smtp=) is checked."""
    with pytest.raises(InvalidSubscription, match=reason):
        subscribe(subscriptions, url, "apprise", allow_private=False, resolve=no_dns)


def test_acs_and_zulip_at_public_servers_are_taken(subscriptions: SubscriptionStore) -> None:
    """The same services at public servers are subscribed: their server is resolved and checked."""
    table = {"chat.example.com": [PUBLIC], "acs.example.com": [PUBLIC]}
    subscribe(subscriptions, f"zulip://bot@chat.example.com/{ZULIP_TOKEN}", "apprise", allow_private=False,
              resolve=lambda host, port: table[host])
    subscribe(subscriptions, f"acs://sender@example.com/{ACS_KEY}/acs.example.com", "apprise", allow_private=False,
              resolve=lambda host, port: table[host])
    assert len(subscriptions.list_subscriptions()) == 2


@pytest.mark.parametrize("name", sorted(UNDETERMINED | LOCAL_OR_DYNAMIC))
def test_undetermined_services_are_refused_unless_allowed_by_name(subscriptions: SubscriptionStore, name: str) -> None:
    """A service whose server hubwatch cannot tell is refused, naming the setting; allowed by its scheme it is taken."""
    url = any_url(name)
    if url is None or readable(url) is None:
        pytest.skip(f"{name}: Apprise reads no URL of it here (an optional dependency)")
    scheme = url.partition("://")[0]
    with pytest.raises(InvalidSubscription, match=rf'cannot tell which server.*apprise_allow_plugins = \["{scheme}"\]'):
        subscribe(subscriptions, url, "apprise", allow_private=False, resolve=everything_is(PUBLIC))
    subscribe(subscriptions, url, "apprise", allow_private=False, resolve=everything_is(PUBLIC), apprise_plugins=[scheme])
    assert len(subscriptions.list_subscriptions()) == 1


@pytest.mark.parametrize("verify", ["no", "false", "off", "0"])
def test_verify_no_is_refused_unless_allowed(subscriptions: SubscriptionStore, verify: str) -> None:
    """An Apprise URL that turns certificate checks off is refused unless [delivery] apprise_allow_insecure_tls."""
    url = f"jsons://hooks.example.com/in?verify={verify}"
    with pytest.raises(InvalidSubscription, match="verify=no turns certificate checks off.*apprise_allow_insecure_tls"):
        subscribe(subscriptions, url, "apprise", allow_private=False, resolve=everything_is(PUBLIC))
    with pytest.raises(InvalidSubscription, match="entry 1"):
        apprise.check_config_entries([WebhookSpec(url=url, format="apprise")], STRICT)
    subscribe(subscriptions, url, "apprise", allow_private=False, resolve=everything_is(PUBLIC), apprise_insecure_tls=True)


@pytest.fixture
def listener() -> Iterator[Canary]:
    with canary() as c:
        yield c


VENDOR_URLS = [
    "tgram://123456789:AAHsecretBotTokenValue/12315544/",
    "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ/#general",
    "discord://4174216298/JHMHI8qBe7bk2ZwO5U711o3dV_js",
    "ntfy://hubwatch-alerts",
    "mailgun://noreply@example.com/key-abcdefghijklmnop/ops@example.com",
]


@pytest.mark.parametrize("url", VENDOR_URLS)
def test_vendor_hosted_services_cannot_be_steered_to_loopback(url: str) -> None:
    """A vendor-hosted service whose API name resolves to loopback (a poisoned resolver) is refused at connect."""
    msg = apprise.Message("title", "body")
    sent = apprise.send(url, msg, 5.0, 2.0, STRICT, everything_is("127.0.0.1"))
    assert (sent.ok, sent.refused) == (False, True), sent
    assert "resolves to a loopback address (127.0.0.1): refused at connect" in (sent.error or "")


def test_a_rebinding_name_is_refused_at_connect_and_the_subscription_disabled(
    store: Storage, outbox: OutboxStore, subscriptions: SubscriptionStore, make_dispatcher, listener: Canary
) -> None:
    """A name that is public when subscribed and at the pre-send check, then 127.0.0.1 when Apprise connects:
    the connection is not made, the delivery fails and the subscription is disabled saying why."""
    dns = Rebinding(first=[PUBLIC], then=["127.0.0.1"])
    url = f"json://evil-rebind.test:{listener.port}/hook"
    sub = subscribe(subscriptions, url, "apprise", allow_private=False, resolve=Rebinding(first=[PUBLIC], then=[PUBLIC]))
    emit(store)
    report = make_dispatcher(allow_private_targets=False, resolve=dns).run_once(T0)
    assert report.failed == 1 and dns.asked == ["evil-rebind.test", "evil-rebind.test"]
    [item] = outbox.list_deliveries()
    assert item.delivery.status == "failed" and "refused at connect" in item.delivery.last_error
    after = subscriptions.get_subscription(sub.id)
    assert after.enabled is False and "loopback" in after.disabled_reason
    assert listener.settled() == 0


def test_allowed_private_targets_still_reach_loopback(
    store: Storage, subscriptions: SubscriptionStore, make_dispatcher, listener: Canary
) -> None:
    """With allow_private_targets the guard is off: the same delivery reaches the canary (so zero above means refused)."""
    subscriptions.add_subscription(f"json://127.0.0.1:{listener.port}/hook", "apprise", min_severity="info")
    emit(store)
    make_dispatcher(allow_private_targets=True, timeout_s=2.0, connect_timeout_s=1.0).run_once(T0)
    assert listener.settled() >= 1


@pytest.fixture
def api(store: Storage) -> Iterator:
    with serve(store, api_token="api-token", allow_private_targets=False) as served, served.client() as client:
        yield client


def test_the_api_refuses_the_issues_urls_and_nothing_connects(api, listener: Canary) -> None:
    """The URLs of issue 21, and loopback in a field the old check did not read, are a 422 with a one-line reason."""
    auth = {"Authorization": "Bearer api-token"}
    urls = [
        f"zulip://bot@127.0.0.1/{ZULIP_TOKEN}",
        f"acs://sender@example.com/{ACS_KEY}/evil-rebind.test",
        f"acs://sender@example.com/{ACS_KEY}/evil.localhost",
        f"json://2130706433:{listener.port}/hook",
        f"json://localhost:{listener.port}/hook",
        f"jsons://hooks.example.com:{listener.port}/x?verify=no",
        "syslog://local5",
    ]
    for url in urls:
        answer = api.post("/api/v1/subscriptions", json={"url": url, "format": "apprise"}, headers=auth)
        assert answer.status_code == 422, (url, answer.text)
        detail = answer.json()["detail"]
        assert "\n" not in detail and ("refused" in detail or "cannot resolve" in detail or "cannot read" in detail), detail
    assert api.get("/api/v1/subscriptions").json() == []
    assert listener.settled() == 0


@pytest.mark.parametrize(
    "url",
    [f"acs://sender@example.com/{ACS_KEY}/evil-rebind.test", f"zulip://bot@evil-rebind.test/{ZULIP_TOKEN}"],
)
def test_a_rebinding_server_in_a_field_other_than_the_host_is_refused_at_connect(subscriptions: SubscriptionStore, url: str) -> None:
    """Issue 21's ACS and Zulip URLs with a name that answers public at the check, loopback when Apprise connects."""
    dns = Rebinding(first=[PUBLIC], then=["127.0.0.1"])
    subscribe(subscriptions, url, "apprise", allow_private=False, resolve=dns)
    sent = apprise.send(url, apprise.Message("title", "body"), 5.0, 2.0, STRICT, dns)
    assert (sent.ok, sent.refused) == (False, True), sent
    assert "resolves to a loopback address (127.0.0.1): refused at connect" in (sent.error or "")


def test_the_api_honours_the_operators_allowances(store: Storage) -> None:
    """With [delivery] apprise_allow_plugins naming a service, the API subscribes it (201)."""
    auth = {"Authorization": "Bearer api-token"}
    with serve(store, api_token="api-token", allow_private_targets=False, apprise_allow_plugins=("syslog",)) as served, \
            served.client() as client:
        created = client.post("/api/v1/subscriptions", json={"url": "syslog://local5", "format": "apprise"}, headers=auth)
    assert created.status_code == 201, created.text
