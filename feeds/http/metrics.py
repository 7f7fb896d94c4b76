"""Prometheus text exposition: counters this process keeps, gauges read from the database; health
(`/healthz`, the process answers) and readiness (`/readyz`, the database answers)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel

from feeds.http.auth import require_read
from storage.kinds import REPO_STATES

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]

_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Metrics:
    """Counters and one latency histogram, safe to update from the server's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter[tuple[str, str, str]] = Counter()  # (method, route, status)
        self.events: Counter[tuple[str, str]] = Counter()  # (name, label) for feeds and hooks
        self._buckets = [0] * len(_BUCKETS_S)
        self._sum_s = 0.0
        self._count = 0

    def observe(self, method: str, route: str, status: int, duration_s: float) -> None:
        with self._lock:
            self.requests[(method, route, str(status))] += 1
            self._sum_s += duration_s
            self._count += 1
            for i, bound in enumerate(_BUCKETS_S):
                if duration_s <= bound:
                    self._buckets[i] += 1

    def count(self, name: str, label: str) -> None:
        with self._lock:
            self.events[(name, label)] += 1

    def exposition(self, gauges: dict[str, tuple[str, float]],
                   labelled: dict[str, tuple[str, str, dict[str, float]]] | None = None) -> str:
        """The text exposition: the process's counters, then `gauges` (name: help, value) and `labelled` gauges
        (name: help, label key, value by label), both read by the caller."""
        lines: list[str] = []
        with self._lock:
            lines += ["# HELP hubwatch_http_requests_total HTTP requests answered, by route template and status.",
                      "# TYPE hubwatch_http_requests_total counter"]
            for (method, route, status), n in sorted(self.requests.items()):
                lines.append(f'hubwatch_http_requests_total{{method="{method}",route="{_label(route)}",status="{status}"}} {n}')
            lines += ["# HELP hubwatch_http_request_duration_seconds Time to answer a request.",
                      "# TYPE hubwatch_http_request_duration_seconds histogram"]
            for bound, n in zip(_BUCKETS_S, self._buckets, strict=True):
                lines.append(f'hubwatch_http_request_duration_seconds_bucket{{le="{bound}"}} {n}')
            lines.append(f'hubwatch_http_request_duration_seconds_bucket{{le="+Inf"}} {self._count}')
            lines.append(f"hubwatch_http_request_duration_seconds_sum {self._sum_s:.6f}")
            lines.append(f"hubwatch_http_request_duration_seconds_count {self._count}")
            by_name: dict[str, list[tuple[str, int]]] = {}
            for (name, label), n in sorted(self.events.items()):
                by_name.setdefault(name, []).append((label, n))
        for name, (label_key, help_text) in _EVENT_COUNTERS.items():
            lines += [f"# HELP hubwatch_{name}_total {help_text}", f"# TYPE hubwatch_{name}_total counter"]
            for label, n in by_name.get(name, []):
                lines.append(f'hubwatch_{name}_total{{{label_key}="{_label(label)}"}} {n}')
        for name, (help_text, value) in gauges.items():
            lines += [f"# HELP hubwatch_{name} {help_text}", f"# TYPE hubwatch_{name} gauge", f"hubwatch_{name} {value:g}"]
        for name, (help_text, label_key, values) in (labelled or {}).items():
            lines += [f"# HELP hubwatch_{name} {help_text}", f"# TYPE hubwatch_{name} gauge"]
            lines += [f'hubwatch_{name}{{{label_key}="{_label(label)}"}} {value:g}' for label, value in sorted(values.items())]
        return "\n".join(lines) + "\n"


