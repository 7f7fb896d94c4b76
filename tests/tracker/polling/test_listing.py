"""Change detection by listing (tracker/polling/listing.py) against the replay server's /api/models, with the
real huggingface_hub client: what moved is polled, what did not costs nothing, faults are absorbed."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from sqlmodel import select

from storage.listing_state import ALL_MODELS, ListingStore, author_scope
from storage.models import Event, Revision
from tests.support.settings import settings_for
from tests.support.waiting import read_stderr_until
from tracker.cli.app import App
from tracker.polling.budget import RequestBudget
from tracker.polling.listing import ListingJob, ListingPass, follow_author
from tracker.standins.replay.control import ReplayServer
from tracker.standins.replay.history import synthetic_history

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

REPOS = [f"org{i % 3}/model-{i}" for i in range(12)]


@pytest.fixture
def hub() -> Iterator[ReplayServer]:
    """Twelve small repos of three authors, each with three commits, the first two shown; pages of 5."""
    with ReplayServer(roots=[]) as server:
        for repo_id in REPOS:
            server.add_repo(synthetic_history(repo_id, commits=3))
            server.set_head(repo_id, 2)
        server.list_page = 5
        yield server


@pytest.fixture
def app(hub: ReplayServer, database_url: str) -> Iterator[App]:
    app = App(settings_for(hub.endpoint, database_url))  # type: ignore[arg-type]
    for repo_id in REPOS:
        app.store.watches.add_watch(repo_id, "main", 900)
    yield app
    app.store.engine.dispose()


def listings(app: App) -> ListingStore:
    return app.store.listing


def make_pass(app: App) -> ListingPass:
    return ListingPass(listings(app), app.hub, app.clock)


def listing_requests(hub: ReplayServer) -> int:
    return sum(1 for r in hub.requests if r.path == "/api/models")


def revision_shas(app: App) -> list[tuple[str, str]]:
    with app.store.history.session() as s:
        return sorted((r.repo_id, r.sha) for r in s.exec(select(Revision)))


@pytest.fixture
def baselined(app: App, hub: ReplayServer) -> App:
    """Every watch polled once (its baseline), and a first listing pass that set the mark."""
    assert not any(o.failed for o in app.poller.poll())
    make_pass(app).run()
    hub.reset_requests()
    return app


def test_first_pass_reads_one_page_and_sets_the_mark(app: App, hub: ReplayServer) -> None:
    """With no mark, the listing of every model is read one page deep, and its newest entry becomes the mark."""
    assert not any(o.failed for o in app.poller.poll())
    hub.reset_requests()
    [scope] = ListingPass(listings(app), app.hub, first_entries=5).run()
    assert (scope.scope, scope.complete, scope.listed, scope.moved) == (ALL_MODELS, True, 5, [])
    assert listing_requests(hub) == 1
    state = listings(app).listing_state(ALL_MODELS)
    newest = max(hub.last_modified(r) for r in REPOS)
    assert state is not None and state.high_water_at == newest
    assert state.high_water_ids == [r for r in REPOS if hub.last_modified(r) == newest]


def test_nothing_moved_costs_one_request(baselined: App, hub: ReplayServer) -> None:
    """A pass over an unchanged Hub asks for one page, moves nothing and polls nothing."""
    [scope] = make_pass(baselined).run()
    assert scope.moved == [] and scope.complete
    assert hub.count_requests() == 1 and listing_requests(hub) == 1


def test_moved_repos_are_found_and_only_they_polled(baselined: App, hub: ReplayServer) -> None:
    """Repos that moved since the mark are listed back to it, across pages; polling them ingests each new commit once."""
    moved = REPOS[:7]
    for repo_id in moved:
        hub.advance(repo_id)
    [scope] = make_pass(baselined).run()
    assert sorted(scope.moved) == sorted((r, "main") for r in moved)
    assert scope.complete and listing_requests(hub) == 2  # 7 moved, pages of 5: the mark is on page 2
    before = revision_shas(baselined)
    outcomes = baselined.poller.poll([r for r, _ in scope.moved])
    assert sum(len(o.revisions) for o in outcomes) == 7
    assert len(revision_shas(baselined)) == len(before) + 7
    hub.reset_requests()
    [again] = make_pass(baselined).run()
    assert again.moved == [] and hub.count_requests() == 1


def test_repeated_entries_are_polled_once(baselined: App, hub: ReplayServer) -> None:
    """A page that repeats entries of the previous one: each repo is counted and polled once."""
    for repo_id in REPOS[:9]:
        hub.advance(repo_id)
    hub.fault_listing("repeat", 2)
    [scope] = make_pass(baselined).run()
    assert scope.repeated >= 2 and scope.complete
    assert sorted(scope.moved) == sorted((r, "main") for r in REPOS[:9])


def test_skipped_entries_are_caught_by_the_reconcile(baselined: App, hub: ReplayServer) -> None:
    """A page that skips entries misses those repos; the per-repo reconcile ingests them, and nothing twice."""
    for repo_id in REPOS[:9]:
        hub.advance(repo_id)
    hub.fault_listing("skip", 2)
    [scope] = make_pass(baselined).run()
    missed = sorted(set(REPOS[:9]) - {r for r, _ in scope.moved})
    assert len(missed) == 2
    listed = baselined.poller.poll([r for r, _ in scope.moved])
    assert sum(len(o.revisions) for o in listed) == 7
    reconcile = baselined.poller.poll()  # every watch on its own, as the reconcile does
    ingested = {o.repo_id: len(o.revisions) for o in reconcile if o.revisions}
    assert ingested == dict.fromkeys(missed, 1)
    shas = revision_shas(baselined)
    assert len(shas) == len(set(shas)) == len(REPOS) + 9


def test_looping_cursor_is_cut_and_the_mark_kept(baselined: App, hub: ReplayServer) -> None:
    """A cursor that loops back to the first page ends the pass (bounded requests) without moving the mark;
    what it saw is still polled."""
    mark = listings(baselined).listing_state(ALL_MODELS)
    for repo_id in REPOS:
        hub.advance(repo_id)
    hub.fault_listing("loop")
    [scope] = make_pass(baselined).run()
    assert not scope.complete and "repeats itself" in (scope.error or "")
    assert listing_requests(hub) <= 1000 // 5 + 2
    assert len(scope.moved) == 5  # the first page's repos
    state = listings(baselined).listing_state(ALL_MODELS)
    assert state.high_water_at == mark.high_water_at and state.last_error == scope.error
    hub.fault_listing(None)
    [healed] = make_pass(baselined).run()
    assert healed.complete and len(healed.moved) == len(REPOS)


def test_a_listed_sha_the_repo_does_not_confirm_ingests_nothing(baselined: App, hub: ReplayServer) -> None:
    """The listing claims a new sha; the repo's own head says otherwise: polled, nothing ingested, and the
    real move is caught by the next pass."""
    repo_id = REPOS[0]
    hub.set_head(repo_id, 2)  # the head is touched (newest in the listing) without a new commit
    hub.list_with_sha(repo_id, "f" * 40)
    [scope] = make_pass(baselined).run()
    assert scope.moved == [(repo_id, "main")]
    before = revision_shas(baselined)
    [outcome] = baselined.poller.poll([repo_id])
    assert outcome.revisions == [] and not outcome.failed
    assert revision_shas(baselined) == before
    hub.advance(repo_id)
    [scope] = make_pass(baselined).run()
    assert scope.moved == [(repo_id, "main")]
    assert len(baselined.poller.poll([repo_id])[0].revisions) == 1


def test_local_clock_does_not_matter(hub: ReplayServer, database_url: str) -> None:
    """The mark is the Hub's time: an app whose clock is years off still sees every move."""
    from datetime import UTC, datetime

    skewed = App(settings_for(hub.endpoint, database_url), clock=lambda: datetime(2001, 1, 1, tzinfo=UTC))  # type: ignore[arg-type]
    skewed.store.watches.add_watch(REPOS[0], "main", 900)
    skewed.poller.poll()
    make_pass(skewed).run()
    hub.advance(REPOS[0])
    [scope] = make_pass(skewed).run()
    assert scope.moved == [(REPOS[0], "main")]
    skewed.store.engine.dispose()


