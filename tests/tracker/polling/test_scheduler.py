"""The daemon's scheduler: one job per watch, synced from the store, triggered at once by webhooks."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from storage.models import Watch
from tracker.polling.scheduler import Scheduler, first_run_at


def _watch(repo_id: str, interval_s: int = 3600) -> Watch:
    return Watch(repo_id=repo_id, branch="main", interval_s=interval_s)


def test_watches_are_polled_at_start_and_a_new_one_on_trigger() -> None:
    """Every watch is polled when the scheduler starts; a watch added later is found and polled by a trigger."""
    watches = [_watch("org/a")]
    polled: dict[str, threading.Event] = {"org/a": threading.Event(), "org/b": threading.Event()}
    scheduler = Scheduler(lambda: list(watches), lambda repo_id, branch: polled[repo_id].set(), jitter_s=0)
    scheduler.start()
    try:
        assert polled["org/a"].wait(10)
        assert scheduler.trigger("org/unknown", "main") is False
        watches.append(_watch("org/b"))
        assert scheduler.trigger("org/b", "main") is True
        assert polled["org/b"].wait(10)
    finally:
        scheduler.stop()
    assert scheduler.stopped.is_set()


def test_sync_follows_interval_changes_and_removals() -> None:
    """A changed interval reschedules its job; a removed watch loses its job."""
    watches = [_watch("org/a", 60), _watch("org/b", 60)]
    scheduler = Scheduler(lambda: list(watches), lambda repo_id, branch: None, jitter_s=5)
    scheduler.sync()
    watches[:] = [_watch("org/a", 120)]
    scheduler.sync()
    assert scheduler.intervals == {"org/a@main": 120}


def test_sync_keeps_the_jobs_while_the_watches_cannot_be_read() -> None:
    """A watch list that cannot be read (None: the database is failing) leaves the scheduled jobs as they are."""
    answer: dict[str, list[Watch] | None] = {"watches": [_watch("org/a", 60)]}
    scheduler = Scheduler(lambda: answer["watches"], lambda repo_id, branch: None, jitter_s=0)
    scheduler.sync()
    answer["watches"] = None
    scheduler.sync()
    assert scheduler.intervals == {"org/a@main": 60}


def test_overdue_watches_are_spread_over_their_interval() -> None:
    """After a start, overdue watches are due at stable points within one interval, not all at once."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    long_ago = now - timedelta(days=3)
    times = [first_run_at(f"org/m{i}@main", _polled(f"org/m{i}", 900, long_ago), now) for i in range(2000)]
    offsets = sorted((t - now).total_seconds() for t in times)
    assert 0 <= offsets[0] and offsets[-1] < 900
    per_minute = [sum(1 for o in offsets if m * 60 <= o < (m + 1) * 60) for m in range(15)]
    assert max(per_minute) < 2 * 2000 / 15  # roughly even: no minute takes twice its share
    assert first_run_at("org/m1@main", _polled("org/m1", 900, long_ago), now) == times[1]  # stable across restarts


def test_first_poll_is_immediate_and_a_recent_one_keeps_its_due_time() -> None:
    """A watch never polled is polled at once; one polled recently waits for its natural due time."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert first_run_at("org/new@main", _watch("org/new", 900), now) == now
    recent = _polled("org/a", 900, now - timedelta(seconds=100))
    assert first_run_at("org/a@main", recent, now) == now + timedelta(seconds=800)


def test_late_runs_are_not_dropped() -> None:
    """No job carries APScheduler's 1-second misfire grace: a run that starts late still runs."""
    scheduler = Scheduler(lambda: [_watch("org/a")], lambda repo_id, branch: None, jitter_s=0)
    scheduler.add_periodic("__osv_recheck__", lambda: None, 86400, datetime.now(UTC) + timedelta(days=1))
    scheduler.start()
    try:
        jobs = scheduler._scheduler.get_jobs()
    finally:
        scheduler.stop()
    assert {job.id for job in jobs} == {"org/a@main", "__osv_recheck__", "__sync__"}
    assert all(job.misfire_grace_time is None and job.coalesce for job in jobs)


def _polled(repo_id: str, interval_s: int, at: datetime) -> Watch:
    return Watch(repo_id=repo_id, branch="main", interval_s=interval_s, last_polled_at=at)


