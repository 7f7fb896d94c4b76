"""Where a webhook may go: user-given URLs are an SSRF risk.

A URL is checked when a subscription is made and again at every delivery: the host is resolved and
every address it resolves to must be public (not loopback, private, link-local, CGNAT, multicast,
unspecified or otherwise reserved) unless the operator allows private targets. The delivery then
connects to the address that was checked (`Target.pinned_url`, with the original Host header and TLS
server name), so a DNS answer that changes between the check and the connection (DNS rebinding)
cannot send it elsewhere.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

from storage.errors import InvalidSubscription
from storage.subscriptions import validate_url

# host, port -> the addresses it resolves to (tests pass their own; the default asks the system).
Resolver = Callable[[str, int], list[str]]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class UnsafeTarget(InvalidSubscription):
    """The URL's host is, or resolves to, an address the policy refuses."""


class UnresolvableTarget(Exception):
    """The URL's host did not resolve (maybe for now: DNS can fail and recover)."""


@dataclass(frozen=True)
class Target:
    """A checked URL: connect to `address`, send `host_header`, verify TLS against `hostname`."""

    url: str
    scheme: str
    hostname: str
    port: int
    address: str
    host_header: str

    @property
    def pinned_url(self) -> str:
        parts = urllib.parse.urlsplit(self.url)
        host = f"[{self.address}]" if ":" in self.address else self.address
        return urllib.parse.urlunsplit((parts.scheme, f"{host}:{self.port}", parts.path or "/", parts.query, ""))


def system_resolve(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as err:
        raise UnresolvableTarget(f"cannot resolve {host}: {err}") from err
    return list(dict.fromkeys(str(info[4][0]).split("%", 1)[0] for info in infos))


def refusal(address: IPAddress) -> str | None:
    """Why the policy refuses this address, or None when it is a public one."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or (
            ipaddress.IPv4Address(int(address) & 0xFFFFFFFF) if address in _NAT64 else None
        )
        if embedded is not None:
            return refusal(embedded)
    if address.is_loopback:
        return "loopback"
    if address.is_unspecified:
        return "unspecified"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return "CGNAT (shared address space)"
    if address.is_reserved:
        return "reserved (not public)"
    if address.is_private:
        return "private"
    if not address.is_global:
        return "reserved (not public)"
    return None


def vet(url: str, allow_private: bool, resolve: Resolver = system_resolve) -> Target:
    """Check a URL and pick the address to connect to. Raises InvalidSubscription (malformed),
    UnsafeTarget (refused address) or UnresolvableTarget (DNS failed)."""
    validate_url(url)
    parts = urllib.parse.urlsplit(url)
    hostname = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = [ipaddress.ip_address(hostname)]
    except ValueError:
        resolved = resolve(hostname, port)
        if not resolved:
            raise UnresolvableTarget(f"{hostname} resolves to no address") from None
        addresses = [ipaddress.ip_address(a) for a in resolved]
    if not allow_private:
        for address in addresses:
            reason = refusal(address)
            if reason is not None:
                what = f"is a {reason} address" if str(address) == hostname else f"resolves to a {reason} address ({address})"
                raise UnsafeTarget(f"{hostname} {what}: refused (the operator can allow it with [delivery] allow_private_targets)")
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return Target(url, parts.scheme, hostname, port, str(addresses[0]), netloc)


def check_url(url: str, allow_private: bool, resolve: Resolver = system_resolve) -> None:
    """For subscription time: a malformed URL, an unresolvable host or a refused address is an error."""
    try:
        vet(url, allow_private, resolve)
    except UnresolvableTarget as err:
        raise InvalidSubscription(str(err)) from err
