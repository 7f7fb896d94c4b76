"""The HTTP server: one ASGI app (feeds, JSON API, pages, Hub webhooks, health, metrics) and a uvicorn
runner for a background thread. Everything outside `feeds` and `storage` comes in as arguments: the
ingest trigger for Hub webhooks, the differ for "compare", the webhook subscriptions. Storage lookup
errors become answers in one place (`LOOKUP_STATUS`, `lookup_failed`), for every route; a database the
store cannot use (a table dropped by hand, a database gone) answers 503 in one place too (`storage_failed`).
"""

from __future__ import annotations

import email.utils
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Self

import structlog
import uvicorn
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from feeds.http import api, hubhooks, metrics, osv_api
from feeds.http.auth import declare_security, require_read
from feeds.http.body_limit import BodyLimitMiddleware
from feeds.http.params import DatasetPaths, Kind, NamePath, OrgPath, RepoRenamed, Severity, base_url, known_repo
from feeds.osv.database import OsvDatabase
from feeds.views import pages
from feeds.views.feed import DEFAULT_LIMIT, MAX_LIMIT, FeedBuilder, FeedRequest, http_date
from storage.errors import (
    AmbiguousRevision,
    NotStored,
    StorageError,
    StoreLookupError,
    SubscriptionDisabled,
    WatchExists,
)
from storage.front import Storage
from storage.models import Revision
from storage.read_model import ReadModel

log = structlog.get_logger(__name__)

# The feed warm-up renders this many entries at a time, with this pause between pieces.
WARM_PIECE = 50
WARM_PAUSE_S = 0.02

# (repo_id, branch, head_sha) -> whether an ingest was started or queued; head_sha: the commit a Hub webhook
# says the branch moved to (None when it names none), for the poll to verify and use in place of a head request.
Trigger = Callable[[str, str | None, str | None], bool]
# Two stored revisions -> their changes as dicts (kind, path, summary, severity, structural, security, detail).
DiffFn = Callable[[Revision, Revision], list[dict[str, Any]]]
# A stored revision -> what only the tracker can read of it: {template_engines, template_samples, tokenizer_behaviour}.
ExtrasFn = Callable[[Revision], dict[str, Any]]
VerifyFn = Callable[[Revision], list[dict[str, Any]] | None]  # a revision -> its verifier findings (None: no config)
# (a stored revision or None, a stored dataset revision) -> the dataset table of the second against the first (None:
# against its parent), tracker/revision/dataset_table.py's shape; None for a model or where it cannot be computed.
DatasetTableFn = Callable[[Revision | None, Revision], dict[str, Any] | None]
# a stored estimate's cost section -> the same at today's card prices ([cost] cards; estimator.cost.reprice)
RepriceFn = Callable[[dict[str, Any]], dict[str, Any] | None]
# The poller's view of the database: {"storage": "ok"|"failing", "since", "error", "polling_paused", ...}.
StorageStateFn = Callable[[], dict[str, Any]]
# The scheduler's view of its polls: {"polls_scheduled", "polls_overdue", "oldest_overdue_s"}.
PollStateFn = Callable[[], dict[str, Any]]

# The methods a 405's Allow header may name, in the order it names them.
HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")

# The HTTP status of each storage lookup error; a subclass answers as its nearest listed base.
LOOKUP_STATUS: dict[type[StoreLookupError], int] = {
    NotStored: 404,
    AmbiguousRevision: 409,
    WatchExists: 409,
    SubscriptionDisabled: 409,
}


@dataclass(frozen=True)
class ServerOptions:
    """What the server needs from the configuration; secrets are values here, read by the config module."""

    public_url: str = ""  # empty: links use the URL each request came in on
    api_token: str | None = field(default=None, repr=False)
    read_token: str | None = field(default=None, repr=False)
    hub_webhook_secret: str | None = field(default=None, repr=False)
    default_interval_s: int = 900
    feed_max_age_s: int = 300
    allow_private_targets: bool = False  # subscriptions to loopback/private addresses ([delivery])
    apprise_allow_plugins: tuple[str, ...] = ()  # Apprise services whose server cannot be told ([delivery])
    apprise_allow_insecure_tls: bool = False  # Apprise URLs with verify=no ([delivery])
    hub_url: str = "https://huggingface.co"  # [hub] endpoint: where commit and repo links on pages point