class _Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class _Watches:
    """A watch list with a version, counting how often each is read (the scheduler's store)."""

    def __init__(self, watches: list[Watch]) -> None:
        self.watches = watches
        self.version = 1
        self.reads = 0
        self.version_reads = 0

    def list(self) -> list[Watch]:
        self.reads += 1
        return list(self.watches)

    def current_version(self) -> int:
        self.version_reads += 1
        return self.version


def test_an_unchanged_version_reads_no_watch_list() -> None:
    """While the watch-list version stays put, a sync or a trigger for an unknown watch reads only the version."""
    store = _Watches([_watch("org/a"), _watch("org/b")])
    scheduler = Scheduler(store.list, lambda repo_id, branch: None, jitter_s=0, version=store.current_version)
    assert scheduler.sync() is True
    for _ in range(5):
        assert scheduler.sync() is False
    assert scheduler.trigger("org/unknown", "main") is False
    assert (store.reads, store.version_reads) == (1, 7)
    assert set(scheduler.intervals) == {"org/a@main", "org/b@main"}


def test_a_moved_version_adds_and_drops_jobs_one_by_one() -> None:
    """When the version moves the list is read once and only the jobs that changed are touched."""
    store = _Watches([_watch("org/a", 60), _watch("org/b", 60)])
    scheduler = Scheduler(store.list, lambda repo_id, branch: None, jitter_s=0, version=store.current_version)
    scheduler.sync()
    kept = scheduler._scheduler.get_job("org/a@main")
    store.watches = [_watch("org/a", 60), _watch("org/c", 120)]
    store.version += 1
    assert scheduler.trigger("org/c", "main") is True  # a webhook for a watch the API just added
    assert scheduler.intervals == {"org/a@main": 60, "org/c@main": 120}
    assert scheduler._scheduler.get_job("org/a@main") is kept  # untouched, its due time too
    assert store.reads == 2


def test_a_failing_version_read_keeps_the_jobs() -> None:
    """A version that cannot be read (None) leaves the jobs as they are and reads no list."""
    store = _Watches([_watch("org/a", 60)])
    answer: dict[str, int | None] = {"version": 1}
    scheduler = Scheduler(store.list, lambda repo_id, branch: None, jitter_s=0, version=lambda: answer["version"])
    scheduler.sync()
    answer["version"] = None
    store.watches = []
    assert scheduler.sync() is False
    assert scheduler.intervals == {"org/a@main": 60} and store.reads == 1


def test_polls_not_started_within_interval_and_jitter_are_overdue_and_logged() -> None:
    """A watch whose poll has not started within interval + jitter + grace is overdue, with its age; a poll clears it."""
    import structlog

    now = datetime(2026, 1, 1, tzinfo=UTC)
    clock = _Clock(now)
    recent = now - timedelta(seconds=10)
    watches = [_polled("org/a", 600, recent), _polled("org/b", 600, recent), _polled("org/c", 3600, recent)]
    scheduler = Scheduler(lambda: watches, lambda repo_id, branch: None, jitter_s=30, clock=clock)
    scheduler.sync()
    assert scheduler.poll_state() == {"polls_scheduled": 3, "polls_overdue": 0, "oldest_overdue_s": 0.0}
    # org/a and org/b were due at now + 590 s; with 30 s jitter and 60 s grace they are overdue after now + 680 s.
    clock.now = now + timedelta(seconds=680)
    assert scheduler.poll_state()["polls_overdue"] == 0
    clock.now = now + timedelta(seconds=700)
    with structlog.testing.capture_logs() as logs:
        state = scheduler.check_overdue()
    assert state == {"polls_scheduled": 3, "polls_overdue": 2, "oldest_overdue_s": 20.0}
    assert [(e["event"], e["overdue"]) for e in logs] == [("polls_overdue", 2)]
    scheduler._run("org/a@main", "org/a", "main")  # the poll starts: due again one interval later
    scheduler._run("org/b@main", "org/b", "main")
    with structlog.testing.capture_logs() as logs:
        assert scheduler.check_overdue()["polls_overdue"] == 0
    assert [e["event"] for e in logs] == ["polls_caught_up"]


def test_the_grace_is_a_tenth_of_the_interval_within_bounds() -> None:
    """Grace before a late poll counts as overdue: 5 s at least, a minute at most, a tenth of the interval between."""
    from tracker.polling.scheduler import overdue_grace_s

    assert [overdue_grace_s(s) for s in (10, 300, 3600)] == [5.0, 30.0, 60.0]



