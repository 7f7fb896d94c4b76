"""Figures (issue 15): a request or an ingest write costs the same at 10k, 100k and 1M revisions.

The history: 10,000 repos, each watched, with revisions spread over them round-robin; every revision
has one file, one change and one event, every tenth one security-relevant. It is grown by bulk inserts
into the storage layer's own tables (the models' tables, executemany; no network, no pipeline, which
would take hours for a million commits) and summarised by migration 0012's back-fill, the SQL an
upgraded database runs; the measured ingest writes go through `HistoryStore.save_revision`, as the daemon's do.

At each size it prints medians of: the all-feed's and the security feed's state as the storage reads it,
the same feeds answering a conditional GET with 304 (goal: under 5 ms and flat), the HTTP floor (what
`/healthz` costs through the test client), a repo's history page (`/repos/{org}/{name}`), `/api/v1/repos`, the
home page `/`, `/metrics` (all through the ASGI app in process, fastapi's TestClient) and one ingest
write, each with its ratio against the smallest size; and the storage reads behind them (feed state,
the repo list, the metrics totals) beside the baseline: the queries hubwatch ran before on the same
database (feed state as max + count over the feed's events, the repo list grouped over every
revision, totals counted over whole tables), with the ratio of before to now.
`/api/v1/repos` and `/` list all 10,000 repos and watches at every size: their cost is their output's.

Figures: each at the largest size, and its ratio to the same at a tenth of that size (flat: about 1).
Run: python -m benchmarks run scale                  10k and 100k revisions: about 3 minutes
     python -m benchmarks run scale --size 1000000   100k and 1M: about 10 minutes more, 1.5 GB of disk
(timed on a 2-core machine shared with other work; --size 5000 gives a quick look at 500 and 5,000).
"""

from __future__ import annotations

import hashlib
import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, func, select

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fastapi.testclient import TestClient

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from feeds.http.app import create_app
from feeds.views.feed import FeedRequest
from storage.db import create_db_engine, migrate
from storage.event_log import NewEvent
from storage.front import Storage
from storage.history import NewChange, NewFile, NewRevision
from storage.models import ChangeRecord, Event, Revision, RevisionFile, Watch
from storage.read_model import RepoSummary

REPOS = 10_000
SIZES = (10_000, 100_000)
T0 = datetime(2024, 1, 1, tzinfo=UTC)
CHUNK = 20_000
GOAL_304_MS = 5.0
MEASURES = ("all-feed state", "security state", "repo list query", "metrics counts", "all-feed 304", "security feed 304",
            "HTTP floor", "history page", "/api/v1/repos", "/ (home)", "/metrics", "ingest write")
OLD_QUERIES = ("all-feed state", "security state", "repo list query", "metrics counts")


def _figures() -> tuple[Figure, ...]:
    out = []
    for name in MEASURES:
        goal = GOAL_304_MS if name.endswith("304") else None
        out.append(Figure(f"{name}, at the largest size", "ms", goal=goal, margin=0.5 if goal else 0.0))
        out.append(Figure(f"{name}, largest / a tenth of the size", "ratio", note="flat: about 1"))
    out += [Figure(f"{name}: the query before issue 15 / now, at the largest size", "ratio", direction="higher",
                   note="before: storage/event_queries.py at edb6768, on the same database") for name in OLD_QUERIES]
    return tuple(out)


BENCHMARK = Benchmark(
    name="scale",
    about="A request or an ingest write costs the same at 10k and 100k revisions (10,000 repos, storage grown in bulk)",
    tags=("slow", "storage"),
    size="revisions at the largest size (default 100,000; also measured at a tenth of it)",
    small=5000,
    timeout_s=1800,
    figures=_figures(),
)
MIGRATION = Path(__file__).resolve().parent.parent / "storage/migrations/versions/0012_scale_indexes.py"


def repo_id(i: int) -> str:
    return f"org{i % 100:02d}/model-{i:05d}"


def sha(n: int) -> str:
    return hashlib.sha1(str(n).encode()).hexdigest()


def _backfill_sql() -> str:
    spec = importlib.util.spec_from_file_location("scale_migration", MIGRATION)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module._BACKFILL)


