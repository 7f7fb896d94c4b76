"""Several workers on one database (storage/leases.py, tracker/polling/shared.py): due watches leased by one
worker at a time, leases of killed or cut-off workers taken over, periodic jobs run once an interval
among all, Hub webhooks polled at once. On SQLite and (the CI's second pass) PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from structlog.testing import capture_logs

from storage.db import create_db_engine, migrate
from storage.front import Storage
from storage.leases import LeaseStore
from storage.models import Watch
from tests.support.clock import FakeClock
from tests.support.settings import settings_for
from tests.support.waiting import wait_until
from tracker.polling.shared import SharedScheduler

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture
def engines(database_url: str) -> Iterator[list[sa.Engine]]:
    """Two engines on one database: two workers' connections."""
    made = [create_db_engine(database_url) for _ in range(2)]
    migrate(made[0])
    yield made
    for engine in made:
        engine.dispose()


def _watches(engine: sa.Engine, n: int, interval_s: int = 60, prefix: str = "org/m") -> Storage:
    store = Storage(engine)
    for i in range(n):
        store.watches.add_watch(f"{prefix}{i}", "main", interval_s)
    return store


def _due_now(engine: sa.Engine, at: datetime) -> None:
    with engine.begin() as conn:
        conn.execute(sa.update(Watch.__table__).values(next_poll_at=at))  # type: ignore[attr-defined]


def test_workers_claiming_at_once_take_disjoint_watches(engines: list[sa.Engine]) -> None:
    """Four threads on two engines claim 40 due watches in rounds of 3: each watch once, none left."""
    _watches(engines[0], 40)
    _due_now(engines[0], T0)
    claims: list[int] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        leases = LeaseStore(engines[n % 2])
        while True:
            got = leases.claim_due(f"w{n}", T0, 30, 3)
            if not got:
                return
            with lock:
                claims.extend(w.id for w in got)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(claims) == 40 and len(set(claims)) == 40


def test_an_expired_lease_is_taken_over_and_the_old_holder_changes_nothing(engines: list[sa.Engine]) -> None:
    _watches(engines[0], 1)
    _due_now(engines[0], T0)
    a, b = LeaseStore(engines[0]), LeaseStore(engines[1])
    [held] = a.claim_due("a", T0, 15, 10)
    assert b.claim_due("b", T0 + timedelta(seconds=14), 15, 10) == []  # live lease: untouched
    [taken] = b.claim_due("b", T0 + timedelta(seconds=16), 15, 10)  # expired: the watch is still due
    assert taken.id == held.id
    assert a.renew("a", [held.id], T0 + timedelta(seconds=17), 15) == set()
    assert not a.release("a", held, T0 + timedelta(hours=1))  # not its lease any more
    assert b.release("b", taken, T0 + timedelta(minutes=1))
    with engines[0].connect() as conn:
        row = conn.execute(sa.select(Watch.__table__.c.next_poll_at, Watch.__table__.c.leased_by)).one()  # type: ignore[attr-defined]
    assert (row.next_poll_at, row.leased_by) == (T0 + timedelta(minutes=1), None)


def test_a_watch_polled_and_given_back_since_the_claims_read_is_not_claimed_again(engines: list[sa.Engine]) -> None:
    """A claim reads the due watches, then takes each: one that another worker claimed, polled and gave back
    in between (free again, but due in an hour) is not taken (SQLite has no row locks to keep it out)."""
    _watches(engines[0], 1)
    _due_now(engines[0], T0)
    a, b = LeaseStore(engines[0]), LeaseStore(engines[1])
    by_a: list = []

    @sa.event.listens_for(engines[1], "after_cursor_execute")
    def meanwhile(conn, cursor, statement, *_args) -> None:
        if statement.lstrip().upper().startswith("SELECT") and not by_a:
            by_a.append(a.claim_due("a", T0, 15, 10))  # on PostgreSQL none: b's read locked the row
            for held in by_a[0]:
                assert a.release("a", held, T0 + timedelta(hours=1))

    by_b = b.claim_due("b", T0, 15, 10)
    assert len(by_a[0]) + len(by_b) == 1


