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


@dataclass(frozen=True)
class TargetPolicy:
    """Where the operator lets webhooks and notifications go ([delivery] settings)."""

    allow_private: bool = False  # loopback, private, link-local... addresses too
    apprise_plugins: frozenset[str] = frozenset()  # Apprise schemes allowed although their server cannot be told
    apprise_insecure_tls: bool = False  # Apprise URLs may turn certificate checks off (verify=no)


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


def literal_address(host: str) -> IPAddress | None:
    """The address a host name spells without DNS: an IP literal (brackets allowed), an IPv4 address in
    the classic inet_aton forms (`127.1`, `0x7f000001`, `2130706433`), or loopback for `localhost` and
    its subdomains (RFC 6761). None for any other name."""
    name = host.strip().strip("[]").rstrip(".").lower()
    try:
        return ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        pass
    if name == "localhost" or name.endswith(".localhost"):
        return ipaddress.ip_address("127.0.0.1")
    if name and all(c in "0123456789abcdefx." for c in name) and name[0].isdigit():
        try:
            return ipaddress.IPv4Address(socket.inet_aton(name))
        except OSError:
            return None
    return None


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
    literal = literal_address(hostname)
    if literal is not None:
        addresses = [literal]
    else:
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
