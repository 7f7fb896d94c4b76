"""Scale: the queries behind feeds, the history page, the repo list, metrics and ingest read through
indexes (checked with the database's own EXPLAIN, on SQLite and on PostgreSQL), and the per-repo
summaries kept on write stay equal to what the history says, also after migrating an old database."""

from __future__ import annotations

import hashlib
import itertools
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from fastapi.testclient import TestClient

from feeds.http.app import create_app
from feeds.views.feed import FeedBuilder, FeedRequest
from storage.db import alembic_config, create_db_engine, migrate
from storage.event_log import NewEvent
from storage.front import Storage
from storage.history import NewChange, NewFile, NewRevision
from storage.models import ChangeRecord, Event, RepoSummaryRow, Revision
from storage.read_model import EventFilter, ReadModel, RevisionFilter

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
HISTORY_TABLES = ("event", "revision", "change")


def _revision(repo_id: str, n: int, *, committed_at: datetime | None = None, security: bool = False, changes: int = 2) -> NewRevision:
    sha = hashlib.sha1(f"{repo_id}:{n}".encode()).hexdigest()
    return NewRevision(
        repo_id=repo_id, sha=sha, parent_sha=None, branch="main", committed_at=committed_at or T0 + timedelta(hours=n),
        title=f"commit {n}", message="", authors=["someone"], is_baseline=n == 0,
        files=[NewFile(path="config.json", oid=f"{n:040x}", size=2, kind="config")], blobs={}, weight_files=[],
        changes=[NewChange(kind="config", path=f"k{i}", summary="changed", severity="notice", security=security and i == 0)
                 for i in range(changes)],
        events=[NewEvent(event_id=f"ev-{sha}", kind="revision.ingested", title=f"{repo_id} commit {n}",
                         severity="warning" if security else "info", security=security)],
    )


@pytest.fixture
def store(database_url: str) -> Iterator[Storage]:
    engine = create_db_engine(database_url)
    migrate(engine)
    ticks = itertools.count()  # next() on a count is atomic: writer threads share this clock
    yield Storage(engine, clock=lambda: T0 + timedelta(minutes=next(ticks)))
    engine.dispose()


def _grow(store: Storage, repos: int = 4, per_repo: int = 6) -> None:
    """A small history: several repos, some security-relevant revisions, an event without a revision."""
    for n in range(per_repo):
        for r in range(repos):
            store.history.save_revision(_revision(f"org{r % 2}/model{r}", n, security=(n + r) % 3 == 0))
    store.history.add_event("org0/model0", NewEvent(event_id="made-private", kind="repo.private", title="private", severity="notice"))


# -- EXPLAIN -------------------------------------------------------------------------------------


@contextmanager
def _captured(engine: sa.Engine) -> Iterator[list[tuple[str, Any]]]:
    """Every statement the engine runs in the block, with its parameters, as the driver got it."""
    seen: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, executemany: bool) -> None:
        if not executemany:
            seen.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)


def _plan(engine: sa.Engine, statement: str, parameters: Any) -> list[str]:
    """The database's plan of one statement. On PostgreSQL the planner is told to avoid sequential and
    bitmap scans wherever it can: a tiny test table would otherwise be scanned whatever its indexes, so
    a sequential scan left in the plan is one no index can serve."""
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            return [row[3] for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)]
        for setting in ("enable_seqscan", "enable_bitmapscan"):
            conn.exec_driver_sql(f"SET LOCAL {setting} = off")
        lines = [row[0] for row in conn.exec_driver_sql("EXPLAIN " + statement, parameters)]
        conn.rollback()
        return lines