def test_a_poll_asked_for_while_leased_stays_due_on_release(engines: list[sa.Engine]) -> None:
    store = _watches(engines[0], 1)
    _due_now(engines[0], T0)
    leases = LeaseStore(engines[0])
    [held] = leases.claim_due("a", T0, 15, 1)
    assert leases.request_poll("org/m0", "main", T0 + timedelta(seconds=2))  # a Hub webhook, mid-poll
    assert not leases.request_poll("org/absent", "main", T0)
    leases.release("a", held, T0 + timedelta(minutes=1))
    assert store.watches.get_watch("org/m0").next_poll_at == T0 + timedelta(seconds=2)  # type: ignore[union-attr]
    [again] = leases.claim_due("a", T0 + timedelta(seconds=3), 15, 1)
    assert again.id == held.id


def test_claim_one_takes_a_watch_not_yet_due_but_not_one_held_by_another(engines: list[sa.Engine]) -> None:
    _watches(engines[0], 1)
    _due_now(engines[0], T0 + timedelta(hours=1))
    a, b = LeaseStore(engines[0]), LeaseStore(engines[1])
    assert a.claim_due("a", T0, 15, 5) == []
    held = a.claim_one("a", "org/m0", "main", T0, 15)
    assert held is not None
    assert b.claim_one("b", "org/m0", "main", T0, 15) is None
    assert b.claim_one("b", "org/absent", "main", T0, 15) is None


def test_new_watches_are_scheduled_once_and_a_shorter_plan_pulls_due_times_in(engines: list[sa.Engine]) -> None:
    _watches(engines[0], 3)
    a, b = LeaseStore(engines[0]), LeaseStore(engines[1])
    rows = a.unscheduled()
    assert len(rows) == 3
    assert a.schedule([(rows[0][0], T0 + timedelta(days=1))]) == 1
    assert b.schedule([(rows[0][0], T0)]) == 0  # another worker scheduled it already
    assert len(a.unscheduled()) == 2
    assert a.pull_in([("org/m0", "main", T0 + timedelta(hours=1)), ("org/m1", "main", T0)]) == 1
    assert a.claim_due("a", T0 + timedelta(hours=1), 15, 5)[0].repo_id == "org/m0"


def test_a_periodic_job_runs_once_an_interval_among_workers(engines: list[sa.Engine]) -> None:
    a, b = LeaseStore(engines[0]), LeaseStore(engines[1])
    assert a.start_job("__listing__", "a", T0, 60, 15)
    assert not b.start_job("__listing__", "b", T0 + timedelta(seconds=1), 60, 15)  # held
    a.finish_job("__listing__", "a", T0)
    assert not b.start_job("__listing__", "b", T0 + timedelta(seconds=30), 60, 15)  # ran 30 s ago
    assert b.start_job("__listing__", "b", T0 + timedelta(seconds=55), 60, 15)  # a tenth early is its turn
    # b is killed mid-run: its lease expires and the job is a's again
    assert not a.start_job("__listing__", "a", T0 + timedelta(seconds=60), 60, 15)
    assert a.start_job("__listing__", "a", T0 + timedelta(seconds=71), 60, 15)


# -- the scheduler of each worker ----------------------------------------------------------------------