def test_a_triggered_poll_does_not_queue_behind_busy_scheduled_ones() -> None:
    """With every scheduled-poll thread busy, a Hub webhook's poll still runs at once."""
    from tracker.polling.scheduler import POLL_THREADS

    now = datetime.now(UTC)
    watches = [_watch(f"org/busy{i:02d}") for i in range(POLL_THREADS)] + [_polled("org/hooked", 3600, now)]
    release = threading.Event()
    busy = threading.Semaphore(0)
    hooked = threading.Event()

    def poll(repo_id: str, branch: str) -> None:
        if repo_id == "org/hooked":
            hooked.set()
            return
        busy.release()
        release.wait(10)

    scheduler = Scheduler(lambda: watches, poll, jitter_s=0)
    scheduler.start()
    try:
        for _ in range(POLL_THREADS):
            assert busy.acquire(timeout=10)  # every scheduled-poll thread is held
        assert scheduler.trigger("org/hooked", "main") is True
        assert hooked.wait(10), "the triggered poll waited for the scheduled ones"
    finally:
        release.set()
        scheduler.stop()


def test_triggers_during_a_poll_run_after_it_one_at_a_time() -> None:
    """A second webhook while the first's poll is in flight is not dropped: it polls once the first is done, never alongside."""
    now = datetime.now(UTC)
    started = threading.Semaphore(0)
    release = threading.Event()
    active: list[int] = []
    peak: list[int] = []
    lock = threading.Lock()

    def poll(repo_id: str, branch: str) -> None:
        with lock:
            active.append(1)
            peak.append(len(active))
        started.release()
        release.wait(10)
        with lock:
            active.pop()

    scheduler = Scheduler(lambda: [_polled("org/a", 3600, now)], poll, jitter_s=0)
    scheduler.start()
    try:
        assert scheduler.trigger("org/a", "main")
        assert started.acquire(timeout=10)
        assert scheduler.trigger("org/a", "main")
        assert not started.acquire(timeout=0.5)  # the second waits for the first
        release.set()
        assert started.acquire(timeout=10)  # and then runs
    finally:
        release.set()
        scheduler.stop()
    assert max(peak) == 1


def test_a_trigger_that_is_not_urgent_moves_the_watch_job_forward() -> None:
    """`urgent=False` (a listing pass) polls at once on the scheduled polls' threads, through the watch's own job."""
    polled = threading.Event()
    scheduler = Scheduler(lambda: [_polled("org/a", 3600, datetime.now(UTC))], lambda repo_id, branch: polled.set(), jitter_s=0)
    scheduler.start()
    try:
        assert not polled.is_set()
        assert scheduler.trigger("org/a", "main", urgent=False) is True
        assert polled.wait(10)
        assert scheduler.trigger("org/gone", "main", urgent=False) is False
    finally:
        scheduler.stop()
    assert scheduler.trigger("org/a", "main") is False  # stopped: no new polls


def test_a_listing_trigger_during_the_watch_jobs_own_poll_runs_once_after_it() -> None:
    """A listing's triggers (`urgent=False`) that come while the watch's own scheduled poll is in flight give
    exactly one more poll, once that poll ends (APScheduler used to skip it until the next interval)."""
    started = threading.Semaphore(0)
    release = threading.Event()
    active: list[int] = []
    peak: list[int] = []
    lock = threading.Lock()

    def poll(repo_id: str, branch: str) -> None:
        with lock:
            active.append(1)
            peak.append(len(active))
        started.release()
        release.wait(10)
        with lock:
            active.pop()

    scheduler = Scheduler(lambda: [_watch("org/a")], poll, jitter_s=0)  # never polled: its job runs at start
    scheduler.start()
    try:
        assert started.acquire(timeout=10)  # the watch's own poll is in flight
        assert scheduler.trigger("org/a", "main", urgent=False) is True
        assert scheduler.trigger("org/a", "main", urgent=False) is True  # coalesced with the one queued
        assert not started.acquire(timeout=0.5)  # it waits for the poll in flight
        release.set()
        assert started.acquire(timeout=10), "the listing's trigger was skipped until the next interval"
        assert not started.acquire(timeout=1)  # and only one more
    finally:
        release.set()
        scheduler.stop()
    assert len(peak) == 2 and max(peak) == 1
