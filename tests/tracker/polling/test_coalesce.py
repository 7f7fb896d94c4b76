"""Hub webhook bursts (tracker/polling/coalesce.py): however many triggers arrive for a watch, one poll of it
in flight and one waiting, in one process and in a worker leasing watches. Polls are real ones, against the
Hub replay server, whose request log gives each poll's cost."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from tracker.cli.app import App
from tracker.polling.coalesce import PendingPolls
from tracker.polling.scheduler import Scheduler
from tracker.polling.shared import SharedScheduler
from tracker.standins.replay.control import ReplayServer

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

REPO = "hubwatch-tests/every-kind"
BURST = 50


class CountedPolls:
    """The real poll of a watch, with the Hub requests each one cost (polls of one watch never overlap, so
    the replay's request count before and after is that poll's). `hold()`: the next poll says it started and
    waits for a go before it makes any request."""

    def __init__(self, app: App, replay: ReplayServer) -> None:
        self.costs: list[int] = []
        self._app, self._replay = app, replay
        self._hold: tuple[threading.Event, threading.Event] | None = None

    def hold(self) -> tuple[threading.Event, threading.Event]:
        self._hold = (threading.Event(), threading.Event())
        return self._hold

    def __call__(self, repo_id: str, branch: str) -> None:
        if self._hold is not None:
            started, go = self._hold
            self._hold = None
            started.set()
            assert go.wait(30)
        before = self._replay.count_requests()
        self._app.poller.poll_if_due(repo_id, branch)
        self.costs.append(self._replay.count_requests() - before)


def _moved_watch(app: App, replay: ReplayServer) -> None:
    """A watch with its baseline stored, whose repo then moves by one commit on the Hub."""
    replay.set_head(REPO, 1)
    app.store.watches.add_watch(REPO, "main", 3600)
    [baseline] = app.poller.poll([REPO])
    assert baseline.status != "failed"
    replay.advance(REPO)


def _burst(trigger: Callable[[str, str], bool], n: int = BURST) -> list[bool]:
    """`n` triggers for the watch from `n` threads released at once, as the Hub's retries and duplicates
    arrive; every one is answered as accepted."""
    barrier = threading.Barrier(n)
    answers: list[bool] = []

    def one() -> None:
        barrier.wait(10)
        answers.append(trigger(REPO, "main"))

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return answers


def _stored(app: App) -> int:
    return len(app.store.history.list_revisions(REPO))


def test_pending_polls_let_one_trigger_through_until_its_poll_starts() -> None:
    """A trigger queues a poll unless one waits already; a poll starting covers them all; a forgotten one frees the slot."""
    pending = PendingPolls()
    assert pending.ask("a@main") and not pending.ask("a@main") and pending.ask("b@main")
    assert pending.start("a@main") and not pending.start("a@main")
    assert pending.ask("a@main")
    pending.forget("a@main")
    assert pending.ask("a@main")


@pytest.mark.parametrize(
    ("heads", "kept"),
    [
        (["a" * 40], "a" * 40),  # one webhook: its head
        (["a" * 40, "a" * 40], "a" * 40),  # the Hub's retry of it: the same head
        (["a" * 40, "b" * 40], None),  # two moves, maybe out of order: the poll asks the Hub
        (["a" * 40, None], None),  # a trigger naming no head (the listing's): the poll asks the Hub
        ([None, "a" * 40], None),
    ],
)
def test_a_waiting_poll_keeps_the_head_only_while_its_triggers_agree(heads: list[str | None], kept: str | None) -> None:
    """The head the waiting poll is handed is the one every trigger before it named, else None."""
    pending = PendingPolls()
    asked = [pending.ask("a@main", head) for head in heads]
    assert asked == [True] + [False] * (len(heads) - 1)
    assert pending.begin("a@main") == (True, kept)
    assert pending.begin("a@main") == (False, None)


def test_a_triggered_poll_is_handed_the_webhook_head() -> None:
    """Scheduler.trigger(head_sha=...) reaches the poll as `head_sha` (polls with no head named are called
    with (repo_id, branch) alone: the other tests' two-argument polls)."""
    from storage.watches import ScheduledWatch

    calls: list[tuple[tuple[object, ...], dict[str, object]]] = []
    done = threading.Event()

    def poll(*args: object, **kwargs: object) -> bool:
        calls.append((args, kwargs))
        done.set()
        return True

    scheduler = Scheduler(lambda: [ScheduledWatch(REPO, "main", 3600, None)], poll, jitter_s=0)
    scheduler.sync()
    try:
        assert scheduler.trigger(REPO, "main", head_sha="c" * 40)
        assert done.wait(15)
    finally:
        scheduler.stop()
    assert calls == [((REPO, "main"), {"head_sha": "c" * 40})]


def test_a_burst_of_hub_webhooks_costs_one_poll_in_one_process(app: App, replay: ReplayServer) -> None:
    """50 triggers for one moved repo at once (nothing polling it): every one accepted, the Hub asked for
    one poll's requests, and at most one more head check (a trigger that came while the poll ran); the
    commit is stored once."""
    _moved_watch(app, replay)
    polls = CountedPolls(app, replay)
    scheduler = Scheduler(app.poller.scheduled_watches, polls, jitter_s=0, requests=app.store.leases)
    scheduler.sync()
    try:
        assert _burst(scheduler.trigger) == [True] * BURST
    finally:
        scheduler.stop()  # the polls under way and the one waiting finish first
    assert 1 <= len(polls.costs) <= 2, polls.costs
    assert polls.costs[0] > 1 and polls.costs[1:] in ([], [1])  # the ingest, then an unchanged head
    assert _stored(app) == 2


def test_a_burst_during_a_poll_costs_that_poll_and_one_more(app: App, replay: ReplayServer) -> None:
    """A poll of the watch is under way (before its head check) when 49 more triggers arrive: exactly one
    more poll follows it, not 49 (the commit could have landed after the running poll read the head)."""
    _moved_watch(app, replay)
    polls = CountedPolls(app, replay)
    started, go = polls.hold()
    scheduler = Scheduler(app.poller.scheduled_watches, polls, jitter_s=0, requests=app.store.leases)
    scheduler.sync()
    try:
        assert scheduler.trigger(REPO, "main")
        assert started.wait(10)
        assert _burst(scheduler.trigger, BURST - 1) == [True] * (BURST - 1)
        go.set()
    finally:
        go.set()
        scheduler.stop()
    assert len(polls.costs) == 2 and polls.costs[1] == 1, polls.costs
    assert _stored(app) == 2
    assert app.store.watches.get_watch(REPO).next_poll_at is None  # type: ignore[union-attr]  # the request was cleared


def test_a_burst_at_a_worker_leasing_watches_costs_one_poll(app: App, replay: ReplayServer) -> None:
    """Shared polling (leases in the database): 50 triggers at once claim the watch once; at most one more
    poll is left due (a trigger that came while the poll ran), taken by the worker's next round, then
    nothing is due. The commit is stored once, no lease is left behind."""
    from datetime import UTC, datetime

    _moved_watch(app, replay)
    polls = CountedPolls(app, replay)
    worker = SharedScheduler(app.poller.scheduled_watches, polls, 0, app.store.leases, 15, worker="w",
                             version=app.poller.watch_list_version)
    try:
        worker.sync()  # the watch's next poll is an hour after its baseline: not due
        assert _burst(worker.trigger) == [True] * BURST
        assert _wait_idle(worker, app)
        after = worker.tick()
        assert worker.tick() == 0
    finally:
        worker.stop()
    assert after in (0, 1) and len(polls.costs) == 1 + after, polls.costs
    assert polls.costs[0] > 1 and polls.costs[1:] in ([], [1])
    assert _stored(app) == 2
    assert app.store.leases.lease_counts(datetime.now(UTC)) == {}


def test_a_burst_while_a_worker_polls_the_watch_leaves_one_poll_due(app: App, replay: ReplayServer) -> None:
    """Shared polling: 49 triggers while the worker's poll of the watch is under way leave it due once (one
    more poll on the next round), with no other claim of it meanwhile."""
    _moved_watch(app, replay)
    polls = CountedPolls(app, replay)
    started, go = polls.hold()
    worker = SharedScheduler(app.poller.scheduled_watches, polls, 0, app.store.leases, 15, worker="w",
                             version=app.poller.watch_list_version)
    try:
        worker.sync()
        assert worker.trigger(REPO, "main")
        assert started.wait(10)
        assert _burst(worker.trigger, BURST - 1) == [True] * (BURST - 1)
        go.set()
        assert _wait_idle(worker, app)
        assert worker.tick() == 1
        assert worker.tick() == 0
    finally:
        go.set()
        worker.stop()
    assert len(polls.costs) == 2 and polls.costs[1] == 1, polls.costs
    assert _stored(app) == 2


def _wait_idle(worker: SharedScheduler, app: App) -> bool:
    """The worker's polls under way have finished and given their leases back (in that order)."""
    from datetime import UTC, datetime

    from tests.support.waiting import wait_until

    return wait_until(lambda: worker.poll_state()["polls_in_flight"] == 0
                      and app.store.leases.lease_counts(datetime.now(UTC)) == {}, timeout_s=30)
