"""The daemon's scheduler: one job per watch, synced from the store, triggered at once by webhooks."""

from __future__ import annotations

import threading

from storage.models import Watch
from tracker.scheduler import Scheduler


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