def test_author_watch_discovers_new_models_with_their_baseline(app: App, hub: ReplayServer) -> None:
    """A model an org publishes after `watch add 'org1/*'` becomes a watch; its first poll is a baseline event."""
    models = list(app.hub.list_models_by_modification("org1"))
    outcome = follow_author(listings(app), "org1", 600, models)
    assert outcome.listed == 4 and outcome.added == []  # all four were watched one by one already
    hub.reset_requests()
    hub.add_repo(synthetic_history("org1/brand-new", commits=1))
    hub.add_repo(synthetic_history("org2/not-followed", commits=1))
    passes = make_pass(app).run()
    by_scope = {p.scope: p for p in passes}
    assert by_scope[author_scope("org1")].discovered == ["org1/brand-new"]
    assert ("org1/brand-new", "main") in by_scope[author_scope("org1")].moved
    watch = app.store.watches.get_watch("org1/brand-new")
    assert watch is not None and (watch.source, watch.interval_s) == ("author", 600)
    assert app.store.watches.get_watch("org2/not-followed") is None
    [polled] = app.poller.poll(["org1/brand-new"])
    assert [r.is_baseline for r in polled.revisions] == [True]
    with app.store.history.session() as s:
        events = list(s.exec(select(Event).where(Event.repo_id == "org1/brand-new")))
    assert [e.kind for e in events if e.kind == "revision.ingested"] == ["revision.ingested"]
    assert polled.revisions[0].is_baseline
    [again] = [p for p in make_pass(app).run() if p.scope == author_scope("org1")]
    assert again.discovered == [] and again.moved == []


