"""Figure: deliveries out of event order under load, measured from outside (issue 21, item 2).

`--repos` repos move `--commits` commits each on the Hub replay, in rounds (every repo one commit a round); after
each commit a Hub webhook (POST /hooks/hub) tells a daemon, which polls on its own thread pool; a process keeps
one core busy meanwhile. Two signed generic subscriptions go to a recording receiver. Counted per endpoint:
deliveries that reached the receiver after a delivery of an event with a higher sequence number, and how late.

- SQLite, one `hubwatch run` (before the fix: 35 of 600 out of order, the worst 0.64 s late);
- PostgreSQL, three `hubwatch run` workers on one database, the webhooks spread over them (before: 18-45 of 2,400).

PostgreSQL: a throwaway server from /usr/lib/postgresql/15/bin (tests/support/postgres_server.py).
Run: python -m benchmarks run order_soak   (size: repos, default 40; 15 commits each, 3 PostgreSQL workers)
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import sqlalchemy as sa

from benchmarks._daemons import (
    HUB_SECRET,
    Daemons,
    free_port,
    hub_webhook,
    out_of_order,
    revisions,
    settled,
    start_busy_cpu,
    wait_for,
    wait_http,
    write_config,
)
from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tests.support import postgres_server
from tests.support.crash_scenario import RecordingReceiver, run_cli
from tests.support.databases import postgres_database
from tests.support.fleet import write_moving_repos
from tracker.standins.osv import OsvFake
from tracker.standins.replay.control import ReplayServer

BEFORE = "before issue 21's fix"
BENCHMARK = Benchmark(
    name="order_soak",
    about="Deliveries out of event order under load (a Hub webhook per commit, one core kept busy), SQLite and PostgreSQL",
    tags=("slow", "daemon", "webhooks"),
    size="repos (default 40)",
    small=8,
    timeout_s=1800,
    figures=(
        Figure("SQLite, 1 process: deliveries out of order", "deliveries", baseline=35, baseline_at=f"{BEFORE} (35 of 600)"),
        Figure("SQLite, 1 process: worst lateness", "s", baseline=0.64, baseline_at=BEFORE),
        Figure("SQLite, 1 process: revisions not stored", "revisions", goal=0),
        Figure("SQLite, 1 process: all delivered after the first round", "s"),
        Figure("PostgreSQL, 3 workers: deliveries out of order", "deliveries", note=f"{BEFORE}: 18-45 of 2,400"),
        Figure("PostgreSQL, 3 workers: worst lateness", "s"),
        Figure("PostgreSQL, 3 workers: revisions not stored", "revisions", goal=0),
        Figure("PostgreSQL, 3 workers: all delivered after the first round", "s"),
    ),
)


def soak(workdir: Path, histories: Path, ids: list[str], database_url: str, workers: int, commits: int,
         round_gap_s: float) -> dict[str, float]:
    """One soak: the daemons, the rounds of moves and webhooks, the busy core; the figures as one line each."""
    workdir.mkdir(parents=True)
    engine = sa.create_engine(database_url)
    with ReplayServer(roots=[histories]) as replay, OsvFake() as osv, ExitStack() as stack:
        receiver = RecordingReceiver(delay_s=0.0)
        stack.callback(receiver.stop)
        ports = [free_port() for _ in range(workers)]
        shared = workers > 1
        configs = [write_config(workdir / f"hubwatch-{n}.toml", replay.endpoint, osv.endpoint, database_url, receiver,
                                port, shared=shared, listing="off") for n, port in enumerate(ports)]
        for repo_id in ids:
            replay.set_head(repo_id, 1)
        run_cli(configs[0], "watch", "add", "--file", "-", stdin="\n".join(ids))
        run_cli(configs[0], "poll")  # the baselines: every later commit is an event
        baselines = revisions(engine)
        burner = start_busy_cpu()
        stack.callback(lambda: (burner.kill(), burner.wait()))
        daemons = Daemons(workdir, configs)
        stack.callback(daemons.stop)
        wait_http(ports)
        started = time.monotonic()
        statuses: dict[int, int] = {}
        with httpx.Client(timeout=30) as client, ThreadPoolExecutor(8) as pool:
            for _ in range(commits):
                for repo_id in ids:
                    replay.advance(repo_id)
                sent = pool.map(lambda job: hub_webhook(client, ports[job[0] % workers], job[1], replay.head_sha(job[1])),
                                enumerate(ids))
                for status in sent:
                    statuses[status] = statuses.get(status, 0) + 1
                time.sleep(round_gap_s)
        expected = baselines + len(ids) * commits
        stored_s = wait_for(lambda: revisions(engine) >= expected, 900, 0.2)
        wait_for(lambda: settled(engine, receiver), 900, 0.2)
        took = time.monotonic() - started
        stored, deliveries = revisions(engine), len({a.webhook_id for a in receiver.arrivals})
    engine.dispose()
    per_endpoint = out_of_order(receiver.arrivals)
    late = sum(n for _, n, _ in per_endpoint.values())
    worst = max(w for _, _, w in per_endpoint.values())
    per_path = ", ".join(f"{path}: {n} of {total}" for path, (total, n, _) in per_endpoint.items())
    detail(f"{late} of {deliveries} deliveries out of order ({per_path}); revisions stored {stored}/{expected}; webhook answers"
           f" {dict(sorted(statuses.items()))}; all stored {stored_s:.0f} s after the last round")
    return {"deliveries out of order": late, "worst lateness": worst, "revisions not stored": max(0, expected - stored),
            "all delivered after the first round": took}


def measure(size: int | None = None) -> dict[str, float]:
    repos, commits, workers, round_gap = size or 40, 15, 3, 0.25
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ["HUBWATCH_HUB_WEBHOOK_SECRET"] = HUB_SECRET
    detail(f"bench_order_soak: {repos} repos x {commits} commits, a Hub webhook per commit, 2 endpoints, one"
           f" core kept busy; machine: {os.cpu_count()} cores")
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="hubwatch-soak-") as tmp:
        histories = Path(tmp) / "histories"
        ids = write_moving_repos(histories, repos, 1 + commits, prefix="soak")
        got = soak(Path(tmp) / "sqlite", histories, ids, f"sqlite:///{tmp}/soak.db", 1, commits, round_gap)
        figures |= {f"SQLite, 1 process: {k}": v for k, v in got.items()}
        if not Path(postgres_server.__file__).exists() or not Path("/usr/lib/postgresql/15/bin/initdb").exists():
            detail("PostgreSQL: not run, no server binaries in /usr/lib/postgresql/15/bin")
            return figures
        with postgres_server.throwaway_postgres(max_connections=200) as server, \
                postgres_database(server.url, prefix="hw_bench") as url:
            got = soak(Path(tmp) / "postgres", histories, ids, url, workers, commits, round_gap)
        figures |= {f"PostgreSQL, {workers} workers: {k}": v for k, v in got.items()}
    return figures


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