class Polls:
    """A poll function per worker that records who polled what, and whether two polls of one watch
    overlapped. Nothing sleeps: `hold(repo)` makes that watch's polls say they started and wait for a go, and
    with `meet=n` every poll waits until n workers each have one under way (so that all of them take part)."""

    def __init__(self, meet: int = 0) -> None:
        self.done: list[tuple[str, str]] = []
        self.active: Counter[str] = Counter()
        self.overlaps = 0
        self._lock = threading.Lock()
        self._held: dict[str, tuple[threading.Event, threading.Event]] = {}
        self._meet = meet
        self._polling: set[str] = set()
        self._met = threading.Event()

    def hold(self, repo_id: str) -> tuple[threading.Event, threading.Event]:
        """(started, go): the watch's polls set `started`, then wait for `go`."""
        self._held[repo_id] = (threading.Event(), threading.Event())
        return self._held[repo_id]

    def for_worker(self, name: str):
        def poll(repo_id: str, branch: str) -> None:
            with self._lock:
                self.active[repo_id] += 1
                self.overlaps += self.active[repo_id] > 1
                self._polling.add(name)
                if len(self._polling) >= self._meet:
                    self._met.set()
            if repo_id in self._held:
                started, go = self._held[repo_id]
                started.set()
                go.wait(10)
            self._met.wait(10)
            with self._lock:
                self.active[repo_id] -= 1
                self.done.append((name, repo_id))
        return poll


def _scheduler(engine: sa.Engine, polls: Polls, name: str, lease_s: float = 3, store: Storage | None = None,
               **kwargs: object) -> SharedScheduler:
    store = store or Storage(engine)
    return SharedScheduler(store.watches.watch_schedule, polls.for_worker(name), 0, LeaseStore(engine), lease_s,
                           worker=name, claim_tick_s=0.1, version=store.watches.watch_list_version, **kwargs)


def test_two_workers_share_the_watches_without_polling_one_twice(engines: list[sa.Engine]) -> None:
    """30 watches, a baseline each: every watch polled exactly once, by one worker or the other, never
    two polls of one watch at a time; both workers took part; a clean stop gives every lease back, and a
    third worker's round finds nothing due (the next polls are an hour away)."""
    _watches(engines[0], 30, interval_s=3600)
    polls = Polls(meet=2)
    workers = [_scheduler(engines[n], polls, f"w{n}") for n in range(2)]
    for w in workers:
        w.start()
    try:
        assert wait_until(lambda: len(polls.done) >= 30)
    finally:
        for w in workers:
            w.stop()
    third = _scheduler(engines[0], polls, "w2")
    try:
        assert third.tick() == 0
    finally:
        third.stop()
    by_repo = Counter(repo for _, repo in polls.done)
    assert len(by_repo) == 30 and set(by_repo.values()) == {1} and polls.overlaps == 0
    assert {name for name, _ in polls.done} == {"w0", "w1"}
    assert LeaseStore(engines[0]).lease_counts(datetime.now(UTC)) == {}
    next_polls = [w.next_poll_at for w in Storage(engines[0]).watches.list_watches()]
    assert all(at is not None and at > datetime.now(UTC) + timedelta(minutes=59) for at in next_polls)


def test_a_killed_workers_watches_are_taken_over_within_the_lease(engines: list[sa.Engine]) -> None:
    """A worker claims 10 due watches and dies (never releases): the live worker's rounds (on a fake clock)
    leave them alone while the 3 s lease runs, poll each once as soon as it expired, and nothing is overdue."""
    clock = FakeClock(T0)
    _watches(engines[0], 10, interval_s=3600)
    _due_now(engines[0], T0)
    dead = LeaseStore(engines[1]).claim_due("dead", T0, 3, 10)
    assert len(dead) == 10
    polls = Polls()
    live = _scheduler(engines[0], polls, "live", clock=clock)
    try:
        clock.advance(2.9)
        assert live.tick() == 0
        clock.advance(0.2)
        assert live.tick() == 10
        assert live.tick() == 0
        assert live.poll_state()["polls_overdue"] == 0
    finally:
        live.stop()
    assert sorted(r for _, r in polls.done) == sorted(f"org/m{i}" for i in range(10))