def grow(engine: sa.Engine, start: int, stop: int) -> None:
    """Revisions start..stop-1 (ids and event seqs n+1), each with a file, a change and an event; then
    every repo's summary recomputed by the migration's back-fill."""
    for lo in range(start, stop, CHUNK):
        ns = range(lo, min(lo + CHUNK, stop))
        revisions, files, changes, events = [], [], [], []
        for n in ns:
            rid, repo, at, security = n + 1, repo_id(n % REPOS), T0 + timedelta(seconds=n), n % 10 == 0
            revisions.append({"id": rid, "repo_id": repo, "sha": sha(n), "parent_sha": None, "branch": "main", "committed_at": at,
                              "title": f"Update config.json ({n})", "message": "", "authors": ["bench"], "ingested_at": at,
                              "is_baseline": n < REPOS, "file_count": 1})
            files.append({"revision_id": rid, "path": "config.json", "oid": sha(-n), "size": 100, "kind": "config", "held": False})
            changes.append({"id": rid, "revision_id": rid, "ordinal": 0, "kind": "custom_code" if security else "config",
                            "path": "config.json", "summary": "changed", "severity": "critical" if security else "notice",
                            "structural": False, "security": security, "detail": {}})
            events.append({"seq": rid, "event_id": f"ev-{n}", "kind": "revision.ingested", "repo_id": repo, "revision_id": rid,
                           "sha": sha(n), "title": f"{repo}: Update config.json ({n})", "severity": "critical" if security else "notice",
                           "security": security, "created_at": at, "payload": {"kinds": ["config"]}})
        with engine.begin() as conn:
            for model, rows in ((Revision, revisions), (RevisionFile, files), (ChangeRecord, changes), (Event, events)):
                conn.execute(sa.insert(model), rows)
    with engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM repo_summary")
        conn.exec_driver_sql(_backfill_sql())


def median_ms(fn: Callable[[], Any], runs: int) -> float:
    fn()  # warm: caches, the first compile of each statement
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure_at(store: Storage, client: TestClient, size: int) -> dict[str, float]:
    out: dict[str, float] = {}
    feeds = client.app.state.services.feeds  # type: ignore[attr-defined]
    for name, scope in (("all-feed state", "all"), ("security state", "security")):
        out[name] = median_ms(lambda scope=scope: feeds.state(FeedRequest(scope)), 50)
    queries = client.app.state.services.queries  # type: ignore[attr-defined]
    out["repo list query"] = median_ms(queries.repos, 5)
    out["metrics counts"] = median_ms(queries.counts, 20)
    for name, path in (("all-feed 304", "/feeds/all.atom"), ("security feed 304", "/feeds/security.atom")):
        etag = client.get(path).headers["etag"]

        def not_modified(path: str = path, etag: str = etag) -> None:
            response = client.get(path, headers={"If-None-Match": etag})
            assert response.status_code == 304, response.status_code

        out[name] = median_ms(not_modified, 50)
    busy = repo_id(7)

    def get(path: str) -> Callable[[], None]:
        def call() -> None:
            response = client.get(path)
            assert response.status_code == 200, (path, response.status_code)
        return call

    out["HTTP floor"] = median_ms(get("/healthz"), 50)  # what any request costs through TestClient
    out["history page"] = median_ms(get(f"/repos/{busy}"), 20)
    out["/api/v1/repos"] = median_ms(get("/api/v1/repos"), 5)
    out["/ (home)"] = median_ms(get("/"), 5)
    out["/metrics"] = median_ms(get("/metrics"), 20)
    serial = iter(range(10**9))

    def ingest() -> None:
        n = size * 10 + next(serial)
        store.history.save_revision(NewRevision(
            repo_id=repo_id(n % REPOS), sha=sha(n), parent_sha=None, branch="main", committed_at=T0 + timedelta(seconds=n),
            title="Update config.json", message="", authors=["bench"], is_baseline=False,
            files=[NewFile("config.json", sha(-n), 100, "config")], blobs={}, weight_files=[],
            changes=[NewChange("config", "config.json", "changed", "notice")],
            events=[NewEvent(f"bench-{n}", "revision.ingested", "Update config.json", "notice")],
        ))

    out["ingest write"] = median_ms(ingest, 30)
    return out