@dataclass
class Services:
    store: Storage
    queries: ReadModel
    feeds: FeedBuilder
    options: ServerOptions
    metrics: metrics.Metrics
    trigger: Trigger | None = None
    subscriptions: Any = None  # storage's SubscriptionStore
    diff: DiffFn | None = None
    storage_state: StorageStateFn | None = None
    poll_state: PollStateFn | None = None
    extras: ExtrasFn | None = None
    osv: OsvDatabase | None = None
    verify: VerifyFn | None = None
    tables: DatasetTableFn | None = None
    reprice: RepriceFn | None = None
    _diffs: dict[tuple[str, str, str], list[dict[str, Any]]] = field(default_factory=dict)
    _diff_lock: threading.Lock = field(default_factory=threading.Lock)
    _lints: dict[tuple[str, str], list[dict[str, Any]] | None] = field(default_factory=dict)
    _tables: dict[tuple[str, str | None, str], dict[str, Any] | None] = field(default_factory=dict)

    def priced(self, result: dict[str, Any] | None) -> dict[str, Any] | None:
        """A stored estimate's result with its cost section's dollars at today's card prices (the stored hours and
        tokens/s are kept; the result as stored without a repricer, without a cost section, or when it fails)."""
        if self.reprice is None or not isinstance(result, dict) or not isinstance(result.get("cost"), dict):
            return result
        try:
            cost = self.reprice(result["cost"])
        except Exception:  # the stored figures stand
            log.exception("reprice_failed")
            return result
        return result if cost is None else {**result, "cost": cost}

    def revision_extras(self, revision: Revision) -> dict[str, Any]:
        """The engine matrix and tokenizer check of a revision (empty without the tracker's reader, or when it fails)."""
        if self.extras is None:
            return {}
        try:
            return self.extras(revision)
        except Exception:  # an extra section: the page stands without it
            log.exception("revision_extras_failed", repo_id=revision.repo_id, sha=revision.sha)
            return {}

    def revision_lints(self, revision: Revision) -> list[dict[str, Any]] | None:
        """The structure verifier's findings on a revision (None without the tracker's verifier, for a revision
        without config.json, or when it fails: the page and the API stand without them)."""
        if self.verify is None:
            return None
        key = (revision.repo_id, revision.sha)
        with self._diff_lock:
            if key in self._lints:
                return self._lints[key]
        try:
            found = self.verify(revision)
        except Exception:  # an extra section: the page stands without it
            log.exception("revision_lints_failed", repo_id=revision.repo_id, sha=revision.sha)
            return None
        with self._diff_lock:  # a stored revision never changes: its findings are kept (the last 256 asked for)
            if len(self._lints) >= 256:
                self._lints.pop(next(iter(self._lints)))
            self._lints[key] = found
        return found

    def dataset_table(self, a: Revision | None, b: Revision) -> dict[str, Any] | None:
        """The dataset table of b against a (None: against b's parent), made from the stored summaries by the
        tracker's reader; None for a model, without the reader, or when it cannot be made (the page says so)."""
        if self.tables is None or not b.repo_id.startswith("datasets/"):
            return None
        key = (b.repo_id, a.sha if a is not None else None, b.sha)
        with self._diff_lock:
            if key in self._tables:
                return self._tables[key]
        try:
            found = self.tables(a, b)
        except Exception:  # a section of its own: the page stands without it, saying it is not recorded
            log.exception("dataset_table_failed", repo_id=b.repo_id, sha=b.sha)
            return None
        with self._diff_lock:  # stored revisions never change: their tables are kept (the last 256 asked for)
            if len(self._tables) >= 256:
                self._tables.pop(next(iter(self._tables)))
            self._tables[key] = found
        return found

    def diff_revisions(self, a: Revision, b: Revision) -> list[dict[str, Any]] | None:
        """The changes from a to b, computed once per pair (revisions never change); None without a differ."""
        if self.diff is None:
            return None
        key = (a.repo_id, a.sha, b.sha)
        with self._diff_lock:
            hit = self._diffs.get(key)
        if hit is None:
            hit = self.diff(a, b)
            with self._diff_lock:
                if len(self._diffs) >= 64:
                    self._diffs.pop(next(iter(self._diffs)))
                self._diffs[key] = hit
        return hit