def test_the_claim_loop_waits_for_a_dead_workers_lease_to_end_not_for_a_whole_tick(engines: list[sa.Engine]) -> None:
    """`next_expiry` is the first end of a lease on a due watch (a watch not due, or not leased, is not one); the
    live worker's claim loop waits until just past it when that is sooner than its tick: a killed worker's watches
    are claimed when its lease runs out, not up to a tick later."""
    clock = FakeClock(T0)
    _watches(engines[0], 3, interval_s=3600)
    _due_now(engines[0], T0)
    leases = LeaseStore(engines[0])
    assert leases.next_expiry(T0) is None  # due, none leased
    leases.claim_one("dead", "org/m0", "main", T0, 3)
    leases.claim_one("dead", "org/m1", "main", T0 - timedelta(seconds=1), 3)
    with engines[0].begin() as conn:  # org/m2 leased but not due: polled and given back, its next poll an hour away
        conn.execute(sa.update(Watch.__table__).where(Watch.__table__.c.repo_id == "org/m2").values(  # type: ignore[attr-defined]
            next_poll_at=T0 + timedelta(hours=1), leased_by="dead", lease_until=T0 + timedelta(seconds=1)))
    assert leases.next_expiry(T0) == T0 + timedelta(seconds=2)  # org/m1's
    assert leases.next_expiry(T0 + timedelta(seconds=2.5)) == T0 + timedelta(seconds=3)  # org/m1's is past: org/m0's
    assert leases.next_expiry(T0 + timedelta(seconds=3.5)) is None
    live = SharedScheduler(Storage(engines[0]).watches.watch_schedule, Polls().for_worker("live"), 0, leases, 3,
                           worker="live", claim_tick_s=1.0, clock=clock)
    try:
        assert live._until_next_claim_s() == 1.0  # org/m1's lease ends 2 s from now: the tick is sooner
        clock.advance(1.5)
        assert live._until_next_claim_s() == pytest.approx(0.5 + 0.02)  # just past its end
        clock.advance(2.0)
        assert live._until_next_claim_s() == 1.0  # every lease on a due watch has ended: claimable now, then the tick
    finally:
        live.stop()


