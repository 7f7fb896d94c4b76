"""Where webhooks may go: user-given URLs resolving to non-public addresses are refused unless allowed."""

from __future__ import annotations

import ipaddress

import pytest

from feeds.webhooks import subscribe
from feeds.webhooks.safety import UnsafeTarget, check_url, literal_address, refusal, vet
from storage.errors import InvalidSubscription
from storage.subscription_store import SubscriptionStore


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),  # cloud metadata endpoints
        ("100.64.0.1", "CGNAT (shared address space)"),
        ("224.0.0.1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("240.0.0.1", "reserved (not public)"),
        ("192.0.2.10", "private"),  # documentation range
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("::ffff:169.254.169.254", "link-local"),
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("93.184.215.14", None),
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
    ],
)
def test_address_classes(address: str, reason: str | None) -> None:
    """Loopback, private, link-local, CGNAT, multicast, unspecified and reserved addresses are refused; public ones pass."""
    assert refusal(ipaddress.ip_address(address)) == reason


def _resolver(table: dict[str, list[str]]):
    def resolve(host: str, port: int) -> list[str]:
        return table[host]

    return resolve


@pytest.mark.parametrize(
    ("url", "addresses"),
    [
        ("http://127.0.0.1:8080/hook", []),
        ("http://[::1]/hook", []),
        ("http://localhost/hook", ["127.0.0.1", "::1"]),
        ("https://metadata.internal/latest", ["169.254.169.254"]),
        ("https://intranet.example.com/hook", ["10.0.0.5"]),
        ("https://mixed.example.com/hook", ["93.184.215.14", "10.0.0.5"]),  # one bad answer is enough
    ],
)
def test_private_targets_are_refused_unless_the_operator_allows_them(url: str, addresses: list[str]) -> None:
    """A URL naming or resolving to a non-public address is refused, saying how to allow it; allowed it passes."""
    resolve = _resolver({url.split("/")[2].split(":")[0]: addresses})
    with pytest.raises(UnsafeTarget, match="allow_private_targets"):
        check_url(url, allow_private=False, resolve=resolve)
    check_url(url, allow_private=True, resolve=resolve)


def test_a_public_target_is_pinned_to_the_checked_address() -> None:
    """The delivery connects to the address that was checked, sending the original Host header."""
    target = vet("https://hooks.example.com:8443/a/b?c=1", False, _resolver({"hooks.example.com": ["93.184.215.14"]}))
    assert target.pinned_url == "https://93.184.215.14:8443/a/b?c=1"
    assert target.host_header == "hooks.example.com:8443" and target.hostname == "hooks.example.com"
    v6 = vet("http://hooks.example.com/", False, _resolver({"hooks.example.com": ["2606:4700:4700::1111"]}))
    assert v6.pinned_url == "http://[2606:4700:4700::1111]:80/"


def test_unresolvable_hosts_are_refused_at_subscription_time() -> None:
    """A host name that does not resolve cannot be subscribed (checked with the system resolver)."""
    with pytest.raises(InvalidSubscription, match="cannot resolve"):
        check_url("https://no-such-host.invalid/hook", allow_private=False)


def test_subscribe_checks_the_address_before_storing(subscriptions: SubscriptionStore) -> None:
    """feeds.webhooks.subscribe (the API's way in) stores nothing for a refused URL, and stores a public one."""
    with pytest.raises(UnsafeTarget):
        subscribe(subscriptions, "http://127.0.0.1:9/hook", "slack", allow_private=False)
    assert subscriptions.list_subscriptions() == []
    sub = subscribe(subscriptions, "https://hooks.example.com/x", "generic", allow_private=False,
                    resolve=_resolver({"hooks.example.com": ["93.184.215.14"]}))
    assert sub.source == "api" and sub.secret and sub.secret.startswith("whsec_")


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("127.0.0.1", "127.0.0.1"), ("127.1", "127.0.0.1"), ("0x7f000001", "127.0.0.1"), ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"), ("[::1]", "::1"), ("localhost", "127.0.0.1"), ("api.localhost.", "127.0.0.1"),
        ("0.0.0.0", "0.0.0.0"), ("[::ffff:127.0.0.1]", "::ffff:7f00:1"), ("hooks.example.com", None),
        ("1password.com", None), ("deadbeef", None),
    ],
)
def test_addresses_spelled_without_dns_are_read_as_the_system_would(host: str, address: str | None) -> None:
    """IP literals in the classic inet_aton spellings and localhost names are addresses without asking DNS."""
    found = literal_address(host)
    assert (str(found) if found is not None else None) == address


@pytest.mark.parametrize("host", ["127.1", "0x7f000001", "2130706433", "localhost"])
def test_loopback_spellings_are_refused_without_dns(host: str) -> None:
    """A webhook URL spelling loopback in any form is refused before any resolver is asked."""
    with pytest.raises(UnsafeTarget, match="loopback"):
        check_url(f"http://{host}:8080/hook", allow_private=False, resolve=_resolver({}))
