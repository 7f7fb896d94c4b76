"""A watch whose repo is gone or disabled stops being polled on its own after `[poll] park_after` polls in a row, and is
woken when the listing or a Hub webhook shows the repo again (the replay's `set_state`, the real huggingface_hub client)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from tests.support.settings import settings_for
from tracker.cli.app import App
from tracker.cli.builder import Polling
from tracker.polling.listing import ListingJob

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

BROKEN = "hubwatch-tests/broken-model"


@pytest.fixture(autouse=True)
def no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)


@pytest.fixture
def parked(replay, database_url: str) -> Iterator[App]:
    """BROKEN watched at its first commit, then deleted and polled `park_after` (2) times: parked."""
    app = App(settings_for(replay.endpoint, database_url, poll={"park_after": 2, "parked_recheck": "7d", "listing": "on"}))  # type: ignore[arg-type]
    replay.set_head(BROKEN, 1)
    app.store.watches.add_watch(BROKEN, "main", 900)
    assert [o.status for o in app.poller.poll()] == ["ingested"]
    replay.set_state(BROKEN, "deleted")
    [first] = app.poller.poll()
    watch = app.store.watches.get_watch(BROKEN)
    assert first.repo_state == "gone" and watch.next_retry_at < app.clock() + timedelta(days=1)  # backing off, not parked
    assert not watch.state_detail.get("parked")
    app.poller.poll()
    yield app
    app.store.engine.dispose()


def test_a_gone_repo_is_parked_after_park_after_polls_and_costs_nothing(parked: App, replay) -> None:
    """After park_after polls found it gone, its next poll is parked_recheck away, `watch list` says parked, and the
    scheduler's poll of it makes no request."""
    from tracker.cli.output import watch_text

    watch = parked.store.watches.get_watch(BROKEN)
    assert watch.next_retry_at > parked.clock() + timedelta(days=6) and watch.state_detail["parked"] is True
    assert "(parked: " in watch_text(watch)
    replay.reset_requests()
    assert parked.poller.poll_if_due(BROKEN, "main") is None
    assert replay.count_requests() == 0


def test_the_listing_wakes_a_parked_watch_when_the_repo_is_listed_again(parked: App, replay) -> None:
    """Restored (listed again at the same commit), the repo is handed to the scheduler by the next listing pass, its
    watch due again: the poll that follows stores nothing twice and tells `repo.restored`."""
    triggered: list[tuple[str, str]] = []
    job = ListingJob(parked.settings, parked.store.listing, parked.hub, lambda r, b: triggered.append((r, b)))
    job()  # the mark: the repo is not listed while gone
    assert triggered == []
    replay.set_state(BROKEN, "active")
    job()
    assert (BROKEN, "main") in triggered
    assert parked.store.watches.get_watch(BROKEN).next_retry_at is None
    outcome = parked.poller.poll_if_due(BROKEN, "main")
    assert outcome is not None and outcome.status == "unchanged" and outcome.repo_state == "active"
    assert [e.kind for e in parked.store.history.list_events(BROKEN)][0] == "repo.restored"


def test_a_hub_webhook_wakes_a_parked_watch(parked: App) -> None:
    """A Hub webhook's trigger for the repo makes its parked watch due before handing it to the scheduler."""

    class Recording:
        def __init__(self) -> None:
            self.asked: list[tuple[str, str]] = []

        def trigger(self, repo_id: str, branch: str, head_sha: str | None = None) -> bool:
            self.asked.append((repo_id, branch))
            return True

    scheduler = Recording()
    polling = Polling(scheduler, parked.store.listing.wake_parked)  # type: ignore[arg-type]
    assert polling.trigger(BROKEN, None) is True
    assert scheduler.asked == [(BROKEN, "main")]
    assert parked.store.watches.get_watch(BROKEN).next_retry_at is None