def test_listing_job_plan_uses_the_reconcile_and_the_budget(app: App) -> None:
    """In listing mode each watch is polled at the reconcile interval; over budget every interval stretches alike."""
    settings = settings_for(app.settings.hub.endpoint, app.settings.database_url,
                            poll={"listing": "auto", "listing_min_watches": 10, "reconcile_interval": "1d"})
    triggered: list[tuple[str, str]] = []
    job = ListingJob(settings, listings(app), app.hub, lambda r, b: triggered.append((r, b)))
    watches = app.store.watches.list_watches()
    assert set(job.plan(watches).values()) == {86400}
    assert set(job.plan(watches[:5]).values()) == {900}  # below the threshold: their own interval
    fits = ListingJob(settings, listings(app), app.hub, triggered.append, RequestBudget(3, 0))
    assert set(fits.plan(watches[:5]).values()) == {900}  # 5 watches at 15m: 1.7 a window, 2.7 planned for
    budget = RequestBudget(1, 0)
    tight = ListingJob(settings, listings(app), app.hub, triggered.append, budget)
    plan = tight.plan(watches[:5])  # 1.7 a window against 0.9 planned for: every interval x 1.85
    assert set(plan.values()) == {math.ceil(900 * (5 * 300 / 900) / 0.9)}
    assert budget.state()["stretched"] is True and budget.state()["interval_stretch"] == pytest.approx(1.852, abs=1e-3)


def test_listing_job_triggers_the_moved_watches(baselined: App, hub: ReplayServer) -> None:
    """The daemon's job hands each moved watch to the scheduler's trigger."""
    settings = settings_for(hub.endpoint, baselined.settings.database_url, poll={"listing": "on"})
    triggered: list[tuple[str, str]] = []
    job = ListingJob(settings, listings(baselined), baselined.hub,
                     lambda r, b: triggered.append((r, b)))
    hub.advance(REPOS[3])
    job()
    assert triggered == [(REPOS[3], "main")]


