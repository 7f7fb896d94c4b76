"""The daemon's scheduler: one job per watch, synced from the store, triggered at once by webhooks."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from storage.models import Watch
from tracker.scheduler import Scheduler, first_run_at


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