# The baseline: the code hubwatch ran before issue 15 (storage/event_queries.py at edb6768), on the same
# database; the security filter reads the table as it had to before its index existed (SQLite only).
def _old_state(engine: sa.Engine, security: bool) -> None:
    query = select(func.max(Event.seq), func.count(col(Event.seq)), func.max(Event.created_at))
    if security:
        query = query.where(sa.text("+event.security IS 1"))  # unary +: SQLite uses no index for the term
    with Session(engine, expire_on_commit=False) as s:
        last_seq, _count, _ = s.exec(query).one()
        if last_seq is not None:
            s.exec(select(Event.created_at).where(Event.seq == last_seq)).one()


def _old_repos(engine: sa.Engine) -> None:
    with Session(engine, expire_on_commit=False) as s:
        rows = s.exec(
            select(Revision.repo_id, func.count(col(Revision.id)), func.max(Revision.committed_at)).group_by(Revision.repo_id)
        ).all()
        watched = set(s.exec(select(Watch.repo_id).distinct()))
    history = {repo_id: (int(n), last) for repo_id, n, last in rows}
    out = []
    for repo_id in sorted(set(history) | watched):
        n, last = history.get(repo_id, (0, None))
        if isinstance(last, str):
            last = datetime.fromisoformat(last)
        if last is not None and last.tzinfo is None:
            last = last.replace(tzinfo=UTC)
        out.append(RepoSummary(repo_id, n, last, repo_id in watched))


def _old_counts(engine: sa.Engine) -> None:
    with Session(engine, expire_on_commit=False) as s:
        for query in (select(func.count(col(Watch.id))), select(func.count(col(Watch.id))).where(col(Watch.error_count) > 0),
                      select(func.count(col(Revision.id))), select(func.count(col(ChangeRecord.id))),
                      select(func.count(col(Event.seq))), select(func.coalesce(func.max(Event.seq), 0))):
            s.exec(query).one()


BEFORE: dict[str, Callable[[sa.Engine], None]] = {
    "all-feed state": lambda engine: _old_state(engine, security=False),
    "security state": lambda engine: _old_state(engine, security=True),
    "repo list query": _old_repos,
    "metrics counts": _old_counts,
}


def before(engine: sa.Engine) -> dict[str, float]:
    return {name: median_ms(lambda fn=fn: fn(engine), 5) for name, fn in BEFORE.items()}


def measure(size: int | None = None) -> dict[str, float]:
    sizes = ((size // 10, size) if size else SIZES)
    results: dict[int, dict[str, float]] = {}
    baseline: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        engine = create_db_engine(f"sqlite:///{tmp}/scale.db")
        migrate(engine)
        with engine.begin() as conn:
            conn.execute(sa.insert(Watch), [{"repo_id": repo_id(i), "branch": "main", "interval_s": 900, "source": "config",
                                             "backfill": 0, "created_at": T0, "error_count": 0} for i in range(REPOS)])
        store = Storage(engine)
        client = TestClient(create_app(store))
        grown = 0
        for size_now in sizes:
            started = time.perf_counter()
            grow(engine, grown, size_now)
            grown = size_now
            detail(f"grew to {size_now:,} revisions over {REPOS:,} repos in {time.perf_counter() - started:.0f} s")
            results[size_now] = measure_at(store, client, size_now)
            baseline[size_now] = before(engine)
            grown += 31  # the measured writes (warm-up and 30) took the next ids
            for name, ms in results[size_now].items():
                detail(f"  {name:18} {ms:9.2f} ms at {size_now:,}")
        engine.dispose()
    small, large = sizes[0], sizes[-1]
    figures: dict[str, float] = {}
    for name in MEASURES:
        figures[f"{name}, at the largest size"] = results[large][name]
        figures[f"{name}, largest / a tenth of the size"] = results[large][name] / results[small][name]
    for name in OLD_QUERIES:
        figures[f"{name}: the query before issue 15 / now, at the largest size"] = baseline[large][name] / results[large][name]
    return figures


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