_EVENT_COUNTERS = {
    "feed_responses": ("outcome", "Feed requests answered, by outcome (rendered, cached, not_modified)."),
    "hub_webhooks": ("outcome", "Hub webhooks received, by outcome."),
}


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class MetricsMiddleware:
    """Times every request and counts it under its route template (never the raw path)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]], send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = list(message.get("headers", []))
                headers.append((b"x-content-type-options", b"nosniff"))
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = getattr(scope.get("route"), "path", None) or "(unmatched)"
            self.metrics.observe(scope.get("method", ""), route, status, time.perf_counter() - started)


class Health(BaseModel):
    status: str
    detail: str | None = None


class Liveness(Health):
    """The process answers; with a poller, whether its database takes writes (polling pauses if not)."""

    storage: str | None = None  # ok | failing
    since: str | None = None  # when the database started failing
    error: str | None = None  # why, as the database said it
    polling_paused: bool | None = None  # no Hub request is made until the next probe
    next_probe_at: str | None = None
    polls_scheduled: int | None = None  # with a scheduler: the watches it polls
    polls_overdue: int | None = None  # watches whose poll has not started within interval + jitter (+ grace)
    oldest_overdue_s: float | None = None  # how far past that the most overdue one is
    hub_budget: dict | None = None  # the Hub request budget: per pool, the window's use and limit, and any stretch
    worker: str | None = None  # with shared polling ([poll] coordination): this worker among those on the database
    polls_in_flight: int | None = None  # with shared polling: the watches this worker holds and polls now
    watches_failing: int | None = None  # watches whose last poll failed
    watches_by_state: dict[str, int] | None = None  # watches not active, by repo state (gone, gated, disabled, ...)


router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Liveness, response_model_exclude_none=True,
            summary="Liveness: the process answers (and whether the poller's database takes writes)")
def healthz(request: Request) -> Liveness:
    services = request.app.state.services
    state = services.storage_state() if services.storage_state is not None else {}
    polls = services.poll_state() if services.poll_state is not None else {}
    return Liveness(status="ok", **state, **polls, **_watch_health(services.queries))


def _watch_health(queries: Any) -> dict[str, Any]:
    """Failing watches, and those not active by repo state; nothing when the database does not answer (liveness
    is the process's: /readyz tells the database)."""
    try:
        failing, by_state = queries.watch_health()
    except Exception:  # noqa: BLE001 - a failing database must not fail liveness
        return {}
    return {"watches_failing": failing, "watches_by_state": by_state}


@router.get(
    "/readyz",
    response_model=Health,
    summary="Readiness: the database answers",
    responses={503: {"model": Health, "description": "The database does not answer"}},
)
def readyz(request: Request) -> Any:
    try:
        request.app.state.services.queries.ping()
    except Exception as err:  # noqa: BLE001 - any database failure means "not ready", reported as such
        return JSONResponse(status_code=503, content={"status": "unavailable", "detail": type(err).__name__})
    return Health(status="ready")


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    summary="Prometheus metrics",
    dependencies=[Depends(require_read)],
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}, 401: {"description": "Token needed"}},
)
def metrics(request: Request) -> PlainTextResponse:
    services = request.app.state.services
    counts = services.queries.counts()
    gauges = {
        "watches": ("Watched repo branches.", counts.watches),
        "watches_failing": ("Watches whose last poll failed.", counts.watches_failing),
        "revisions": ("Stored revisions.", counts.revisions),
        "changes": ("Stored changes.", counts.changes),
        "events": ("Stored events.", counts.events),
        "last_event_seq": ("The newest event's sequence number.", counts.last_event_seq),
    }
    if services.poll_state is not None:
        polls = services.poll_state()
        gauges["polls_overdue"] = ("Watches whose poll has not started within their interval plus jitter.", polls["polls_overdue"])
        gauges["oldest_overdue_seconds"] = ("How far past its interval plus jitter the most overdue poll is.", polls["oldest_overdue_s"])
    labelled = {}
    health = _watch_health(services.queries)
    if health:  # every state named (0 included), so that a watch leaving one shows as a drop to 0
        by_state = {state: float(health["watches_by_state"].get(state, 0)) for state in REPO_STATES}
        by_state["active"] = float(counts.watches - sum(health["watches_by_state"].values()))
        labelled["watches_by_state"] = ("Watches by their repo's state on the Hub (active, gone, gated, disabled, "
                                        "branch_missing, moved).", "state", by_state)
    return PlainTextResponse(services.metrics.exposition(gauges, labelled), media_type="text/plain; version=0.0.4")
