"""Figure: what repos the Hub deleted cost, how soon their return is noticed, and how soon a rename is followed.

100 watched repos on the replay (in this process; requests counted at the server, by path), polled by the real
Poller and ListingJob on a simulated clock that moves a minute at a time ([poll] defaults: every watch due each
15 minutes, retry_min 1m doubling, park_after 3, parked_recheck 7d; listing "on" every minute). Steps:
  1. the 100 watched and stored at their first commit; a first listing pass sets its mark;
  2. the Hub deletes all 100: minutes pass until every watch is parked; the Hub requests each repo cost on its own
     until then (beyond the listing) are "requests until known gone";
  3. a further simulated hour: the Hub requests made for the 100 beyond the listing's own pages (goal 0: parked
     watches are not polled on their own, the listing sees them come back);
  4. 10 of them restored (one with a new commit) between two listing passes: how many passes until each watch is
     active again (goal: the first, one listing interval), and the new commit stored;
  5. 10 repos renamed on the Hub, each announced by a Hub webhook `action: "move"` POSTed to the real HTTP server
     (uvicorn on loopback, its trigger polling at once as the daemon's does): the wall time from the POST to the watch
     and its history under the new name (`moved`), found through the Hub's 307.
Run: python -m benchmarks run repo_lifecycle   (size: watched repos, default 100)
"""

from __future__ import annotations

import json
import queue
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tests.support.served import HOOK_SECRET, serve
from tracker.cli.app import App
from tracker.cli.logs import configure_logging
from tracker.config import settings_from_mapping
from tracker.polling.listing import ListingJob
from tracker.standins.replay.control import ReplayServer
from tracker.standins.replay.history import synthetic_history

N = 100
RESTORED = 10
RENAMED = 10
INTERVAL_MIN = 15  # [poll] default_interval
BENCHMARK = Benchmark(
    name="repo_lifecycle",
    about="Repos the Hub deleted, restored or renamed: requests spent on gone repos, time to notice a return or a rename",
    tags=("slow", "polling"),
    size="watched repos (default 100)",
    small=20,
    timeout_s=300,
    figures=(
        Figure("Hub requests an hour on 100 gone repos beyond the listing, once known gone", "req/h", goal=0.0,
               baseline=16.7, baseline_at="issue 35: gone repos polled forever, down to one request per retry_max "
               "(6h) each: 100 / 6", note="scaled to 100 repos"),
        Figure("Hub requests per repo until known gone (parked)", "requests"),
        Figure("simulated minutes until all are parked", "min"),
        Figure("listing passes until a restored repo is active again (worst of 10)", "intervals", goal=1.0,
               baseline=360.0, baseline_at="issue 35: up to retry_max (6h) with the defaults, in 1m intervals"),
        Figure("Hub move webhook to the watch following the new name, median", "ms"),
        Figure("Hub move webhook to the watch following the new name, worst of 10", "ms", goal=5000.0, margin=1.0),
    ),
)