def create_app(
    store: Storage,
    *,
    options: ServerOptions | None = None,
    trigger: Trigger | None = None,
    subscriptions: Any = None,
    diff: DiffFn | None = None,
    storage_state: StorageStateFn | None = None,
    poll_state: PollStateFn | None = None,
    extras: ExtrasFn | None = None,
    verify: VerifyFn | None = None,
    tables: DatasetTableFn | None = None,
    reprice: RepriceFn | None = None,
) -> FastAPI:
    """The whole HTTP surface over one store. `trigger` starts an ingest (Hub webhooks answer 503
    without it); `diff` computes the diff of two revisions (compare answers 501 without it); `subscriptions`
    is the webhooks' SubscriptionStore (subscription routes answer 503 without it); `storage_state` is the
    poller's view of the database, reported on /healthz (absent without a poller); `poll_state` the
    scheduler's overdue polls, on /healthz and /metrics (absent without a scheduler); `extras` reads a revision's
    engine matrix and tokenizer check for its page (the sections are left out without it); `verify` gives a
    revision's structure verifier findings (the page's section and the API's `lints` are absent without it); `tables`
    a dataset revision's table against another or its parent (the compare page's and the API diff's `dataset`, and
    the revision page of a revision whose event carries none; said to be not recorded without it); `reprice` shows
    a stored estimate's dollars at today's card prices (the prices stored with it without it)."""
    queries = store.read_model
    services = Services(
        store=store,
        queries=queries,
        feeds=FeedBuilder(store, queries),
        options=options or ServerOptions(),
        metrics=metrics.Metrics(),
        trigger=trigger,
        subscriptions=subscriptions,
        diff=diff,
        storage_state=storage_state,
        poll_state=poll_state,
        extras=extras,
        osv=OsvDatabase(store),
        verify=verify,
        tables=tables,
        reprice=reprice,
    )
    app = FastAPI(
        title="hubwatch",
        summary="Change tracking for Hugging Face Hub repos: feeds, history and diffs.",
        version="1",
        openapi_url="/api/v1/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    app.state.services = services
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    app.add_exception_handler(StarletteHTTPException, http_failed)
    app.add_exception_handler(StoreLookupError, lookup_failed)
    app.add_exception_handler(StorageError, storage_failed)
    app.include_router(api.router)
    app.include_router(feed_router)
    app.include_router(hubhooks.router)
    app.include_router(metrics.router)
    app.include_router(pages.router)
    app.include_router(osv_api.router)
    app.add_middleware(metrics.MetricsMiddleware, metrics=services.metrics)
    app.add_middleware(DatasetPaths)  # `/repos/datasets/{org}/{name}...`: a dataset's, on the model routes
    # every body, chunked too; 413 as soon as it is over (the OSV API's batches have a limit of their own)
    app.add_middleware(BodyLimitMiddleware, prefixes={"/v1/": osv_api.MAX_OSV_BODY_BYTES})
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, made once, with security declared as this server's options enforce it."""
    if app.openapi_schema is None:
        reads_open = not app.state.services.options.read_token
        document = FastAPI.openapi(app)
        document.setdefault("components", {}).setdefault("schemas", {}).update(osv_api.osv_components())
        app.openapi_schema = declare_security(document, reads_open)
    return app.openapi_schema


async def http_failed(request: Request, err: Exception) -> Response:
    """FastAPI's answer to an HTTPException, except that a 405 lists in `Allow` every method its path
    serves: Starlette names only the methods of the first route whose path matched (GET, not the POST
    beside it on /api/v1/watches)."""
    assert isinstance(err, StarletteHTTPException)
    if isinstance(err, RepoRenamed):  # permanent: 301 keeps a feed reader's GET a GET; 308 keeps any other method
        status = 301 if request.method in ("GET", "HEAD") else 308
        err = StarletteHTTPException(status, err.detail, headers={"Location": err.location(request)})
    if err.status_code == 405:
        allow = ", ".join(m for m in HTTP_METHODS if _serves(request, m))
        err = StarletteHTTPException(405, err.detail, headers={**(err.headers or {}), "Allow": allow})
    return await http_exception_handler(request, err)


def _serves(request: Request, method: str) -> bool:
    """Whether a route of the app takes `method` on the request's path (asked of each route as routing would)."""
    scope = {**request.scope, "method": method}
    return any(route.matches(scope)[0] == Match.FULL for route in request.app.router.routes)


def lookup_status(err: Exception) -> int:
    """The status `LOOKUP_STATUS` gives the error's class or its nearest base."""
    for cls in type(err).__mro__:
        if cls in LOOKUP_STATUS:
            return LOOKUP_STATUS[cls]
    raise TypeError(f"no HTTP status for {type(err).__name__}") from err


def lookup_failed(request: Request, err: Exception) -> Response:
    """The handler of `StoreLookupError`: the error page on HTML pages, else `{"detail": message}` as an
    HTTPException answers."""
    status = lookup_status(err)
    if pages.is_page(request):
        return pages.error_page(status, str(err))
    return JSONResponse({"detail": str(err)}, status_code=status)


def storage_failed(request: Request, err: Exception) -> Response:
    """The handler of `StorageError` (storage's sentence names what is wrong, e.g. the missing table):
    503 with the error page on pages, else `{"detail": message}`; one log line, no traceback."""
    log.error("http_storage_failed", path=request.url.path, error=str(err))
    if pages.is_page(request):
        return pages.error_page(503, str(err))
    return JSONResponse({"detail": str(err)}, status_code=503)


# -- feeds ---------------------------------------------------------------------------------------

feed_router = APIRouter(tags=["feeds"], dependencies=[Depends(require_read)])
_FEED_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/atom+xml": {"schema": {"type": "string"}}, "application/rss+xml": {"schema": {"type": "string"}}},
          "description": "The feed document"},
    304: {"description": "Not modified since the ETag or date the client holds"},
    401: {"description": "This server's feeds need a token"},
    404: {"description": "No such repo or org"},
}


