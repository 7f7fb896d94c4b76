"""A recording webhook receiver: a real HTTP server on loopback that records every request and answers as
planned (status, headers, a stalled or a huge answer). The tests' and the benchmarks' receiving end."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    """How the receiver answers one request."""

    status: int = 204
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    stall: bool = False  # hold the request open until the test ends (a receiver that never answers)
    body_bytes: int = 0  # stream this many bytes of body (a huge answer), stopping when the client leaves


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int
    at: float = 0.0  # time.monotonic() when the body was read


class Receiver:
    """A webhook receiver on 127.0.0.1 that records every request and answers as planned:
    `plan` holds the replies to the next requests in order, then `default` answers."""

    def __init__(self) -> None:
        self.plan: list[Reply] = []
        self.default = Reply()
        self.requests: list[Received] = []
        self.bytes_sent = 0
        self.released = threading.Event()
        self._cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                at = time.monotonic()
                with receiver._cond:
                    reply = receiver.plan.pop(0) if receiver.plan else receiver.default
                if reply.stall:
                    receiver.released.wait()
                    return
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver._cond:
                    receiver.requests.append(Received(self.path, headers, body, reply.status, at))
                    receiver._cond.notify_all()
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                size = reply.body_bytes or len(reply.body)
                self.send_header("content-length", str(size))
                self.end_headers()
                try:
                    if reply.body_bytes:
                        chunk = b"x" * 65536
                        while receiver.bytes_sent < reply.body_bytes:
                            self.wfile.write(chunk)
                            receiver.bytes_sent += len(chunk)
                    else:
                        self.wfile.write(reply.body)
                except OSError:
                    self.close_connection = True  # the client stopped reading: as it should

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - BaseHTTPRequestHandler's signature
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    @property
    def accepted(self) -> list[Received]:
        """Requests answered 2xx: what the receiver actually took in."""
        with self._cond:
            return [r for r in self.requests if 200 <= r.status < 300]

    def wait_for_accepted(self, n: int, timeout_s: float = 60) -> list[Received]:
        """Block until `n` requests were accepted (waits on a condition, not a sleep)."""
        with self._cond:
            ok = self._cond.wait_for(lambda: sum(200 <= r.status < 300 for r in self.requests) >= n, timeout_s)
        assert ok, f"receiver accepted {len(self.accepted)} of {n} in time"
        return self.accepted

    def first(self, match: Callable[[Received], bool], timeout_s: float) -> Received | None:
        """The first accepted request that ``match`` accepts, waiting up to ``timeout_s`` for one."""
        def found() -> Received | None:
            return next((r for r in self.requests if 200 <= r.status < 300 and match(r)), None)

        with self._cond:
            self._cond.wait_for(lambda: found() is not None, timeout_s)
            return found()

    def start(self) -> Receiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.released.set()
        self._server.shutdown()
        self._server.server_close()