def test_listing_off_lists_nothing(baselined: App, hub: ReplayServer) -> None:
    """[poll] listing = "off" with no followed author: the job asks the Hub nothing."""
    settings = settings_for(hub.endpoint, baselined.settings.database_url, poll={"listing": "off"})
    job = ListingJob(settings, listings(baselined), baselined.hub, lambda r, b: None)
    assert job() == [] and hub.count_requests() == 0


def test_watch_count_takes_org_names_literally(app: App) -> None:
    """An org name with `_` (a LIKE wildcard in SQL) excludes only its own repos from the count."""
    app.store.watches.add_watch("a_c/x", "main", 900)
    app.store.watches.add_watch("abc/y", "main", 900)
    assert listings(app).watch_count() == len(REPOS) + 2
    assert listings(app).watch_count(except_authors={"a_c"}) == len(REPOS) + 1
    assert [w.repo_id for w in listings(app).watches_of(["abc/y", "nobody/z"])] == ["abc/y"]


def test_daemon_finds_a_move_by_listing(replay_for_daemon: ReplayServer, tmp_path, database_url: str) -> None:
    """`hubwatch run` with the listing on: a watch polled once a day still gets its new commit within
    seconds, from the listing pass, and the budget is installed without getting in the way."""
    import json
    import os
    import signal
    import subprocess
    import sys

    import httpx

    from tests.support.cli import write_config

    hub = replay_for_daemon
    config = write_config(tmp_path / "hubwatch.toml", hub.endpoint, database_url,
                          extra='listing = "on"\nlisting_interval = "1s"\n\n[osv]\nenabled = false\n')
    app = App(settings_for(hub.endpoint, database_url))  # type: ignore[arg-type]
    app.store.watches.add_watch(REPOS[0], "main", 86400)
    app.poller.poll()
    app.store.engine.dispose()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracker", "--config", str(config), "run"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "HUBWATCH_SERVER_PORT": "0"},
    )
    try:
        seen = read_stderr_until(proc, '"listing_pass_finished"', timeout_s=60)  # the server starts before the first pass
        url = json.loads(next(line for line in seen.splitlines() if '"http_server_started"' in line))["url"]
        budget = httpx.get(f"{url}/healthz", timeout=10).json()["hub_budget"]
        assert budget["pools"]["api"]["limit_per_window"] == 1000 and budget["pools"]["api"]["used"] >= 1
        assert budget["stretched"] is False
        hub.advance(REPOS[0])
        read_stderr_until(proc, '"revision_stored"', timeout_s=60)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    app = App(settings_for(hub.endpoint, database_url))  # type: ignore[arg-type]
    assert app.store.watches.get_watch(REPOS[0]).last_sha == hub.head_sha(REPOS[0])
    app.store.engine.dispose()


@pytest.fixture
def replay_for_daemon() -> Iterator[ReplayServer]:
    with ReplayServer(roots=[]) as server:
        server.add_repo(synthetic_history(REPOS[0], commits=3))
        server.set_head(REPOS[0], 2)
        yield server


def test_scheduler_takes_the_planned_intervals(app: App) -> None:
    """The scheduler schedules each watch at the interval the listing job plans (the reconcile), not its own."""
    from tracker.polling.scheduler import Scheduler

    settings = settings_for(app.settings.hub.endpoint, app.settings.database_url, poll={"listing": "on", "reconcile_interval": "12h"})
    job = ListingJob(settings, listings(app), app.hub, lambda r, b: None)
    scheduler = Scheduler(app.store.watches.list_watches, lambda r, b: None, jitter_s=0, plan=job.plan)
    scheduler.sync()
    assert scheduler.intervals == {f"{r}@main": 43200 for r in REPOS}


@pytest.mark.parametrize(
    ("poll", "message"),
    [({"listing": "sometimes"}, "listing must be auto, on or off"),
     ({"listing_min_watches": -1}, "listing_min_watches"),
     ({"reconcile_interval": "soon"}, "reconcile_interval"),
     ({"listing_interval": "0s"}, "listing_interval")],
)
def test_bad_listing_settings_are_refused(poll: dict, message: str) -> None:
    """A listing setting out of range is a config error naming it."""
    from tracker.config import settings_from_mapping
    from tracker.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        settings_from_mapping({"poll": poll}, env={})