def test_a_worker_that_loses_its_database_lets_its_leases_expire_and_the_other_carries_on(
    engines: list[sa.Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Worker a's database goes away mid-poll (renewals and releases fail): it logs and carries on, and
    worker b polls a's watches once the leases expire; none is polled by both at once."""
    _watches(engines[0], 4, interval_s=3600)
    polls = Polls()
    gate = threading.Event()
    cut = _scheduler(engines[1], polls, "a")
    slow = cut._poll

    def hung(repo_id: str, branch: str) -> None:
        gate.wait(10)
        slow(repo_id, branch)

    cut._poll = hung
    cut.start()
    assert wait_until(lambda: sum(LeaseStore(engines[0]).lease_counts(datetime.now(UTC)).values()) == 4)

    def gone(*_args: object, **_kwargs: object) -> None:
        raise sa.exc.OperationalError("UPDATE watch", {}, Exception("server closed the connection unexpectedly"))

    for name in ("renew", "release", "claim_due", "renew_job", "release_all"):
        monkeypatch.setattr(cut._leases, name, gone)
    other = _scheduler(engines[0], polls, "b")
    with capture_logs() as logs:
        other.start()
        try:
            assert wait_until(lambda: len({r for n, r in polls.done if n == "b"}) == 4)
        finally:
            gate.set()
            other.stop()
            cut.stop()
    events = [entry["event"] for entry in logs if entry.get("worker") == "a"]
    assert events.count("polling_database_unavailable") == 1, events  # one line for the outage, not one a call
    assert not {"lease_renewal_failed", "lease_release_failed", "lease_claim_failed"} & set(events), events
    assert polls.overlaps == 0


def test_a_database_outage_is_one_line_when_it_starts_and_one_when_it_ends(engines: list[sa.Engine], monkeypatch) -> None:
    """Claims failing for three rounds in a row (the database unreachable) log `polling_database_unavailable`
    once, with a pause that doubles; the first claim that goes through logs `polling_database_back` once."""
    _watches(engines[0], 2, interval_s=3600)
    worker = _scheduler(engines[0], Polls(), "w")
    claim = worker._leases.claim_due

    def gone(*_args: object, **_kwargs: object) -> None:
        raise sa.exc.OperationalError("SELECT watch", {}, Exception("connection refused"))

    monkeypatch.setattr(worker._leases, "claim_due", gone)
    with capture_logs() as logs:
        pauses = []
        for _ in range(3):
            assert worker._claim_round() is None
            pauses.append(worker._retry_in_s)
        monkeypatch.setattr(worker._leases, "claim_due", claim)
        assert worker._claim_round() is not None
        assert worker._claim_round() is not None
    worker.stop()
    events = [entry["event"] for entry in logs]
    assert events.count("polling_database_unavailable") == 1 and events.count("polling_database_back") == 1, events
    assert "lease_claim_failed" not in events
    assert pauses == sorted(pauses) and pauses[0] < pauses[-1]


def test_a_hub_webhook_polls_at_once_and_a_held_watch_again_after_its_poll(engines: list[sa.Engine]) -> None:
    store = _watches(engines[0], 2, interval_s=3600)
    polls = Polls()
    worker = _scheduler(engines[0], polls, "w", store=store)
    worker.start()
    try:
        assert wait_until(lambda: len(polls.done) == 2)  # the baselines
        assert worker.trigger("org/m0", "main")
        assert wait_until(lambda: len(polls.done) == 3, timeout_s=2)
        # a webhook while the watch is being polled: polled once more after that poll, not at once beside it
        started, go = polls.hold("org/m1")
        assert worker.trigger("org/m1", "main")
        assert started.wait(5)
        assert worker.trigger("org/m1", "main")
        go.set()
        assert wait_until(lambda: len(polls.done) == 5, timeout_s=5)
        assert not worker.trigger("org/absent", "main")
    finally:
        worker.stop()
    assert polls.overlaps == 0
    assert Counter(r for _, r in polls.done) == {"org/m0": 2, "org/m1": 3}


def test_periodic_jobs_run_on_one_worker(engines: list[sa.Engine]) -> None:
    """Two workers' rounds (one clock): a periodic job runs on the first to come, not on the other, not again
    half an interval on, and once more an interval on, on whichever worker comes first then."""
    clock = FakeClock(T0)
    ran: list[str] = []
    workers = [_scheduler(engines[n], Polls(), f"w{n}", clock=clock) for n in range(2)]
    try:
        for w in workers:
            w.add_periodic("__job__", lambda name=w.worker: ran.append(name), 3600, first_at=T0)
        for w in workers:
            w.tick()
        assert ran == ["w0"]
        clock.advance(1800)
        for w in workers:
            w.tick()
        assert ran == ["w0"]
        clock.advance(1800)
        for w in reversed(workers):
            w.tick()
        assert ran == ["w0", "w1"]
    finally:
        for w in workers:
            w.stop()


def test_workers_storing_the_same_content_at_once_both_commit(engines: list[sa.Engine]) -> None:
    """Two repos with one config, ingested by two workers at once: the second writer of a blob or a weight
    manifest waits for the first and skips it (it used to fail the poll with a unique violation)."""
    from sqlmodel import Session

    from storage import blobs
    from storage.models import Blob, WeightFile, WeightTensor
    from storage.sessions import insert_new

    data = b'{"model_type": "llama"}'
    oid = blobs.git_blob_oid(data)
    weight = {"sha256": "a" * 64, "tensor_count": 1, "parameters": 4, "file_metadata": None, "error": None, "read_at": T0}
    tensor = {"weight_sha256": "a" * 64, "name": "w", "dtype": "F32", "shape": [2, 2], "parameters": 4}
    first_in = threading.Event()
    inserting = threading.Event()
    errors: list[BaseException] = []

    @sa.event.listens_for(engines[1], "before_cursor_execute")
    def _sent(conn, cursor, statement, *_args) -> None:
        if statement.lstrip().upper().startswith("INSERT"):
            inserting.set()

    def second() -> None:
        try:
            with Session(engines[1]) as s:
                first_in.wait(5)
                blobs.add_blobs(s, {oid: data})
                insert_new(s, WeightFile.__table__, [weight], key=lambda r: r["sha256"])  # type: ignore[attr-defined]
                insert_new(s, WeightTensor.__table__, [tensor], key=lambda r: r["name"])  # type: ignore[attr-defined]
                s.commit()
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    thread = threading.Thread(target=second)
    thread.start()
    with Session(engines[0]) as s:
        blobs.add_blobs(s, {oid: data})
        insert_new(s, WeightFile.__table__, [weight], key=lambda r: r["sha256"])  # type: ignore[attr-defined]
        insert_new(s, WeightTensor.__table__, [tensor], key=lambda r: r["name"])  # type: ignore[attr-defined]
        s.flush()
        first_in.set()
        # the second writer has sent its INSERT, and on PostgreSQL it is seen waiting for this transaction's lock
        assert inserting.wait(10)
        if engines[0].dialect.name == "postgresql":
            assert wait_until(lambda: _lock_waits(engines[0]) > 0, timeout_s=10)
        s.commit()
    thread.join(15)
    assert errors == []
    with Session(engines[0]) as s:
        assert blobs.read_blobs(s, [oid]) == {oid: data}
        assert len(list(s.exec(sa.select(Blob.oid)))) == 1 and len(list(s.exec(sa.select(WeightTensor.name)))) == 1


def _lock_waits(engine: sa.Engine) -> int:
    """Backends of this database waiting for a lock (PostgreSQL)."""
    with engine.connect() as conn:
        return conn.exec_driver_sql(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()").scalar_one()


def test_the_daemon_shares_on_postgresql_and_times_watches_itself_on_sqlite(tmp_path, replay) -> None:
    from tracker.cli.app import App
    from tracker.cli.builder import build_scheduler
    from tracker.polling.scheduler import Scheduler

    def scheduler_for(url: str, **poll: str) -> Scheduler:
        app = App(settings_for(replay.endpoint, url, poll=poll))  # type: ignore[arg-type]
        return build_scheduler(app, lambda r, b: None, 0)

    sqlite = f"sqlite:///{tmp_path / 'a.db'}"
    assert type(scheduler_for(sqlite)) is Scheduler
    shared = scheduler_for(sqlite, coordination="shared", lease="7s")
    assert isinstance(shared, SharedScheduler) and shared._lease_s == 7


@pytest.mark.parametrize(("poll", "key"), [({"coordination": "many"}, "coordination"), ({"lease": "1s"}, "lease"),
                                           ({"lease": "soon"}, "lease")])
def test_bad_coordination_settings_are_refused_by_name(poll: dict, key: str) -> None:
    from tracker.config import settings_from_mapping
    from tracker.errors import ConfigError

    with pytest.raises(ConfigError, match=key):
        settings_from_mapping({"poll": poll}, env={})


def test_one_process_keeps_a_poll_asked_for_across_a_kill(engines: list[sa.Engine]) -> None:
    """coordination = local (SQLite's one process): a listing's move is written down before its poll runs;
    killed before it ran, the restarted daemon polls it at once and then clears the request. Watches with
    no request wait for their interval."""
    from tracker.polling.scheduler import Scheduler

    store = _watches(engines[0], 2, interval_s=3600)
    with engines[0].begin() as conn:
        conn.execute(sa.update(Watch.__table__).values(last_polled_at=datetime.now(UTC)))  # type: ignore[attr-defined]
    leases = LeaseStore(engines[0])
    before = Scheduler(store.watches.watch_schedule, lambda r, b: None, 0, requests=leases)
    before.sync()
    assert before.trigger("org/m1", "main", urgent=False)  # then SIGKILL: the poll never ran
    assert store.watches.get_watch("org/m1").next_poll_at is not None  # type: ignore[union-attr]
    polled: list[str] = []
    after = Scheduler(store.watches.watch_schedule, lambda r, b: polled.append(r), 0, requests=leases)
    after.start()
    try:
        assert wait_until(lambda: store.watches.get_watch("org/m1").next_poll_at is None, timeout_s=10)  # type: ignore[union-attr]
    finally:
        after.stop()
    assert polled == ["org/m1"]


def test_a_leased_poll_the_database_could_not_take_stays_due(engines: list[sa.Engine]) -> None:
    """A listing's request for a watch whose poll the database could not take (the poll says False: polling
    paused) is not used up: the watch is due again seconds later and polled then, not an interval later
    (issue 21: after a PostgreSQL outage the workers' first claims hit the closed gate and the moves waited a day)."""
    from tracker.polling.scheduler import PAUSED_RETRY_S

    store = _watches(engines[0], 1, interval_s=3600)
    with engines[0].begin() as conn:
        conn.execute(sa.update(Watch.__table__).values(last_polled_at=datetime.now(UTC),  # type: ignore[attr-defined]
                                                      next_poll_at=datetime.now(UTC) + timedelta(hours=1)))
    answers = [False]  # the first poll finds polling paused; the next ones go through
    polled: list[float] = []

    def poll(repo_id: str, branch: str) -> bool:
        polled.append(time.monotonic())
        return answers.pop(0) if answers else True

    worker = SharedScheduler(store.watches.watch_schedule, poll, 0, LeaseStore(engines[0]), 3, worker="w",
                             claim_tick_s=0.1, version=store.watches.watch_list_version)
    worker.start()
    try:
        assert worker.trigger("org/m0", "main", urgent=False)  # the listing saw it move
        assert wait_until(lambda: len(polled) == 1)
        assert wait_until(lambda: len(polled) == 2, timeout_s=PAUSED_RETRY_S + 10), "the request was used up"
    finally:
        worker.stop()
    assert PAUSED_RETRY_S - 1 <= polled[1] - polled[0] <= PAUSED_RETRY_S + 5
    due = store.watches.get_watch("org/m0").next_poll_at  # type: ignore[union-attr]
    assert due is not None and due > datetime.now(UTC) + timedelta(minutes=50)  # polled: the next is an interval on


def test_one_process_keeps_a_request_the_database_could_not_take(engines: list[sa.Engine]) -> None:
    """coordination = local: a listing's request whose poll the database could not take keeps its request row and
    is polled again seconds later (then cleared), rather than at the watch's next interval."""
    from tracker.polling.scheduler import PAUSED_RETRY_S, Scheduler

    store = _watches(engines[0], 1, interval_s=3600)
    with engines[0].begin() as conn:
        conn.execute(sa.update(Watch.__table__).values(last_polled_at=datetime.now(UTC)))  # type: ignore[attr-defined]
    answers = [False]
    polled: list[float] = []

    def poll(repo_id: str, branch: str) -> bool:
        polled.append(time.monotonic())
        return answers.pop(0) if answers else True

    scheduler = Scheduler(store.watches.watch_schedule, poll, 0, requests=LeaseStore(engines[0]))
    scheduler.start()
    try:
        assert scheduler.trigger("org/m0", "main", urgent=False)
        assert wait_until(lambda: len(polled) == 1)
        assert store.watches.get_watch("org/m0").next_poll_at is not None  # type: ignore[union-attr]
        assert wait_until(lambda: len(polled) == 2, timeout_s=PAUSED_RETRY_S + 10), "the request was used up"
        assert wait_until(lambda: store.watches.get_watch("org/m0").next_poll_at is None)  # type: ignore[union-attr]
    finally:
        scheduler.stop()