def _full_scans(engine: sa.Engine, plan: list[str], tables: tuple[str, ...] = HISTORY_TABLES) -> list[str]:
    """Plan nodes that read a whole history table (or walk a whole index of one) rather than look rows up."""
    names = "|".join(tables)
    if engine.dialect.name == "sqlite":
        pattern = re.compile(rf"^SCAN ({names})\b")
        return [line for line in plan if pattern.search(line)]
    nodes: list[list[str]] = []  # PostgreSQL: a node is its "->" line and the detail lines under it
    for line in plan:
        if "->" in line or not nodes:
            nodes.append([line])
        else:
            nodes[-1].append(line)
    scan = re.compile(rf"(Seq Scan|Index Scan|Index Only Scan)( Backward)?( using \w+)? on ({names})\b")
    return [node[0] for node in nodes if scan.search(node[0]) and not any("Index Cond:" in line for line in node)]


def _sorts(engine: sa.Engine, plan: list[str]) -> list[str]:
    """Plan lines that sort rows (an ORDER BY no index provides: every matching row is read first)."""
    word = "USE TEMP B-TREE" if engine.dialect.name == "sqlite" else "Sort"
    return [line for line in plan if word in line]


def _plans(store: Storage, call: Callable[[], Any], *, kinds: tuple[str, ...] = ("SELECT",)) -> list[tuple[str, list[str]]]:
    with _captured(store.engine) as seen:
        call()
    out = [(stmt, _plan(store.engine, stmt, params)) for stmt, params in seen if stmt.lstrip().upper().startswith(kinds)]
    assert out, "the call ran no statement to explain"
    return out


def _uses(plan: list[str], index: str) -> bool:
    return any(index in line for line in plan)


@pytest.mark.parametrize(
    ("request_", "index"),
    [
        (FeedRequest("all"), "event_pkey|PRIMARY|SCAN event"),
        (FeedRequest("security"), "ix_event_security_seq"),
        (FeedRequest("repo", key="org1/model1"), "ix_event_repo_seq"),
        (FeedRequest("security", "rss", limit=5), "ix_event_security_seq"),
    ],
)
def test_feed_state_walks_an_index_in_seq_order(store: Storage, request_: FeedRequest, index: str) -> None:
    """A feed's state (what a 304 is answered from) is read through an index that gives the newest
    events first: no sort of the matching events, no scan of the event table beyond the feed's length."""
    _grow(store)
    builder = FeedBuilder(store)
    ((statement, plan),) = _plans(store, lambda: builder.state(request_))
    assert "LIMIT" in statement.upper()
    assert not _sorts(store.engine, plan), plan
    assert any(re.search(index, line) for line in plan), plan
    if request_.scope != "all":  # the all-feed reads the primary key backwards and stops at LIMIT
        assert not _full_scans(store.engine, plan), plan


def test_feed_state_holds_the_feeds_newest_events(store: Storage) -> None:
    """The state names exactly the events a feed shows, newest first, with the newest one's time."""
    _grow(store)
    queries = store.read_model
    for flt in (EventFilter(), EventFilter(security_only=True), EventFilter(repo_id="org1/model3")):
        newest = queries.events(flt, 5)
        state = queries.state(flt, 5)
        assert [h.seq for h in state.heads] == [e.seq for e in newest]
        assert state.last_created_at == newest[0].created_at
    assert queries.state(EventFilter(repo_id="nobody/nothing"), 5).heads == ()


def test_a_late_commit_below_the_newest_changes_the_etag(store: Storage) -> None:
    """An event committed after a newer one (a lower seq, as concurrent writers on PostgreSQL can make)
    changes the feed's validator though the newest event stays the same."""
    _grow(store)
    builder = FeedBuilder(store)
    req = FeedRequest("all")
    last = builder.state(req).last_seq
    assert last is not None
    with store.engine.begin() as conn:  # a newer event first, then one with the seq skipped before it
        row = {"repo_id": "org0/model0", "title": "t", "severity": "info", "security": False, "created_at": T0, "payload": {}}
        conn.execute(sa.insert(Event), [{**row, "seq": last + 2, "event_id": "late-2", "kind": "repo.private"}])
    before = builder.state(req)
    with store.engine.begin() as conn:
        conn.execute(sa.insert(Event), [{**row, "seq": last + 1, "event_id": "late-1", "kind": "repo.private"}])
    after = builder.state(req)
    assert before.last_seq == after.last_seq == last + 2
    assert builder.etag(req, before, "http://x") != builder.etag(req, after, "http://x")


