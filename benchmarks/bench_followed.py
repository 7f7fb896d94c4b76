"""Figure (issue 27, item 1): Hub requests a minute for followed orgs (`watch add 'ORG/*'`) when nothing changes,
and how soon a repo that moves is ingested, against the baseline of one listing pass per followed org a round
("20 requests a minute" for 20 orgs at a 1-minute listing interval).

The replay server runs in its own process (`--synthetic 1000 --synthetic-orgs K`: 1,000 repos in K orgs);
requests are counted at the server. The daemon's listing job runs in this process on a simulated clock (one
round per simulated minute, as APScheduler would call it): 1,000 watches stored at their heads (as after their
baselines), every org followed. Steps, for K = 20 and K = 200:
  1. the old cost: one pass per org (what each round cost before), counted once;
  2. the first round (each org listed once on its own, beside the first pass over every model);
  3. ten rounds with nothing changing: requests a round; plus the per-repo reconcile the plan gives these
     watches (auto: a day), as requests a minute;
  4. five repos moved half-way through a round, then rounds until each is ingested (polled through the
     real pipeline): the simulated time from the move to its ingest, in listing intervals.
Run: .venv/bin/python benchmarks/bench_followed.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlmodel import select

from storage.listing_state import author_scope
from storage.models import Watch
from tests.support.clock import FakeClock
from tracker.cli.app import App
from tracker.cli.logs import configure_logging
from tracker.config import settings_from_mapping
from tracker.polling.listing import ListingJob, ListingPass, follow_author
from tracker.standins.replay.__main__ import synthetic_ids
from tracker.standins.replay.history import synthetic_history

N = 1000
INTERVAL_S = 60
GOALS = {20: 3.0, 200: 5.0}
MOVED = 5


def _admin(endpoint: str, path: str, method: str = "GET") -> object:
    request = urllib.request.Request(f"{endpoint}/_replay/{path}", method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read())


def _listing_requests(endpoint: str) -> int:
    requests = _admin(endpoint, "requests")
    _admin(endpoint, "reset-requests", "POST")
    return len(requests)  # type: ignore[arg-type]


def run(orgs: int) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "tracker.standins.replay", "--port", "0", "--no-bundled", "--synthetic", str(N),
         "--synthetic-orgs", str(orgs)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        endpoint = server.stdout.readline().strip()  # type: ignore[union-attr]
        with tempfile.TemporaryDirectory() as tmp:
            _run(endpoint, Path(tmp), orgs)
    finally:
        server.terminate()
        server.wait()


def _run(endpoint: str, tmp: Path, orgs: int) -> None:
    settings = settings_from_mapping(
        {"hub": {"endpoint": endpoint}, "storage": {"url": f"sqlite:///{tmp / 'bench.db'}"},
         "osv": {"enabled": False}, "log": {"level": "warning"}, "poll": {"listing_interval": f"{INTERVAL_S}s", "jitter": "0"}},
        env={}, source="bench",
    )
    configure_logging(settings.log)
    clock = FakeClock()
    app = App(settings, clock=clock)
    listings = app.store.listing
    ids = synthetic_ids(N, orgs)
    authors = sorted({r.split("/")[0] for r in ids})
    for author in authors:  # `watch add 'ORG/*'`: its listing now, its models watched
        follow_author(listings, author, 900, list(app.hub.list_models_by_modification(author)))
    heads = {r: synthetic_history(r, commits=2).commits[0].sha for r in ids}
    with app.store.history.session() as s:
        for watch in s.exec(select(Watch)):
            watch.last_sha, watch.last_polled_at = heads[watch.repo_id], clock()
            s.add(watch)
        s.commit()
    _listing_requests(endpoint)

    followed = set(authors)
    old = ListingPass(listings, app.hub, clock)
    for author in authors:  # what a round cost before: a pass per followed org
        old._scan(author_scope(author), author, followed)
    old_per_round = _listing_requests(endpoint)

    polled: list[str] = []
    job = ListingJob(settings, listings, app.hub, lambda r, b: polled.append(r), clock=clock)
    plan = job.plan(app.store.watches.list_watches())
    reconcile_per_min = sum(60 / s for s in plan.values())
    cpu0 = time.process_time()
    job()
    first = _listing_requests(endpoint)
    rounds = []
    for _ in range(10):
        clock.advance(INTERVAL_S)
        job()
        rounds.append(_listing_requests(endpoint))
    cpu = (time.process_time() - cpu0) / 11
    assert not polled, polled
    per_min = sum(rounds) / len(rounds) * 60 / INTERVAL_S

    moved = ids[:: N // MOVED][:MOVED]
    clock.advance(INTERVAL_S / 2)
    moved_at = clock()
    for repo_id in moved:
        _admin(endpoint, f"advance/{repo_id}", "POST")
    ingested: dict[str, float] = {}
    job_poll = ListingJob(settings, listings, app.hub, lambda r, b: app.poller.poll([r]), clock=clock)
    job_poll.plan(app.store.watches.list_watches())
    for _ in range(4):
        clock.advance(INTERVAL_S / 2 if not ingested and _ == 0 else INTERVAL_S)
        job_poll()
        for repo_id in moved:
            watch = app.store.watches.get_watch(repo_id)
            if repo_id not in ingested and watch is not None and watch.last_sha != heads[repo_id]:
                ingested[repo_id] = (clock() - moved_at).total_seconds() / INTERVAL_S
        if len(ingested) == len(moved):
            break
    worst = max(ingested.values()) if len(ingested) == len(moved) else float("inf")

    goal = GOALS[orgs]
    print(f"{N} repos in {orgs} followed orgs, listing interval {INTERVAL_S}s, nothing changing (replay server)")
    print(f"  before (a pass per org a round): {old_per_round} requests a minute (baseline: {orgs} a minute)")
    print(f"  first round: {first} requests (each org once on its own, beside the first pass over every model)")
    print(f"  steady rounds: {rounds} requests -> {per_min:.2f} a minute; {cpu * 1000:.1f} ms CPU a round")
    print(f"  plus the per-repo reconcile (auto, {min(plan.values()) / 86400:.1f} days): {reconcile_per_min:.2f} a minute")
    total = per_min + reconcile_per_min
    print(f"  total {total:.2f} requests a minute (goal: at most {goal:.0f}; {'met' if total <= goal else 'NOT met'});"
          f" {old_per_round / per_min:.0f}x fewer listing requests than before, {(old_per_round + reconcile_per_min) / total:.1f}x in all")
    print(f"  {MOVED} repos moved half-way through an interval: ingested after {sorted(round(v, 2) for v in ingested.values())}"
          f" intervals (goal: within 2; {'met' if worst <= 2 else 'NOT met'})")
    app.store.engine.dispose()


def main() -> None:
    for orgs in GOALS:
        run(orgs)


if __name__ == "__main__":
    main()
