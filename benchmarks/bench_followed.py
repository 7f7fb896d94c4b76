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
Run: python -m benchmarks run followed   (size: repos, default 1,000)
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

from benchmarks.declare import Benchmark, Figure, detail, run_alone
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
ONE_PASS_PER_ORG = "the issue's baseline: one listing pass per followed org a round"
BENCHMARK = Benchmark(
    name="followed",
    about="Hub requests a minute for 1,000 repos in followed orgs (20 and 200 orgs) when nothing changes, and time to ingest a move",
    tags=("slow", "polling"),
    size="repos (default 1,000)",
    small=200,
    timeout_s=1200,
    figures=tuple(f for orgs, goal in GOALS.items() for f in (
        Figure(f"{orgs} orgs: Hub requests a minute, listing + reconcile", "req/min", goal=goal, baseline=float(orgs),
               baseline_at=ONE_PASS_PER_ORG),
        Figure(f"{orgs} orgs: listing requests a minute, steady", "req/min", baseline=float(orgs), baseline_at=ONE_PASS_PER_ORG),
        Figure(f"{orgs} orgs: CPU a round", "ms"),
        Figure(f"{orgs} orgs: a moved repo ingested within, worst", "intervals", goal=2.0))),
)


def _admin(endpoint: str, path: str, method: str = "GET") -> object:
    request = urllib.request.Request(f"{endpoint}/_replay/{path}", method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read())


def _listing_requests(endpoint: str) -> int:
    requests = _admin(endpoint, "requests")
    _admin(endpoint, "reset-requests", "POST")
    return len(requests)  # type: ignore[arg-type]


def run(orgs: int, n: int = N) -> dict[str, float]:
    server = subprocess.Popen(
        [sys.executable, "-m", "tracker.standins.replay", "--port", "0", "--no-bundled", "--synthetic", str(n),
         "--synthetic-orgs", str(orgs)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        endpoint = server.stdout.readline().strip()  # type: ignore[union-attr]
        with tempfile.TemporaryDirectory() as tmp:
            return _run(endpoint, Path(tmp), orgs, n)
    finally:
        server.terminate()
        server.wait()


def _run(endpoint: str, tmp: Path, orgs: int, N: int) -> dict[str, float]:  # noqa: N803 - the figure's N
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

    total = per_min + reconcile_per_min
    detail(f"{N} repos in {orgs} followed orgs: before {old_per_round} requests a round; first round {first}; steady {rounds}; "
           f"reconcile {reconcile_per_min:.2f} a minute; moved ingested after {sorted(round(v, 2) for v in ingested.values())} intervals")
    app.store.engine.dispose()
    return {f"{orgs} orgs: Hub requests a minute, listing + reconcile": total,
            f"{orgs} orgs: listing requests a minute, steady": per_min, f"{orgs} orgs: CPU a round": cpu * 1000,
            f"{orgs} orgs: a moved repo ingested within, worst": worst}


def measure(size: int | None = None) -> dict[str, float]:
    figures: dict[str, float] = {}
    for orgs in GOALS:
        figures |= run(orgs, size or N)
    return figures


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
