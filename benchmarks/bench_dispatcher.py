"""Figure: webhook deliveries per second the dispatcher sustains against a local receiver.

Each delivery is a signed Standard Webhooks POST to a receiver on loopback (HTTP/1.1 keep-alive,
answering 204, in its own process) plus its bookkeeping in SQLite (claim, delivery row, attempt log). Cases: one endpoint
(its deliveries go one at a time, oldest first, by design), and 8 endpoints at the default
concurrency of 4. Baseline: bare httpx POSTs of the same body to the same receiver with no database,
the ceiling for one connection. Prints deliveries/s and the ratio to the baseline.
Run: python -m benchmarks run dispatcher   (size: deliveries per case, default 2,000)
"""

from __future__ import annotations

import multiprocessing
import sys
import tempfile
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import structlog

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from feeds.webhooks.dispatcher import DeliveryOptions, Dispatcher
from storage.db import create_db_engine, migrate
from storage.event_log import NewEvent
from storage.front import Storage
from storage.subscriptions import new_secret

T0 = datetime(2025, 3, 1, tzinfo=UTC)
BENCHMARK = Benchmark(
    name="dispatcher",
    about="Webhook deliveries a second the dispatcher sustains against a local receiver, beside bare httpx POSTs",
    tags=("slow", "webhooks"),
    size="deliveries per case (default 2,000)",
    small=200,
    figures=(
        Figure("bare httpx POSTs, no database (the ceiling)", "deliveries/s", direction="higher"),
        Figure("dispatcher, 1 endpoint (in order)", "deliveries/s", direction="higher"),
        Figure("dispatcher, 8 endpoints, concurrency 4", "deliveries/s", direction="higher"),
        Figure("dispatcher 1 endpoint / bare POSTs", "ratio", direction="higher"),
        Figure("dispatcher 8 endpoints / bare POSTs", "ratio", direction="higher"),
    ),
)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(204)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - BaseHTTPRequestHandler's signature
        pass


def _serve(ready: multiprocessing.Queue) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    ready.put(server.server_address[1])
    server.serve_forever()


def _events(store: Storage, n: int) -> None:
    payload = {"commit_title": "Update tokenizer_config.json", "baseline": False, "kinds": ["chat_template"],
               "summaries": ["chat template changed; rendered prompt differs for 2 of 3 sample conversations"]}
    for i in range(n):
        store.history.add_event("org/model", NewEvent(f"ev-{i}", "revision.ingested", "model: chat template changed (warning)",
                                              "warning", False, payload), sha=f"{i:040x}")


def _case(tmp: str, name: str, url: str, n: int, endpoints: int, concurrency: int) -> float:
    engine = create_db_engine(f"sqlite:///{tmp}/{name}.db")
    migrate(engine)
    store = Storage(engine, clock=lambda: T0)
    outbox, subscriptions = store.outbox, store.subscriptions
    for i in range(endpoints):
        subscriptions.add_subscription(f"{url}/{i}", "generic", secret=new_secret(), min_severity="info")
    _events(store, n // endpoints)
    dispatcher = Dispatcher(outbox, DeliveryOptions(allow_private_targets=True, concurrency=concurrency))
    started = time.perf_counter()
    report = dispatcher.run_once(T0)
    elapsed = time.perf_counter() - started
    dispatcher.close()
    engine.dispose()
    assert report.delivered == (n // endpoints) * endpoints, report
    return report.delivered / elapsed


def _baseline(url: str, n: int) -> float:
    body = b'{"type":"revision.ingested","timestamp":"2025-03-01T00:00:00+00:00","data":{}}' * 4
    with httpx.Client(trust_env=False) as client:
        started = time.perf_counter()
        for _ in range(n):
            client.post(url, content=body, headers={"content-type": "application/json"})
        return n / (time.perf_counter() - started)


def measure(size: int | None = None) -> dict[str, float]:
    n = size or 2000
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))  # errors only
    ready = multiprocessing.Queue()
    receiver = multiprocessing.Process(target=_serve, args=(ready,), daemon=True)  # its own GIL
    receiver.start()
    url = f"http://127.0.0.1:{ready.get(timeout=30)}/hook"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            baseline = _baseline(url, n)
            one = _case(tmp, "one", url, n, endpoints=1, concurrency=4)
            many = _case(tmp, "many", url, n, endpoints=8, concurrency=4)
    finally:
        receiver.terminate()
    detail(f"deliveries per case: {n}")
    return {"bare httpx POSTs, no database (the ceiling)": baseline, "dispatcher, 1 endpoint (in order)": one,
            "dispatcher, 8 endpoints, concurrency 4": many, "dispatcher 1 endpoint / bare POSTs": one / baseline,
            "dispatcher 8 endpoints / bare POSTs": many / baseline}


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