class SimulatedClock:
    """The clock the App and the listing read: moved by hand, a minute at a time."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, minutes: int = 1) -> None:
        self.now += timedelta(minutes=minutes)


def _counts(replay: ReplayServer) -> tuple[int, int]:
    """(listing requests, other requests) since the last reset; the log is reset."""
    requests = replay.requests
    replay.reset_requests()
    listing = sum(1 for r in requests if r.path.rstrip("/") == "/api/models")
    return listing, len(requests) - listing


def measure(size: int | None = None) -> dict[str, float]:
    n = size or N
    configure_logging(settings_from_mapping({"log": {"level": "error"}}, env={}, source="bench").log)
    folder = Path(tempfile.mkdtemp(prefix="hubwatch-bench-lifecycle-"))
    repos = [f"bench-lifecycle/model-{i:04d}" for i in range(n)]
    clock = SimulatedClock()
    with ReplayServer(roots=[]) as replay:
        for repo_id in repos:
            replay.add_repo(synthetic_history(repo_id, commits=2))
            replay.set_head(repo_id, 1)
        settings = settings_from_mapping(
            {"hub": {"endpoint": replay.endpoint}, "storage": {"url": f"sqlite:///{folder / 'hubwatch.db'}"},
             "osv": {"enabled": False}, "poll": {"listing": "on"}, "log": {"level": "error"}},
            env={}, source="bench")
        app = App(settings, clock=clock)
        for repo_id in repos:
            app.store.watches.add_watch(repo_id, "main", INTERVAL_MIN * 60)
        assert all(o.status == "ingested" for o in app.poller.poll())
        woken: list[tuple[str, str]] = []

        def trigger(repo_id: str, branch: str) -> None:  # the scheduler's trigger: poll now (if due)
            woken.append((repo_id, branch))
            app.poller.poll_if_due(repo_id, branch)

        listing = ListingJob(settings, app.store.listing, app.hub, trigger, clock=clock)
        listing()  # the mark
        _counts(replay)

        def minute(m: int) -> tuple[int, int]:
            """One simulated minute: the listing pass, then each watch due by the 15-minute schedule."""
            listing()
            if m % INTERVAL_MIN == 0:
                for repo_id in repos:
                    app.poller.poll_if_due(repo_id, "main")
            clock.advance()
            return _counts(replay)

        # 2. deleted: until every watch is parked
        for repo_id in repos:
            replay.set_state(repo_id, "deleted")
        own_until_parked, minutes = 0, 0
        while not all((w.state_detail or {}).get("parked") for w in app.store.watches.list_watches()):
            own_until_parked += minute(minutes)[1]
            minutes += 1
            if minutes > 24 * 60:
                raise RuntimeError("the gone repos were not parked within a simulated day")
        parked_after = minutes
        print(f"all {n} parked after {minutes} simulated minutes, {own_until_parked} own requests")

        # 3. a simulated hour once known gone
        listing_hour = own_hour = 0
        for m in range(60):
            listed, own = minute(minutes + m)
            listing_hour, own_hour = listing_hour + listed, own_hour + own
        minutes += 60
        print(f"the hour after: {own_hour} requests beyond the listing, {listing_hour} listing requests (its pages)")

        # 4. restored between two listing passes (the first with a new commit): passes until active again
        back = repos[:RESTORED]
        replay.set_state(back[0], "active")
        replay.advance(back[0])
        for repo_id in back[1:]:
            replay.set_state(repo_id, "active")
        found: dict[str, int] = {}  # repo -> the listing pass (1: the first after the restore) that made it active
        for pass_no in range(1, 11):
            minute(minutes)
            minutes += 1
            states = {w.repo_id: w.repo_state for w in app.store.watches.list_watches() if w.repo_id in back}
            found.update({r: pass_no for r in back if r not in found and states[r] == "active"})
            if len(found) == len(back):
                break
        intervals = [float(found.get(r, float("inf"))) for r in back]
        new_commit_stored = app.store.history.has_revision(back[0], replay.head_sha(back[0]))
        print(f"restored: active again after {intervals} listing passes; the new commit stored: {new_commit_stored}")

        # 5. a Hub `move` webhook to the watch following the new name, through the real HTTP server
        clock.now = datetime.now(UTC)  # real time from here: the webhook's path is timed
        outcomes: queue.Queue[object] = queue.Queue()

        def hooked(repo_id: str, branch: str | None, head_sha: str | None = None) -> bool:
            thread = threading.Thread(target=lambda: outcomes.put(app.poller.poll_if_due(repo_id, branch or "main", head_sha)))
            thread.start()
            return True

        moved = repos[RESTORED:RESTORED + RENAMED]
        times_ms = []
        with serve(app.store, hub_webhook_secret=HOOK_SECRET, trigger=hooked) as served, served.client() as client:
            for repo_id in moved:
                new = repo_id.replace("model-", "renamed-")
                replay.set_state(repo_id, "active")
                app.store.watches.record_poll_ok(app.store.watches.get_watch(repo_id).id)  # as if restored earlier
                replay.rename(repo_id, new)
                body = {"event": {"action": "move", "scope": "repo"},
                        "repo": {"type": "model", "name": repo_id, "id": "65f0c0ffee", "private": False,
                                 "headSha": replay.head_sha(new), "owner": {"id": "61a0c0ffee"}},
                        "movedTo": {"name": new, "owner": "61a0c0ffee"}, "webhook": {"id": "6601c0ffee", "version": 3}}
                started = time.perf_counter()
                answer = client.post("/hooks/hub", content=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", "X-Webhook-Secret": HOOK_SECRET})
                assert answer.status_code == 202, answer.text
                outcome = outcomes.get(timeout=60)
                times_ms.append((time.perf_counter() - started) * 1000)
                watch = app.store.watches.get_watch(new)  # the watch and its history follow the new name
                if getattr(outcome, "history_moved_to", None) != new or watch is None or watch.repo_state != "moved":
                    raise RuntimeError(f"{repo_id}: the move webhook's poll did not follow the rename: {outcome}")
        print(f"move webhook to moved: {[round(t) for t in times_ms]} ms")
    detail(f"{n} repos; {listing_hour} listing requests in the hour once known gone (one page a pass)")
    return {
        "Hub requests an hour on 100 gone repos beyond the listing, once known gone": own_hour * 100 / n,
        "Hub requests per repo until known gone (parked)": own_until_parked / n,
        "simulated minutes until all are parked": float(parked_after),
        "listing passes until a restored repo is active again (worst of 10)": max(intervals) if new_commit_stored else float("inf"),
        "Hub move webhook to the watch following the new name, median": statistics.median(times_ms),
        "Hub move webhook to the watch following the new name, worst of 10": max(times_ms),
    }


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
