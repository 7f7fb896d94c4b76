"""Figure: what change detection costs for 10,000 watched repos on the replay server when nothing changes:
Hub requests per minute with the listing ([poll] listing_interval = 1m) against per-repo polling at 15
minutes (the baseline: 10,000 / 15 = 667 requests a minute), and the client CPU time of one listing pass.

The replay server runs in its own process (`python -m tracker.standins.replay --synthetic 10000`), so the CPU
figures are hubwatch's alone. Requests are counted at the server. Steps:
  1. 10,000 watches stored at their current head (as after their baselines), listing mark unset;
  2. the first pass (one Hub page deep: it sets the mark);
  3. ten passes with nothing changing (one per simulated minute): requests and CPU per pass;
  4. 50 repos moved, one pass: requests, and whether exactly those 50 were found;
  5. per-repo polling of a 200-watch sample (Poller.poll): requests per polled repo, scaled to 10,000 at 15m.
The per-repo reconcile is printed apart: with [poll] reconcile_interval = "auto" (the default) it is a day
stretched to one request a minute at most (10,000 watches: every 6.9 days), so listing + reconcile stay at
about 2 a minute (the goal); with a fixed "1d" it would add 10,000 / 1,440 = 6.9 a minute.
Run: python -m benchmarks run listing   (size: watched repos, default 10,000)
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from storage.models import Watch
from tracker.cli.app import App
from tracker.cli.logs import configure_logging
from tracker.config import settings_from_mapping
from tracker.polling.listing import ListingJob, ListingPass
from tracker.standins.replay.__main__ import SYNTHETIC_START, synthetic_ids
from tracker.standins.replay.history import synthetic_history

N = 10_000
PER_REPO_INTERVAL_MIN = 15
RECONCILE_MIN = 1440
SAMPLE = 200
MOVED = 50
PER_REPO = "per-repo polling every 15 minutes (10,000 / 15)"
BENCHMARK = Benchmark(
    name="listing",
    about="Change detection for 10,000 watched repos when nothing changes: the listing against per-repo polling",
    tags=("slow", "polling"),
    size="watched repos (default 10,000)",
    small=1000,
    timeout_s=1800,
    figures=(
        Figure("Hub requests a minute, listing every 1m", "req/min", goal=2.0, baseline=667.0, baseline_at=PER_REPO),
        Figure("Hub requests a minute, listing + reconcile (auto)", "req/min", goal=2.0, baseline=667.0, baseline_at=PER_REPO),
        Figure("Hub requests a minute, per-repo polling every 15m (measured)", "req/min"),
        Figure("CPU of a steady listing pass", "ms"),
        Figure("requests of the pass after 50 moved", "requests"),
        Figure("the 50 moved found exactly (1 yes, 0 no)", "flag", goal=1, direction="higher"),
        Figure("peak RSS, hubwatch side", "MB"),
    ),
)


def _admin(endpoint: str, path: str, method: str = "GET") -> object:
    request = urllib.request.Request(f"{endpoint}/_replay/{path}", method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read())


def _requests(endpoint: str) -> int:
    count = len(_admin(endpoint, "requests"))  # type: ignore[arg-type]
    _admin(endpoint, "reset-requests", "POST")
    return count


def measure(size: int | None = None) -> dict[str, float]:
    n = size or N
    server = subprocess.Popen(
        [sys.executable, "-m", "tracker.standins.replay", "--port", "0", "--no-bundled", "--synthetic", str(n)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        endpoint = server.stdout.readline().strip()  # type: ignore[union-attr]
        with tempfile.TemporaryDirectory() as tmp:
            return _run(endpoint, Path(tmp), n)
    finally:
        server.terminate()
        server.wait()


def _run(endpoint: str, tmp: Path, N: int) -> dict[str, float]:  # noqa: N803 - the figure's N
    settings = settings_from_mapping(
        {"hub": {"endpoint": endpoint}, "storage": {"url": f"sqlite:///{tmp / 'bench.db'}"},
         "osv": {"enabled": False}, "log": {"level": "warning"}},
        env={}, source="bench",
    )
    configure_logging(settings.log)
    app = App(settings)
    ids = synthetic_ids(N)
    now = datetime.now(UTC)
    with app.store.history.session() as s:
        s.add_all(
            Watch(repo_id=r, branch="main", interval_s=PER_REPO_INTERVAL_MIN * 60, source="cli", created_at=now,
                  last_sha=synthetic_history(r, commits=2, start=SYNTHETIC_START + timedelta(minutes=i)).commits[0].sha, last_polled_at=now)
            for i, r in enumerate(ids)
        )
        s.commit()
    listings = app.store.listing
    listing = ListingPass(listings, app.hub)
    _requests(endpoint)

    started = time.process_time()
    [first] = listing.run()
    first_cpu = time.process_time() - started
    first_requests = _requests(endpoint)

    cpu, requests = [], []
    for _ in range(10):
        started = time.process_time()
        [steady] = listing.run()
        cpu.append(time.process_time() - started)
        requests.append(_requests(endpoint))
        assert steady.moved == [] and steady.complete, steady

    moved = ids[::N // MOVED][:MOVED]
    for repo_id in moved:
        _admin(endpoint, f"advance/{repo_id}", "POST")
    _requests(endpoint)
    started = time.process_time()
    [after] = listing.run()
    moved_cpu = time.process_time() - started
    detail(f"pass after {MOVED} moved: {moved_cpu * 1000:.0f} ms CPU")
    moved_requests = _requests(endpoint)
    found = sorted(r for r, _ in after.moved) == sorted(moved)

    sample = ids[1::N // SAMPLE][:SAMPLE]
    started = time.process_time()
    outcomes = app.poller.poll(sample)
    poll_cpu = (time.process_time() - started) / len(sample)
    per_poll = _requests(endpoint) / len(sample)
    assert all(not o.failed for o in outcomes)

    listing_per_min = sum(requests) / len(requests)  # one pass a minute
    per_repo_per_min = N * per_poll / PER_REPO_INTERVAL_MIN
    reconcile_s = ListingJob(settings, listings, app.hub, lambda *_: None).reconcile_interval_s(N)  # "auto"
    reconcile_per_min = N / (reconcile_s / 60)
    daily_per_min = N / RECONCILE_MIN
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    detail(f"watched repos: {N}; first pass {first_requests} requests, listed {first.listed}, {first_cpu * 1000:.0f} ms CPU; "
           f"per-repo poll (sample of {SAMPLE}): {per_poll:.2f} requests and {poll_cpu * 1000:.1f} ms CPU per repo; "
           f"reconcile every {reconcile_s / 86400:.1f} days; with reconcile_interval = 1d: {daily_per_min:.2f} a minute")
    app.store.engine.dispose()
    return {"Hub requests a minute, listing every 1m": listing_per_min,
            "Hub requests a minute, listing + reconcile (auto)": listing_per_min + reconcile_per_min,
            "Hub requests a minute, per-repo polling every 15m (measured)": per_repo_per_min,
            "CPU of a steady listing pass": 1000 * sum(cpu) / len(cpu), "requests of the pass after 50 moved": moved_requests,
            "the 50 moved found exactly (1 yes, 0 no)": int(found), "peak RSS, hubwatch side": rss_mb}


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
