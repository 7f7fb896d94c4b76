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
    """Other threads (started outside the guard) keep connecting as before while one thread is guarded, and
    the guard ends with its block."""
    reached: list[bool] = []
    go = threading.Event()

    def elsewhere() -> None:
        go.wait(5)
        socket.create_connection(("127.0.0.1", listener.port), timeout=5).close()
        reached.append(True)

    other = threading.Thread(target=elsewhere)
    other.start()
    with guarded():
        go.set()
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


def test_a_thread_started_inside_the_guard_carries_it(listener: Canary) -> None:
    """A thread started while guarded (as paho-mqtt starts its network loop) is guarded too, also after the
    guarded block has ended; the refusal is recorded on the guard, and the canary counts nothing."""
    failures: list[BaseException] = []
    go = threading.Event()

    def network_loop() -> None:
        go.wait(5)
        try:
            socket.create_connection(("localhost", listener.port), timeout=5).close()
        except OSError as err:
            failures.append(err)

    with guarded() as guard:
        loop = threading.Thread(target=network_loop, name="paho-like-loop")
        loop.start()
    go.set()  # it connects after the guarded call returned
    loop.join(10)
    assert len(failures) == 1 and isinstance(failures[0], RefusedAddress), failures
    assert guard.refused and "loopback" in guard.refused[0]
    assert listener.settled() == 0


def test_a_thread_apprise_notify_starts_is_refused_loopback(listener: Canary) -> None:
    """Through Apprise itself: a service whose notify() starts a thread of its own that connects to the loopback
    canary (what Apprise's MQTT service does with paho-mqtt's loop) is refused there, and nothing connects."""
    import apprise
    from apprise.decorators import notify

    failures: list[BaseException] = []
    threads: list[threading.Thread] = []

    def connect_from_a_thread() -> None:
        try:
            socket.create_connection(("127.0.0.1", listener.port), timeout=5).close()
        except OSError as err:
            failures.append(err)

    @notify(on="hwthreadtest", name="a service with a network thread")
    def send(body: str, title: str, notify_type: str, *args: object, **kwargs: object) -> bool:
        thread = threading.Thread(target=connect_from_a_thread, name="service-loop")
        thread.start()
        threads.append(thread)
        return True

    try:
        with guarded() as guard:
            notifier = apprise.Apprise()
            assert notifier.add("hwthreadtest://")
            assert notifier.notify(body="body", title="title")
        [thread] = threads
        thread.join(10)
    finally:
        apprise.NotificationManager().remove("hwthreadtest")
    assert len(failures) == 1 and isinstance(failures[0], RefusedAddress), failures
    assert guard.refused == [
        "127.0.0.1 is a loopback address: refused at connect (the operator can allow it with [delivery] allow_private_targets)"
    ]
    assert listener.settled() == 0
