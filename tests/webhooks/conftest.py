"""Webhook test doubles: a recording receiver (a real HTTP server on loopback), a fake clock, an outbox
over a migrated SQLite file, and a dispatcher wired to them."""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from feeds.dispatcher import DeliveryOptions, Dispatcher
from feeds.webhooks import Links
from feeds.webhooks.safety import Resolver
from storage.db import create_db_engine, migrate
from storage.event_log import NewEvent
from storage.outbox import OutboxStore
from storage.store import Store
from storage.subscription_store import SubscriptionStore
from storage.subscriptions import Subscription

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
SECRET = "whsec_" + base64.b64encode(b"hubwatch-test-secret-0123456789").decode()
OLD_SECRET = "whsec_" + base64.b64encode(b"hubwatch-old-secret-9876543210!").decode()


class FakeClock:
    """Time that moves only when a test says so."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


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
                with receiver._cond:
                    reply = receiver.plan.pop(0) if receiver.plan else receiver.default
                if reply.stall:
                    receiver.released.wait()
                    return
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver._cond:
                    receiver.requests.append(Received(self.path, headers, body, reply.status))
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

    def start(self) -> Receiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.released.set()
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def make_receiver() -> Iterator[Callable[[], Receiver]]:
    started: list[Receiver] = []

    def make() -> Receiver:
        receiver = Receiver().start()
        started.append(receiver)
        return receiver

    yield make
    for receiver in started:
        receiver.stop()


@pytest.fixture
def receiver(make_receiver: Callable[[], Receiver]) -> Receiver:
    return make_receiver()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(database_url: str, clock: FakeClock) -> Iterator[Store]:
    engine = create_db_engine(database_url)
    migrate(engine)
    yield Store(engine, clock=clock)
    engine.dispose()


@pytest.fixture
def outbox(store: Store, clock: FakeClock) -> OutboxStore:
    return OutboxStore(store.engine, clock=clock)


@pytest.fixture
def subscriptions(store: Store, clock: FakeClock) -> SubscriptionStore:
    return SubscriptionStore(store.engine, clock=clock)


LINKS = Links("https://huggingface.co", "https://hubwatch.example")


@pytest.fixture
def make_dispatcher(outbox: OutboxStore) -> Iterator[Callable[..., Dispatcher]]:
    """Dispatchers over the test outbox; loopback allowed (the receiver lives there), short time-outs.
    Their clock is the real one: it stamps webhook-timestamp, which receivers check against their own."""
    made: list[Dispatcher] = []

    def make(secrets: dict[str, str] | None = None, resolve: Resolver | None = None, **options: object) -> Dispatcher:
        opts = {"allow_private_targets": True, "timeout_s": 5.0, "connect_timeout_s": 2.0, **options}
        env = secrets or {}
        dispatcher = Dispatcher(
            outbox,
            DeliveryOptions(**opts),  # type: ignore[arg-type]
            secret_for=lambda sub: sub.secret or env.get(sub.secret_env or ""),
            links=LINKS,
            resolve=resolve or _no_dns,
        )
        made.append(dispatcher)
        return dispatcher

    yield make
    for dispatcher in made:
        dispatcher.close()


def _no_dns(host: str, port: int) -> list[str]:
    raise AssertionError(f"tests resolve no host names ({host})")


def emit(
    store: Store,
    n: int = 1,
    repo_id: str = "org/model",
    severity: str = "warning",
    kinds: tuple[str, ...] = ("chat_template",),
    kind: str = "revision.ingested",
    title: str = "model: chat template changed (warning)",
    commit_title: str = "Update tokenizer_config.json",
    summaries: tuple[str, ...] = ("chat template changed",),
) -> list[str]:
    """Record `n` standalone events (each one's deliveries are enqueued in its transaction); their ids."""
    ids = []
    for i in range(n):
        event_id = f"ev-{repo_id}-{kind}-{len(store.list_events(limit=10_000))}-{i}"
        payload = {"commit_title": commit_title, "baseline": False, "kinds": list(kinds), "summaries": list(summaries)}
        store.add_event(repo_id, NewEvent(event_id, kind, title, severity, False, payload), sha=f"{i:040x}")
        ids.append(event_id)
    return ids


def subscribe(subscriptions: SubscriptionStore, url: str, fmt: str = "generic", **kwargs: object) -> Subscription:
    """An API subscription straight into the store (loopback URLs: the receiver is local)."""
    kwargs.setdefault("secret", SECRET if fmt == "generic" else None)
    kwargs.setdefault("min_severity", "info")
    return subscriptions.add_subscription(url, fmt, **kwargs)  # type: ignore[arg-type]