def test_feed_etag_changes_only_with_the_feeds_own_events(store: Storage) -> None:
    """A repo feed's validator stays when another repo gains an event, and changes when its repo does;
    a 304 over HTTP follows it."""
    _grow(store)
    client = TestClient(create_app(store))
    first = client.get("/repos/org1/model1/feed.atom")
    assert first.status_code == 200
    etag = first.headers["etag"]
    store.history.save_revision(_revision("org0/model0", 50))
    assert client.get("/repos/org1/model1/feed.atom", headers={"If-None-Match": etag}).status_code == 304
    store.history.save_revision(_revision("org1/model1", 50))
    again = client.get("/repos/org1/model1/feed.atom", headers={"If-None-Match": etag})
    assert again.status_code == 200 and again.headers["etag"] != etag


def test_history_page_queries_use_the_repo_index(store: Storage) -> None:
    """A repo's history page (its timeline, counts and watches) looks its rows up by repo, newest first
    from the index: no scan of the history tables, no sort of the repo's revisions."""
    _grow(store)
    store.watches.add_watch("org1/model1", "main", 900)
    queries = store.read_model

    def page() -> None:
        queries.timeline("org1/model1", RevisionFilter(), 30, 0)
        queries.count_revisions("org1/model1")
        store.watches.repo_watches("org1/model1")
        store.history.list_revisions("org1/model1", limit=30)

    plans = _plans(store, page)
    for statement, plan in plans:
        assert not _full_scans(store.engine, plan, (*HISTORY_TABLES, "watch")), (statement, plan)
        if "revision" in statement and "ORDER BY" in statement.upper():
            assert not _sorts(store.engine, plan), (statement, plan)
    assert any(_uses(plan, "ix_revision_repo_committed") for _, plan in plans)


def test_repo_list_and_metrics_read_no_history_table(store: Storage) -> None:
    """`/api/v1/repos`, the home page's repo list and the metrics totals read the summaries (one row per
    repo) and the primary key's end, never a whole revision, change or event table."""
    _grow(store)
    queries = store.read_model
    plans = _plans(store, queries.repos) + _plans(store, queries.counts)
    for statement, plan in plans:
        assert not _full_scans(store.engine, plan), (statement, plan)
    repo_statements = [s for s, _ in _plans(store, queries.repos)]
    assert not any(re.search(r"\b(revision|change|event)\b", s) for s in repo_statements), repo_statements


def test_ingest_lookups_use_indexes(store: Storage) -> None:
    """Writing a revision (and the lookups around it: is it stored, its events) reads nothing of the
    history beyond index lookups, however long the history is."""
    _grow(store)
    queries = store.read_model
    stored = store.history.list_revisions("org0/model0", limit=1)[0]
    plans = _plans(store, lambda: store.history.save_revision(_revision("org0/model0", 99)), kinds=("SELECT", "INSERT", "UPDATE", "DELETE"))
    plans += _plans(store, lambda: store.history.has_revision("org0/model0", stored.sha))
    events_plan = _plans(store, lambda: queries.events_for_revision(stored.id))  # type: ignore[arg-type]
    for statement, plan in plans + events_plan:
        assert not _full_scans(store.engine, plan), (statement, plan)
    assert any(_uses(plan, "ix_event_revision_id") for _, plan in events_plan), events_plan


# -- summaries -------------------------------------------------------------------------------------


