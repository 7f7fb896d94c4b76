"""Figure: PostgreSQL down for 20 s under three workers, measured from outside (issue 21, item 3).

Three `hubwatch run` workers share one PostgreSQL database ([poll] coordination = "shared", the listing a pass a
second finding moved repos, two signed webhook subscriptions to a recording receiver). Once they are idle the server
is stopped as a crash would (`pg_ctl -m immediate stop`); while it is down, every repo moves `--moves` commits on
the Hub replay; then it is started again. Printed per worker: traceback count, and the outage lines it logged
(before the fix: 66 tracebacks in one worker's log, one every delivery tick and heartbeat); /healthz during and
after; seconds after the restart until every revision was stored (before: 6.7 s) and every delivery made
(before: 9.2 s).

Run: python -m benchmarks run pg_outage   (size: repos, default 30; 2 moves each, 3 workers, 20 s down)
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import sqlalchemy as sa

from benchmarks._daemons import Daemons, free_port, revisions, settled, wait_for, wait_http, write_config
from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tests.support import postgres_server
from tests.support.crash_scenario import RecordingReceiver, run_cli
from tests.support.databases import postgres_database
from tests.support.fleet import write_moving_repos
from tracker.standins.osv import OsvFake
from tracker.standins.replay.control import ReplayServer

BEFORE = "before issue 21's fix"
BENCHMARK = Benchmark(
    name="pg_outage",
    about="PostgreSQL down for 20 s under three `hubwatch run` workers while repos move, measured from outside",
    tags=("slow", "daemon", "postgres"),
    size="repos (default 30)",
    small=10,
    requires=("postgres",),
    timeout_s=900,
    figures=(
        Figure("after the restart: first revision stored", "s"),
        Figure("after the restart: every moved revision stored", "s", baseline=6.7, baseline_at=BEFORE),
        Figure("after the restart: every delivery made", "s", baseline=9.2, baseline_at=BEFORE),
        Figure("tracebacks logged, most in one worker", "tracebacks", baseline=66, baseline_at=BEFORE),
        Figure("webhook-ids received twice", "deliveries"),
        Figure("deliveries received", "deliveries"),
    ),
)
OUTAGE_EVENTS = ("polling_database_unavailable", "polling_database_back", "webhook_dispatch_paused",
                 "webhook_dispatch_resumed")


def health(port: int) -> str:
    try:
        answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
    except httpx.HTTPError as err:
        return f"no answer ({type(err).__name__})"
    body = answer.json() if answer.headers.get("content-type", "").startswith("application/json") else {}
    return f"{answer.status_code} storage={body.get('storage')!r}"


def log_summary(path: Path, since: int) -> tuple[int, collections.Counter]:
    """Tracebacks in the log from byte `since` on, and its warning/error lines by event name."""
    text = path.read_bytes()[since:].decode("utf-8", errors="replace")
    tracebacks = text.count("Traceback (most recent call last)")
    lines: collections.Counter = collections.Counter()
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        if record.get("level") in ("warning", "error", "critical") or record.get("event") in OUTAGE_EVENTS:
            lines[str(record.get("event"))] += 1
    return tracebacks, lines


def measure(size: int | None = None) -> dict[str, float]:
    args = argparse.Namespace(repos=size or 30, moves=2, workers=3, down=20.0)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    figures: dict[str, float] = {}
    detail(f"bench_pg_outage: {args.workers} workers on one PostgreSQL, {args.repos} repos each moving {args.moves}"
          f" commit(s) while the server is down {args.down:.0f} s; machine: {os.cpu_count()} cores shared with other"
          " work (timings are noisy)")
    with tempfile.TemporaryDirectory(prefix="hubwatch-outage-") as tmp, ExitStack() as stack:
        workdir = Path(tmp)
        histories = workdir / "histories"
        ids = write_moving_repos(histories, args.repos, 1 + args.moves, prefix="outage")
        server = stack.enter_context(postgres_server.throwaway_postgres(max_connections=200))
        url = stack.enter_context(postgres_database(server.url, prefix="hw_bench"))
        replay = stack.enter_context(ReplayServer(roots=[histories]))
        osv = stack.enter_context(OsvFake())
        receiver = RecordingReceiver(delay_s=0.0)
        stack.callback(receiver.stop)
        engine = sa.create_engine(url, pool_pre_ping=True)
        stack.callback(engine.dispose)
        ports = [free_port() for _ in range(args.workers)]
        configs = [write_config(workdir / f"hubwatch-{n}.toml", replay.endpoint, osv.endpoint, url, receiver, port,
                                shared=True, listing="on", log_level="info") for n, port in enumerate(ports)]
        for repo_id in ids:
            replay.set_head(repo_id, 1)
        run_cli(configs[0], "watch", "add", "--file", "-", stdin="\n".join(ids))
        run_cli(configs[0], "poll")
        daemons = Daemons(workdir, configs)
        stack.callback(daemons.stop)
        wait_http(ports)
        wait_for(lambda: all(p.read_bytes().count(b"\n") > 0 for p in daemons.logs), 60)
        time.sleep(3)  # the workers settle: leases taken, listing state read, dispatchers idle
        before = [p.stat().st_size for p in daemons.logs]
        baseline = revisions(engine)
        expected = baseline + len(ids) * args.moves
        engine.dispose()

        server.stop()
        down_at = time.monotonic()
        moves = [repo_id for _ in range(args.moves) for repo_id in ids]
        step_s = args.down * 0.8 / len(moves)
        for repo_id in moves:  # the commits land while the database is down
            replay.advance(repo_id)
            time.sleep(step_s)
        during = health(ports[0])
        time.sleep(max(0.0, args.down - (time.monotonic() - down_at)))
        server.start()
        restarted = time.monotonic()
        detail(f"server down {restarted - down_at:.1f} s; /healthz of worker 0 while down: {during}")
        first_s = wait_for(lambda: revisions(engine) > baseline, 600, 0.05)
        stored_s = time.monotonic() - restarted + wait_for(lambda: revisions(engine) >= expected, 600, 0.05)
        wait_for(lambda: settled(engine, receiver), 600, 0.05)
        delivered_s = time.monotonic() - restarted
        figures |= {"after the restart: first revision stored": first_s, "after the restart: every moved revision stored": stored_s,
                    "after the restart: every delivery made": delivered_s}
        detail(f"after the restart: the first revision stored in {first_s:.1f} s; all {expected - baseline} moved revisions"
              f" stored in {stored_s:.1f} s (before: 6.7 s), all"
              f" deliveries made in {delivered_s:.1f} s (before: 9.2 s); /healthz of worker 0 now: {health(ports[0])}")
        time.sleep(2)  # the 'back' lines of workers whose next claim comes a little later
        daemons.stop()
        tracebacks_most = 0
        for n, (log, since) in enumerate(zip(daemons.logs, before, strict=True)):
            tracebacks, lines = log_summary(log, since)
            tracebacks_most = max(tracebacks_most, tracebacks)
            outage = {e: lines.get(e, 0) for e in OUTAGE_EVENTS}
            other = {e: c for e, c in lines.items() if e not in OUTAGE_EVENTS}
            detail(f"worker {n}: {tracebacks} tracebacks (before: 66 in one worker); outage lines {outage};"
                  f" other warning/error lines {other or 'none'}")
        ids_received = [a.webhook_id for a in receiver.arrivals]
        figures |= {"tracebacks logged, most in one worker": tracebacks_most, "deliveries received": len(set(ids_received)),
                    "webhook-ids received twice": len(ids_received) - len(set(ids_received))}
    return figures


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
