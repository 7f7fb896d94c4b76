"""The connect-time guard: inside `guarded()` no socket reaches a non-public address, however the address
was spelled or resolved, and outside it (another thread, another context) nothing changes."""

from __future__ import annotations

import socket
import threading
import urllib.request
from collections.abc import Iterator

import pytest

from feeds.webhooks.socket_guard import RefusedAddress, guarded
from tests.support.canary import PUBLIC, Canary, Rebinding, canary, everything_is

LOOPBACK_SPELLINGS = ["127.0.0.1", "127.1", "0x7f000001", "2130706433", "localhost", "0.0.0.0"]


@pytest.fixture
def listener() -> Iterator[Canary]:
    with canary() as c:
        yield c


def test_the_canary_counts_connections_made_without_the_guard(listener: Canary) -> None:
    """The canary is not blind: an unguarded connection is counted (so a zero below means something)."""
    socket.create_connection(("127.0.0.1", listener.port), timeout=5).close()
    assert listener.settled() == 1


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS)
def test_loopback_in_any_spelling_is_refused(listener: Canary, host: str) -> None:
    """create_connection to the canary by any loopback spelling is refused, and the canary counts nothing."""
    with guarded() as guard, pytest.raises(RefusedAddress, match="refused at connect"):
        socket.create_connection((host, listener.port), timeout=5)
    assert guard.refused and "address" in guard.refused[0]
    assert listener.settled() == 0


@pytest.mark.parametrize("family", [socket.AF_INET, socket.AF_INET6])
def test_a_raw_connect_to_loopback_is_refused(family: int) -> None:
    """A plugin's own socket (no getaddrinfo first) is refused at connect(), connect_ex() and sendto()."""
    address = ("127.0.0.1", 9) if family == socket.AF_INET else ("::1", 9)
    kind = socket.SOCK_STREAM
    try:
        sock = socket.socket(family, kind)
    except OSError:
        pytest.skip("no IPv6 on this machine")
    with sock, guarded():
        with pytest.raises(RefusedAddress, match="loopback"):
            sock.connect(address)
        assert sock.connect_ex(address) != 0
    with socket.socket(family, socket.SOCK_DGRAM) as udp, guarded(), pytest.raises(RefusedAddress, match="loopback"):
        udp.sendto(b"<14>hubwatch", address)


@pytest.mark.parametrize(
    ("address", "reason"),
    [("169.254.169.254", "link-local"), ("10.0.0.5", "private"), ("100.64.0.1", "CGNAT"), ("fd00:ec2::254", "private"),
     ("::ffff:127.0.0.1", "loopback"), ("224.0.0.1", "multicast"), ("0.0.0.0", "unspecified")],
)
def test_metadata_private_and_reserved_addresses_are_refused_by_name(address: str, reason: str) -> None:
    """A name resolving to the cloud metadata address, a private, CGNAT, unique-local, mapped, multicast or
    unspecified address is refused before any connect."""
    with guarded(everything_is(address)) as guard, pytest.raises(RefusedAddress, match=reason):
        socket.create_connection(("metadata.example", 80), timeout=5)
    assert f"metadata.example resolves to a {reason}" in guard.refused[0]


def test_a_rebinding_name_is_refused_when_it_turns_to_loopback(listener: Canary) -> None:
    """A name that resolved to a public address a moment ago and now answers 127.0.0.1 is refused at connect,
    through the plain HTTP stack too: the canary sees nothing."""
    dns = Rebinding(first=[PUBLIC], then=["127.0.0.1"])
    assert dns("evil-rebind.test", 443) == [PUBLIC]  # what the check at subscription time saw
    with guarded(dns) as guard, pytest.raises(OSError, match="refused at connect"):
        no_proxy = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        no_proxy.open(f"http://evil-rebind.test:{listener.port}/", timeout=5)
    assert guard.refused == [
        "evil-rebind.test resolves to a loopback address (127.0.0.1): refused at connect "
        "(the operator can allow it with [delivery] allow_private_targets)"
    ]
    assert listener.settled() == 0


def test_the_guard_holds_only_in_its_own_context(listener: Canary) -> None:
    """Other threads keep connecting as before while one thread is guarded, and the guard ends with its block."""
    reached: list[bool] = []

    def elsewhere() -> None:
        socket.create_connection(("127.0.0.1", listener.port), timeout=5).close()
        reached.append(True)

    with guarded():
        other = threading.Thread(target=elsewhere)
        other.start()
        other.join(5)
        with pytest.raises(RefusedAddress):
            socket.create_connection(("127.0.0.1", listener.port), timeout=5)
    socket.create_connection(("127.0.0.1", listener.port), timeout=5).close()
    assert reached == [True] and listener.settled() == 2


def test_public_addresses_pass_the_guard() -> None:
    """A public answer is handed on unchanged (getaddrinfo as the library asked for it)."""
    with guarded(everything_is(PUBLIC)) as guard:
        infos = socket.getaddrinfo("hooks.example.com", 443, type=socket.SOCK_STREAM)
    assert {info[4][:2] for info in infos} == {(PUBLIC, 443)} and guard.refused == []