def _recomputed(engine: sa.Engine) -> dict[str, tuple[int, int, int, str | None]]:
    """What each repo's summary should say, counted from the history tables themselves."""
    with engine.connect() as conn:
        revisions = dict(conn.execute(sa.select(Revision.repo_id, sa.func.count()).group_by(Revision.repo_id)).all())
        changes = dict(conn.execute(
            sa.select(Revision.repo_id, sa.func.count())
            .join(ChangeRecord, ChangeRecord.revision_id == Revision.id)  # type: ignore[arg-type]
            .group_by(Revision.repo_id)
        ).all())
        events = dict(conn.execute(sa.select(Event.repo_id, sa.func.count()).group_by(Event.repo_id)).all())
        newest = {}
        for repo_id in revisions:
            query = (sa.select(Revision.sha).where(Revision.repo_id == repo_id)
                     .order_by(Revision.committed_at.desc(), Revision.id.desc()).limit(1))  # type: ignore[attr-defined]
            newest[repo_id] = conn.execute(query).scalar_one()
    return {r: (revisions.get(r, 0), changes.get(r, 0), events.get(r, 0), newest.get(r)) for r in set(revisions) | set(events)}


def _summaries(engine: sa.Engine) -> dict[str, tuple[int, int, int, str | None]]:
    with engine.connect() as conn:
        rows = conn.execute(sa.select(RepoSummaryRow.repo_id, RepoSummaryRow.revisions, RepoSummaryRow.changes,
                                      RepoSummaryRow.events, RepoSummaryRow.latest_sha)).all()
    return {r[0]: (r[1], r[2], r[3], r[4]) for r in rows}


def test_summaries_follow_ingest_in_any_commit_order(store: Storage) -> None:
    """Counts and the newest revision stay equal to the history's own, whatever order commits arrive in
    (an older commit ingested late is not the newest), with events of no revision counted too."""
    _grow(store, repos=3, per_repo=3)
    store.history.save_revision(_revision("org0/model0", 7, committed_at=T0 - timedelta(days=3)))  # older than every other
    store.history.save_revision(_revision("org1/model1", 8, committed_at=T0 + timedelta(hours=2)))  # ties commit 2's time
    store.history.add_event("late/only-events", NewEvent(event_id="gated", kind="repo.gated", title="g", severity="notice"))
    assert not store.history.add_event("late/only-events", NewEvent(event_id="gated", kind="repo.gated", title="g", severity="notice"))
    watch = store.watches.add_watch("org2/model2", "main", 900)
    store.watches.record_poll_ok(watch.id, events=[NewEvent(event_id="poll-ev", kind="repo.public", title="p", severity="info")])  # type: ignore[arg-type]
    expected = _recomputed(store.engine)
    assert _summaries(store.engine) == expected
    assert store.history.repo_ids() == sorted(r for r, (revisions, *_) in expected.items() if revisions)  # not the events-only repo
    assert expected["org0/model0"][3] != _revision("org0/model0", 7).sha
    assert expected["org1/model1"][3] == _revision("org1/model1", 8).sha  # equal time: the later stored wins, as listed


def test_concurrent_writers_of_one_repo_lose_no_count(store: Storage) -> None:
    """Writers in several threads adding revisions and events to one repo at once: every count arrives
    (the summary is updated by the database, not read, changed and written back)."""
    def write(worker: int) -> None:
        for n in range(8):
            store.history.save_revision(_revision("busy/repo", worker * 100 + n))
            store.history.add_event("busy/repo", NewEvent(event_id=f"side-{worker}-{n}", kind="repo.gated", title="g", severity="info"))

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert _summaries(store.engine)["busy/repo"] == _recomputed(store.engine)["busy/repo"]
    assert _summaries(store.engine)["busy/repo"][:3] == (32, 64, 64)


def test_a_revision_stored_twice_is_counted_once(store: Storage) -> None:
    """When a racing writer stored the same commit first, the loser's transaction adds nothing to the summary."""
    store.history.save_revision(_revision("org/model", 1))
    assert store.history.save_revision(_revision("org/model", 1)) is None
    assert _summaries(store.engine)["org/model"][:3] == (1, 2, 1)


