"""A small HTTP server on loopback in a daemon thread: what the Hub replay and the OSV fake run on.

`stop()` also closes idle keep-alive connections (a pooled client would otherwise still be answered
after the server stopped), and every connection sets TCP_NODELAY: headers and body go out in separate
writes, and without it Nagle's algorithm and the client's delayed ACK add ~40 ms to each request.
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class KeepAliveHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive; subclasses answer with Content-Length on every response."""

    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.loopback.track(self.connection)  # type: ignore[attr-defined]

    def finish(self) -> None:
        self.server.loopback.untrack(self.connection)  # type: ignore[attr-defined]
        try:
            super().finish()
        except OSError:
            pass

    @property
    def owner(self) -> Any:
        """The object the server serves (the replay, the fake)."""
        return self.server.loopback.owner  # type: ignore[attr-defined]

    def do_GET(self) -> None:
        self._handle("GET")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def do_POST(self) -> None:
        self._handle("POST")

    def _handle(self, method: str) -> None:
        raise NotImplementedError

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - BaseHTTPRequestHandler's signature
        """Quiet: the owners record what they need."""


class LoopbackServer:
    def __init__(self, handler: type[KeepAliveHandler], owner: object, name: str, host: str, port: int) -> None:
        self.handler, self.owner, self.name = handler, owner, name
        self.host, self.port = host, port
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._httpd is not None

    def start(self) -> int:
        """Listen and serve in a daemon thread; returns the port (useful with port 0)."""
        if self._httpd is not None:
            raise RuntimeError(f"{self.name} already started")
        self._httpd = ThreadingHTTPServer((self.host, self.port), self.handler)
        self._httpd.daemon_threads = True
        self._httpd.loopback = self  # type: ignore[attr-defined]
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=self.name, daemon=True
        )
        self._thread.start()
        return self.port

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            connections, self._connections = list(self._connections), set()
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._httpd = self._thread = None

    def track(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.add(conn)

    def untrack(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.discard(conn)
