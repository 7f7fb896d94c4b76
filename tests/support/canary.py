"""A canary for server-side request forgery: a TCP listener on loopback that counts every connection made
to it (and answers none), and resolvers that answer what a hostile DNS server would."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

PUBLIC = "93.184.215.14"  # a public address (example.com's at one time): passes the address policy


class Canary:
    """Counts the connections accepted on 127.0.0.1:`port` (each is closed at once); a free port unless given
    (443, where TLS services connect, needs root)."""

    def __init__(self, port: int = 0) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self._sock.listen(64)
        self._sock.settimeout(0.2)
        self.port: int = self._sock.getsockname()[1]
        self._count = 0
        self._peers: set[tuple[str, int]] = set()
        self._counted = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="ssrf-canary", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._counted:
                self._count += 1
                self._peers.add(peer[:2])
                self._counted.notify_all()
            conn.close()

    @property
    def connections(self) -> int:
        """Connections accepted so far (a connect can return before the listener has counted it: tests
        that expect some wait for them with `wait_for`)."""
        with self._counted:
            return self._count

    def wait_for(self, n: int, timeout_s: float = 5.0) -> int:
        """The count once it reaches `n`, or when `timeout_s` has passed."""
        with self._counted:
            self._counted.wait_for(lambda: self._count >= n, timeout_s)
            return self._count

    def settled(self) -> int:
        """The connections made before now, all of them counted: one more is made (unguarded) and waited
        for; the listener accepts in order, so every earlier one is in the count by then."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as probe:
            mine = probe.getsockname()[:2]
        with self._counted:
            assert self._counted.wait_for(lambda: mine in self._peers, 5.0), "the canary stopped accepting"
            self._count -= 1  # the probe is no connection anyone else made: later counts leave it out too
            return self._count

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        self._thread.join(timeout=2)


@contextmanager
def canary(port: int = 0) -> Iterator[Canary]:
    listener = Canary(port)
    try:
        yield listener
    finally:
        listener.close()


class Rebinding:
    """A DNS server that rebinds: `first` for the first question about each name, `then` for every later one."""

    def __init__(self, first: list[str], then: list[str]) -> None:
        self.first, self.then = first, then
        self.asked: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        answer = self.then if host in self.asked else self.first
        self.asked.append(host)
        return list(answer)


def everything_is(address: str):
    """A poisoned resolver: every name resolves to `address`."""

    def resolve(host: str, port: int) -> list[str]:
        return [address]

    return resolve