@dataclass(frozen=True)
class FeedQuery:
    kinds: tuple[str, ...]
    min_severity: str | None
    limit: int
    token: str | None


def feed_query(
    kind: Annotated[
        list[Kind] | None,
        Query(description="Only events of these kinds: change kinds (chat_template) or event kinds (revision.ingested)"),
    ] = None,
    min_severity: Annotated[Severity | None, Query(description="Only events at least this severe")] = None,
    limit: int = Query(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description="Newest entries shown"),
    token: str | None = Query(default=None, include_in_schema=False),
) -> FeedQuery:
    return FeedQuery(tuple(kind or ()), min_severity.value if min_severity else None, limit, token)


FeedQueryDep = Annotated[FeedQuery, Depends(feed_query)]


def _not_modified(request: Request, etag: str, last_modified: datetime | None) -> bool:
    """RFC 9110: If-None-Match wins; If-Modified-Since only when it is absent."""
    inm = request.headers.get("if-none-match")
    if inm is not None:
        tags = [t.strip().removeprefix("W/") for t in inm.split(",")]
        return "*" in tags or etag in tags
    ims = request.headers.get("if-modified-since")
    if ims and last_modified is not None:
        try:
            since = email.utils.parsedate_to_datetime(ims)
        except (TypeError, ValueError):
            return False
        if since.tzinfo is None:
            return False
        return last_modified.replace(microsecond=0) <= since
    return False


def serve_feed(request: Request, req: FeedRequest) -> Response:
    services: Services = request.app.state.services
    state = services.feeds.state(req)
    base = base_url(request)
    etag = services.feeds.etag(req, state, base)
    visibility = "private" if services.options.read_token else "public"
    headers = {
        "ETag": etag,
        "Cache-Control": f"{visibility}, max-age={services.options.feed_max_age_s}",
        "Vary": "Authorization",
    }
    if state.last_created_at is not None:
        headers["Last-Modified"] = http_date(state.last_created_at)
    if _not_modified(request, etag, state.last_created_at):
        services.metrics.count("feed_responses", "not_modified")
        return Response(status_code=304, headers=headers)
    rendered = services.feeds.build(req, base, state)
    services.metrics.count("feed_responses", "rendered")
    return Response(rendered.body, media_type=f"{rendered.media_type}; charset=utf-8", headers=headers)