def test_repo_list_and_metrics_follow_watches_and_history(store: Storage) -> None:
    """The repo list shows history and watches (a removed watch leaves the history listed, a watched
    repo without history is listed with none); the metrics totals count what the tables hold."""
    _grow(store, repos=2, per_repo=2)
    store.watches.add_watch("org0/model0", "main", 900)
    store.watches.add_watch("new/unpolled", "main", 900)
    client = TestClient(create_app(store))
    repos = {r["repo_id"]: r for r in client.get("/api/v1/repos").json()}
    assert repos["org0/model0"]["watched"] and repos["org0/model0"]["revisions"] == 2
    assert repos["new/unpolled"] == {"repo_id": "new/unpolled", "revisions": 0, "last_committed_at": None, "watched": True}
    assert "late" not in repos
    store.watches.remove_watch("org0/model0")
    store.watches.remove_watch("new/unpolled")
    repos = {r["repo_id"]: r for r in client.get("/api/v1/repos").json()}
    assert set(repos) == {"org0/model0", "org1/model1"} and not repos["org0/model0"]["watched"]
    metrics = client.get("/metrics").text
    with store.engine.connect() as conn:
        for name, table in (("revisions", "revision"), ("changes", "change"), ("events", "event")):
            stored = conn.exec_driver_sql(f"SELECT COUNT(*) FROM {table}").scalar_one()
            assert f"hubwatch_{name} {stored}\n" in metrics


def test_migrating_an_old_database_backfills_the_summaries(empty_database_url: str) -> None:
    """A database written before summaries existed gets them from its history when migrated, and the
    repo list says what it said before."""
    engine = create_db_engine(empty_database_url)
    cfg = alembic_config(engine)
    command.upgrade(cfg, "0005")
    command.upgrade(cfg, "0011")
    old = Storage(engine, clock=lambda: T0)
    with engine.begin() as conn:  # rows as the code before 0012 wrote them: no summary
        for r, n in [(0, 0), (0, 1), (0, 2), (1, 0), (2, 3)]:
            new = _revision(f"old/model{r}", n, committed_at=T0 - timedelta(hours=n) if r == 2 else None)
            rid = conn.execute(sa.insert(Revision).values(
                repo_id=new.repo_id, sha=new.sha, branch="main", committed_at=new.committed_at, title=new.title,
                message="", authors=[], ingested_at=T0 + timedelta(minutes=n), is_baseline=False, file_count=1,
            ).returning(Revision.id)).scalar_one()  # type: ignore[attr-defined]
            conn.execute(sa.insert(ChangeRecord), [{"revision_id": rid, "ordinal": i, "kind": c.kind, "path": c.path, "summary": c.summary,
                                                    "severity": c.severity, "structural": False, "security": False, "detail": {}}
                                                   for i, c in enumerate(new.changes)])
            conn.execute(sa.insert(Event).values(event_id=f"ev-{new.sha}", kind="revision.ingested", repo_id=new.repo_id, revision_id=rid,
                                                 sha=new.sha, title="t", severity="info", security=False, created_at=T0, payload={}))
        conn.execute(sa.insert(Event).values(event_id="orphan", kind="repo.private", repo_id="old/eventsonly", title="t",
                                             severity="info", security=False, created_at=T0, payload={}))
    expected = _recomputed(engine)
    migrate(engine)
    assert _summaries(engine) == expected
    assert expected["old/eventsonly"] == (0, 0, 1, None) and expected["old/model0"][:3] == (3, 6, 3)
    repos = ReadModel(engine).repos()
    assert [(r.repo_id, r.revisions) for r in repos] == [("old/model0", 3), ("old/model1", 1), ("old/model2", 1)]
    assert repos[0].last_committed_at == T0 + timedelta(hours=2) and repos[2].last_committed_at == T0 - timedelta(hours=3)
    old.history.save_revision(_revision("old/model1", 5))  # writes after the migration keep adding to the back-filled rows
    assert _summaries(engine) == _recomputed(engine)
    engine.dispose()