def test_migration_0013_goes_down_and_up(database_url: str) -> None:
    """Migration 0013 creates author_watch, listing_state and hub_budget, and its downgrade drops only them."""
    import sqlalchemy as sa
    from alembic import command

    from storage.db import alembic_config, create_db_engine, migrate

    engine = create_db_engine(database_url)
    migrate(engine)
    ours = {"author_watch", "listing_state", "hub_budget"}
    assert ours <= set(sa.inspect(engine).get_table_names())
    command.downgrade(alembic_config(engine), "0013-1")
    tables = set(sa.inspect(engine).get_table_names())
    assert not ours & tables and {"watch", "revision"} <= tables
    migrate(engine)
    assert ours <= set(sa.inspect(engine).get_table_names())
    engine.dispose()


def test_plan_gives_followed_authors_the_reconcile_interval(app: App) -> None:
    """Below the threshold, watches of a followed author are left to its listing (reconcile interval); others keep theirs."""
    settings = settings_for(app.settings.hub.endpoint, app.settings.database_url, poll={"listing_min_watches": 1000})
    follow_author(listings(app), "org1", 900, None)
    job = ListingJob(settings, listings(app), app.hub, lambda r, b: None)
    plan = job.plan(app.store.watches.list_watches())
    assert {job_id: s for job_id, s in plan.items() if s != 900} == {f"{r}@main": 86400 for r in REPOS if r.startswith("org1/")}


def test_a_failed_poll_of_a_listed_move_is_retried_by_the_job(baselined: App, hub: ReplayServer) -> None:
    """A move the listing reported whose poll failed is not listed again; the job retries it once its retry is due."""
    from datetime import timedelta

    from storage.sessions import utc_now

    repo_id = REPOS[1]
    hub.advance(repo_id)
    settings = settings_for(hub.endpoint, baselined.settings.database_url, poll={"listing": "on"})
    later = ListingStore(baselined.store.engine, clock=lambda: utc_now() + timedelta(hours=1))
    triggered: list[tuple[str, str]] = []
    job = ListingJob(settings, later, baselined.hub, lambda r, b: triggered.append((r, b)))
    job()
    assert triggered == [(repo_id, "main")]
    hub.inject(500, path=f"^/api/models/{repo_id}", times=1)
    [failed] = baselined.poller.poll([repo_id])
    assert failed.failed
    triggered.clear()
    job()  # the listing no longer shows it (the mark moved past it); its retry is due an hour later
    assert triggered == [(repo_id, "main")]
    assert len(baselined.poller.poll([repo_id])[0].revisions) == 1
    triggered.clear()
    job()
    assert triggered == []


def test_a_pass_whose_moves_cannot_be_handed_on_keeps_its_mark(baselined: App, hub: ReplayServer) -> None:
    """The moves are handed to the scheduler before the mark moves past them: when that fails (a worker's
    database gone mid-pass, or the worker killed there) the next pass lists them again."""
    repo_id = REPOS[1]
    hub.advance(repo_id)
    settings = settings_for(hub.endpoint, baselined.settings.database_url, poll={"listing": "on"})
    listings = ListingStore(baselined.store.engine)
    answers: list[object] = [RuntimeError("database gone"), None]
    handed: list[tuple[str, str]] = []

    def trigger(r: str, b: str) -> None:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        handed.append((r, b))

    job = ListingJob(settings, listings, baselined.hub, trigger)
    assert job() == []  # the pass failed: logged, nothing recorded
    job()
    assert handed == [(repo_id, "main")]


def follow_all(app: App) -> None:
    """org0/*, org1/* and org2/* followed, each with its listing now (marks set), every watch baselined."""
    assert not any(o.failed for o in app.poller.poll())
    for org in ("org0", "org1", "org2"):
        follow_author(listings(app), org, 900, list(app.hub.list_models_by_modification(org)))