def _feed(request: Request, scope: str, fmt: str, key: str | None, q: FeedQuery) -> Response:
    return serve_feed(request, FeedRequest(scope, fmt, key, q.kinds, q.min_severity, q.limit, q.token))


for _fmt in ("atom", "rss"):

    def _make(fmt: str) -> None:
        @feed_router.get(f"/repos/{{org}}/{{name}}/feed.{fmt}", responses=_FEED_RESPONSES, response_class=Response,
                         summary=f"One repo's events ({fmt})", operation_id=f"repo_feed_{fmt}")
        def repo_feed(request: Request, q: FeedQueryDep, org: str = OrgPath, name: str = NamePath) -> Response:
            repo_id = known_repo(request.app.state.services.queries, org, name, request)
            return _feed(request, "repo", fmt, repo_id, q)

        @feed_router.get(f"/orgs/{{org}}/feed.{fmt}", responses=_FEED_RESPONSES, response_class=Response,
                         summary=f"Every watched repo of one org or user ({fmt})", operation_id=f"org_feed_{fmt}")
        def org_feed(request: Request, q: FeedQueryDep, org: str = OrgPath) -> Response:
            if not request.app.state.services.queries.org_known(org):
                raise HTTPException(404, f"no watched repo or stored history under {org}/")
            return _feed(request, "org", fmt, org, q)

        @feed_router.get(f"/feeds/all.{fmt}", responses=_FEED_RESPONSES, response_class=Response,
                         summary=f"Every watched repo ({fmt})", operation_id=f"all_feed_{fmt}")
        def all_feed(request: Request, q: FeedQueryDep) -> Response:
            return _feed(request, "all", fmt, None, q)

        @feed_router.get(f"/feeds/security.{fmt}", responses=_FEED_RESPONSES, response_class=Response,
                         summary=f"Security-relevant events of every repo ({fmt})", operation_id=f"security_feed_{fmt}")
        def security_feed(request: Request, q: FeedQueryDep) -> Response:
            return _feed(request, "security", fmt, None, q)

    _make(_fmt)


# -- running it ----------------------------------------------------------------------------------


class ServerThread:
    """uvicorn in a background thread on a socket bound here (port 0 picks a free one): connections
    made right after `start()` wait in the listen backlog, so nobody has to wait for readiness."""

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # so asyncio sets TCP_NODELAY
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.socket.bind((host, port))
        except OSError:
            self.socket.close()
            raise
        self.socket.listen(2048)
        self.host = host
        self.port = int(self.socket.getsockname()[1])
        self.app = app
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off", timeout_graceful_shutdown=10)
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, name="http", daemon=True)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> Self:
        self._thread.start()
        log.info("http_server_started", host=self.host, port=self.port, url=self.url)
        return self

    def warm_feeds(self, limit: int = 1000, piece: int = WARM_PIECE, pause: Callable[[float], object] = time.sleep) -> int:
        """Render the newest events' feed entries now rather than on a reader's request, `piece` entries at
        a time with a short pause between pieces: a warm-up (at start, in its own thread) never holds the
        interpreter or the database for longer than one piece, so requests go on meanwhile. Stops at the
        first piece with nothing left to make (after a poll only the new events' entries are missing).
        Returns how many entries were made."""
        feeds = self.app.state.services.feeds
        made = 0
        depth = 0
        while depth < limit:
            depth = min(limit, depth + piece)
            new = feeds.warm(depth)
            made += new
            if new == 0:
                break
            pause(WARM_PAUSE_S)
        return made

    def stop(self) -> None:
        """Stop accepting, let requests in flight finish, join the thread."""
        self.server.should_exit = True
        self._thread.join(timeout=30)
        self.socket.close()
        log.info("http_server_stopped")

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
