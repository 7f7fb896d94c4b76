"""A connect-time address guard for code hubwatch does not control (Apprise and its plugins), so that the
address policy holds at the moment a socket connects, whatever the URL said and whatever DNS answered a
moment before (DNS rebinding).

While `guarded()` is active in a context, every name resolved through `socket.getaddrinfo` is resolved
once (by the guard's resolver) and refused when any answer is an address the webhook policy refuses
(feeds.webhooks.safety.refusal: loopback, private, link-local and the metadata addresses, CGNAT,
unique-local, multicast, unspecified, reserved); and every `connect`, `connect_ex` and `sendto` of an
IPv4/IPv6 socket is refused when it goes to such an address. A host name handed straight to `connect`
is resolved by the guard and the socket connected to the checked address. A refused connect raises
`RefusedAddress` (an OSError: libraries report it as a failed connection) and is recorded on the guard.

The patch is installed once, process-wide, when this module is imported; it does nothing outside a
guarded context (one ContextVar read). The guard follows the context: Apprise runs a service on its
worker threads with a copy of the caller's context, so it holds there too; and a `threading.Thread`
started inside a guarded context (paho-mqtt's network loop, started by Apprise's MQTT service in
`notify()`) runs in a copy of the context it was started in, so it carries the guard for as long as it
lives, after the guarded call has returned too. Threads started anywhere else are untouched.
"""

from __future__ import annotations

import contextvars
import errno
import ipaddress
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from feeds.webhooks.safety import Resolver, UnresolvableTarget, literal_address, refusal

_original_getaddrinfo = socket.getaddrinfo
_original_connect = socket.socket.connect
_original_connect_ex = socket.socket.connect_ex
_original_sendto = socket.socket.sendto
_original_start = threading.Thread.start
_INET = (socket.AF_INET, socket.AF_INET6)


class RefusedAddress(ConnectionRefusedError):
    """A connection the address policy refuses (raised inside the library that tried it)."""


@dataclass
class Guard:
    """One guarded call: how names are resolved, and what was refused (in order, once each)."""

    resolve: Resolver | None = None  # None: the system resolver
    refused: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def refuse(self, reason: str) -> RefusedAddress:
        with self._lock:
            if reason not in self.refused:
                self.refused.append(reason)
        return RefusedAddress(reason)


_ACTIVE: contextvars.ContextVar[Guard | None] = contextvars.ContextVar("hubwatch_socket_guard", default=None)


@contextmanager
def guarded(resolve: Resolver | None = None) -> Iterator[Guard]:
    """Refuse connections to non-public addresses in this context (and the contexts copied from it)."""
    guard = Guard(resolve)
    token = _ACTIVE.set(guard)
    try:
        yield guard
    finally:
        _ACTIVE.reset(token)


def _why(name: str, address: str) -> str | None:
    """The refusal message for `address` (which `name` resolved to), or None when it is public."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return None
    reason = refusal(ip)
    if reason is None:
        return None
    what = f"is a {reason} address" if name == address else f"resolves to a {reason} address ({address})"
    return f"{name} {what}: refused at connect (the operator can allow it with [delivery] allow_private_targets)"


def _resolve(guard: Guard, host: str, port: Any, family: int = 0, type: int = 0, proto: int = 0,  # noqa: A002
             flags: int = 0) -> list[Any]:
    """getaddrinfo's answer for `host`, every address checked; the guard's resolver when it has one."""
    literal = literal_address(host)
    if literal is not None:
        infos = _original_getaddrinfo(str(literal), port, family, type, proto, flags | socket.AI_NUMERICHOST)
    elif guard.resolve is not None:
        numeric_port = int(port) if str(port).isdigit() else 0
        infos = []
        token = _ACTIVE.set(None)  # the resolver may use getaddrinfo itself (safety.system_resolve does)
        try:
            addresses = guard.resolve(host, numeric_port)
        except UnresolvableTarget as err:
            raise socket.gaierror(socket.EAI_NONAME, str(err)) from err
        finally:
            _ACTIVE.reset(token)
        for address in addresses:
            infos += _original_getaddrinfo(address, port, family, type, proto, flags | socket.AI_NUMERICHOST)
    else:
        infos = _original_getaddrinfo(host, port, family, type, proto, flags)
    for info in infos:
        why = _why(host, str(info[4][0]))
        if why is not None:
            raise guard.refuse(why)
    return infos


def _getaddrinfo(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0) -> list[Any]:  # noqa: A002
    guard = _ACTIVE.get()
    if guard is None or host is None:
        return _original_getaddrinfo(host, port, family, type, proto, flags)
    name = host.decode("idna") if isinstance(host, bytes) else str(host)
    return _resolve(guard, name, port, family, type, proto, flags)


def _checked(sock: socket.socket, address: Any) -> Any:
    """The address to use instead of `address`: checked, a host name resolved and pinned. Raises RefusedAddress."""
    guard = _ACTIVE.get()
    if guard is None or sock.family not in _INET or not isinstance(address, tuple) or not address:
        return address
    host = address[0].decode("idna") if isinstance(address[0], bytes) else str(address[0])
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:  # a name: resolve it here, connect to what was checked
        infos = _resolve(guard, host, address[1], sock.family, sock.type)
        return infos[0][4] if infos else address
    why = _why(host, host)
    if why is not None:
        raise guard.refuse(why)
    return address


def _connect(self: socket.socket, address: Any) -> None:
    return _original_connect(self, _checked(self, address))


def _connect_ex(self: socket.socket, address: Any) -> int:
    try:
        checked = _checked(self, address)
    except RefusedAddress:
        return errno.ECONNREFUSED
    return _original_connect_ex(self, checked)


def _sendto(self: socket.socket, data: Any, *args: Any) -> int:
    if args:
        args = (*args[:-1], _checked(self, args[-1]))
    return _original_sendto(self, data, *args)


def _start(self: threading.Thread) -> None:
    """Thread.start; inside a guarded context the thread runs in a copy of it (Python 3.11 threads start
    in an empty context), so what a guarded call starts is guarded too."""
    if _ACTIVE.get() is not None:
        run, context = self.run, contextvars.copy_context()
        self.run = lambda: context.run(run)  # type: ignore[method-assign]
    _original_start(self)


socket.getaddrinfo = _getaddrinfo
socket.socket.connect = _connect  # type: ignore[method-assign]
socket.socket.connect_ex = _connect_ex  # type: ignore[method-assign]
socket.socket.sendto = _sendto  # type: ignore[method-assign]
threading.Thread.start = _start  # type: ignore[method-assign]