def test_followed_authors_cost_one_listing_a_round(app: App, hub: ReplayServer) -> None:
    """Three followed orgs and nothing else listed: after a first round that lists each once, a round is one
    page of every model (not a page per org), and a move of a followed org is still found in it."""
    follow_all(app)
    first = make_pass(app).run(include_all=False)
    assert {p.scope for p in first} == {ALL_MODELS, *(author_scope(o) for o in ("org0", "org1", "org2"))}
    hub.reset_requests()
    rounds = [make_pass(app).run(include_all=False) for _ in range(3)]
    assert listing_requests(hub) == 3  # one a round; per-author passes cost three
    assert all(p.via == ALL_MODELS for p in rounds[-1] if p.scope != ALL_MODELS)
    hub.advance(REPOS[4])  # org1
    hub.reset_requests()
    passes = make_pass(app).run(include_all=False)
    assert listing_requests(hub) == 1
    assert [m for p in passes for m in p.moved] == [(REPOS[4], "main")]
    state = listings(app).listing_state(author_scope("org1"))
    assert state is not None and state.high_water_at == hub.last_modified(REPOS[4])  # its own mark moved too


def test_a_move_is_ingested_within_two_intervals_at_one_request_a_round(hub: ReplayServer, database_url: str) -> None:
    """On a fake clock, with the daemon's listing job of followed orgs polling what it finds: each round costs
    one request, and a repo that moves mid-interval is ingested by the end of the next round."""
    from tests.support.clock import FakeClock

    clock = FakeClock()
    app = App(settings_for(hub.endpoint, database_url), clock=clock)  # type: ignore[arg-type]
    follow_all(app)
    settings = settings_for(hub.endpoint, database_url, poll={"listing": "off", "listing_interval": "1m"})
    job = ListingJob(settings, listings(app), app.hub, lambda r, b: app.poller.poll([r]), clock=clock)
    job.plan(app.store.watches.list_watches())
    job()  # the first round lists each org once more
    for _ in range(2):
        clock.advance(60)
        hub.reset_requests()
        job()
        assert listing_requests(hub) == 1
    moved_at = clock.advance(30)
    hub.advance(REPOS[7])
    rounds = 0
    while app.store.watches.get_watch(REPOS[7]).last_sha != hub.head_sha(REPOS[7]) and rounds < 2:
        clock.advance(60 if rounds else 30)
        job()
        rounds += 1
    assert app.store.watches.get_watch(REPOS[7]).last_sha == hub.head_sha(REPOS[7])
    assert (clock.now - moved_at).total_seconds() <= 120
    app.store.engine.dispose()


def test_listing_rounds_stretch_with_the_budget(app: App, hub: ReplayServer) -> None:
    """A budget the plan does not fit stretches the listing rounds like every interval: the job, called every
    listing interval, lists only every stretched interval (here 5 rounds a window against 1.8 planned: x2.8)."""
    from tests.support.clock import FakeClock

    clock = FakeClock()
    settings = settings_for(hub.endpoint, app.settings.database_url,
                            poll={"listing": "on", "listing_interval": "1m", "reconcile_interval": "1d"})
    assert not any(o.failed for o in app.poller.poll())
    budget = RequestBudget(2, 0)
    job = ListingJob(settings, ListingStore(app.store.engine, clock=clock), app.hub, lambda r, b: None, budget, clock)
    plan = job.plan(app.store.watches.list_watches())
    assert job.stretch == pytest.approx((5 + 12 * 300 / 86400) / 1.8)
    assert set(plan.values()) == {math.ceil(86400 * job.stretch)}
    hub.reset_requests()
    ran = []
    for _ in range(7):
        job()
        ran.append(listing_requests(hub))
        clock.advance(60)
    assert [n - ran[0] for n in ran] == [0, 0, 0, 1, 1, 1, 2]  # rounds at 0, 3 and 6 minutes (the next: one page)
