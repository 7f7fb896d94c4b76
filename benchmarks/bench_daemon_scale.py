"""Figure: the daemon (`hubwatch run`, its own process) with many watches on the Hub replay server.

Prints, for N watches polled every `--interval` seconds (per-repo polling: [poll] listing = "off", jitter 0,
no Hub request budget: the replay is a private mirror):
- polls done in one interval: watches polled in the interval their due times are spread over (goal: all);
  and the daemon's own count of overdue polls (/healthz) at the end;
- the daemon's CPU share and RSS while idle (nothing due for the first seconds after a start) and while
  polling (N / interval unchanged polls a second);
- Hub webhook acknowledgement time (POST /hooks/hub answered; goal under 20 ms) and Hub webhook to
  delivery at a recording webhook receiver (goal: p90 under 300 ms), while the polling goes on.

Watches are seeded through the storage layer at their repos' heads (their next poll is an unchanged
one), with due times spread over the interval that starts `--idle` seconds after seeding. A few "hook"
repos are ingested for real first; each webhook moves one of them a commit ahead at the replay server.
Baselines: the goals above, and before issue 15 (commit edb6768, from the issue): acknowledgement 490 ms,
delivery p50 670 ms / p90 1,170 ms (the dispatcher's 1 s tick), about half of 10,000 watches polled 15 min
after a start. The dispatcher's safety tick is set to 30 s here: deliveries that waited for it would show.
Run: python -m benchmarks run daemon_scale   (size: watches, default 10,000; interval 60 s, 8 hook repos)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import sqlalchemy as sa

from benchmarks._daemons import ROOT, ReplayProcess, cpu_s, free_port, percentile, receiver_config, seed_watches
from benchmarks.declare import Benchmark, Figure, detail, run_alone
from storage.models import Watch
from tests.support.synthetic_repos import CONFIG, write_repo
from tracker.cli.app import App
from tracker.cli.logs import configure_logging
from tracker.config import load_settings
from tracker.polling.scheduler import overdue_grace_s
from tracker.standins.receiver import Receiver
from tracker.standins.replay.history import load_roots

HOOK_SECRET = "bench-hub-secret"
WEBHOOK_SECRET = "whsec_YmVuY2gtd2ViaG9vay1zZWNyZXQtMDEyMzQ1Njc4OQ=="
HOOK_COMMITS = 4  # a baseline, then one move while idle and two while polling
BEFORE = {"ack_ms": 490.0, "p50_ms": 670.0, "p90_ms": 1170.0}
EDB = "before issue 15 (commit edb6768)"
BENCHMARK = Benchmark(
    name="daemon_scale",
    about="`hubwatch run` with 10,000 watches polled every minute: polls done, CPU, RSS, Hub webhook ack and delivery",
    tags=("slow", "daemon"),
    size="watches (default 10,000)",
    small=500,
    timeout_s=1800,
    figures=(
        Figure("watches polled in the interval", "%", goal=100.0, direction="higher", note="goal: all"),
        Figure("overdue polls at the interval's end", "polls"),
        Figure("daemon CPU share, idle", "% of a core"),
        Figure("daemon CPU share, polling", "% of a core"),
        Figure("daemon RSS, polling", "MB"),
        Figure("Hub webhook acknowledgement p50, idle", "ms", goal=20.0, margin=0.5, baseline=BEFORE["ack_ms"], baseline_at=EDB),
        Figure("Hub webhook acknowledgement p50, polling", "ms", goal=20.0, margin=0.5, baseline=BEFORE["ack_ms"], baseline_at=EDB),
        Figure("Hub webhook to delivery p50, idle", "ms", baseline=BEFORE["p50_ms"], baseline_at=EDB),
        Figure("Hub webhook to delivery p90, idle", "ms", goal=300.0, margin=0.3, baseline=BEFORE["p90_ms"], baseline_at=EDB),
        Figure("Hub webhook to delivery p50, polling", "ms", baseline=BEFORE["p50_ms"], baseline_at=EDB),
        Figure("Hub webhook to delivery p90, polling", "ms", goal=300.0, margin=0.3, baseline=BEFORE["p90_ms"], baseline_at=EDB),
        Figure("watch-list change check (version query)", "ms"),
        Figure("every watch read as ORM rows (before)", "ms", note="what the scheduler read every minute before"),
    ),
)


def _arrival(receiver: Receiver, sha: str, timeout_s: float) -> float | None:
    """When the delivery of the revision ``sha`` reached the receiver (time.monotonic()), or None."""
    hit = receiver.first(lambda r: json.loads(r.body).get("data", {}).get("sha") == sha, timeout_s)
    return hit.at if hit else None


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _watch_reads(app: App, repo_id: str) -> dict[str, float]:
    """What noticing watch changes costs now (a version query; the light list only when it moved) against
    what the scheduler did every minute and every Hub webhook before (the whole list as ORM rows)."""

    def ms(read: object, n: int = 5) -> float:
        read()  # type: ignore[operator]
        started = time.perf_counter()
        for _ in range(n):
            read()  # type: ignore[operator]
        return (time.perf_counter() - started) * 1000 / n

    store = app.store
    before = ms(store.watches.list_watches)
    version = ms(store.watches.watch_list_version)
    detail(f"watch-list change check:          {version:.1f} ms (version query) vs {before:.0f} ms reading every watch "
          f"as ORM rows before (ratio {version / before:.3f}x); light reload when it moved {ms(store.watches.watch_schedule):.0f} ms; "
          f"one repo's watches (Hub webhook) {ms(lambda: store.watches.repo_watches(repo_id)):.2f} ms")
    return {"watch-list change check (version query)": version, "every watch read as ORM rows (before)": before}


def _hook(client: httpx.Client, repo_id: str, old: str, new: str) -> tuple[float, int]:
    body = {"event": {"action": "update", "scope": "repo.content"},
            "repo": {"type": "model", "name": repo_id, "headSha": new},
            "updatedRefs": [{"ref": "refs/heads/main", "oldSha": old, "newSha": new}]}
    started = time.perf_counter()
    response = client.post("/hooks/hub", json=body, headers={"x-webhook-secret": HOOK_SECRET})
    return (time.perf_counter() - started) * 1000, response.status_code


def measure(size: int | None = None) -> dict[str, float]:
    args = argparse.Namespace(watches=size or 10_000, interval=60, idle=60, hooks=8)
    hook_ids = [f"bench/hook-{i:02d}" for i in range(args.hooks)]
    plain_ids = [f"bench/model-{i:05d}" for i in range(args.watches - args.hooks)]
    receiver = Receiver().start()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "histories"
        t = time.perf_counter()
        for repo_id in plain_ids:
            write_repo(root, repo_id, [{"files": {"config.json": CONFIG}}])
        for repo_id in hook_ids:
            write_repo(root, repo_id, [{"files": {"config.json": {**CONFIG, "rope_theta": 10000.0 * (i + 1)}}}
                                       for i in range(HOOK_COMMITS)])
        histories = load_roots([root])
        heads = {repo_id: histories[repo_id].commits[-1].sha for repo_id in plain_ids}
        hook_shas = {repo_id: [c.sha for c in histories[repo_id].commits] for repo_id in hook_ids}
        del histories
        replay = ReplayProcess(root)
        try:
            detail(f"setup: {args.watches} repos written and served in {time.perf_counter() - t:.0f} s")
            port = free_port()
            config = receiver_config(Path(tmp) / "hubwatch.toml", replay.endpoint, Path(tmp) / "h.db", port, receiver.url)
            env = {**os.environ, "BENCH_HUB_SECRET": HOOK_SECRET, "BENCH_WEBHOOK_SECRET": WEBHOOK_SECRET,
                   "HUBWATCH_CONFIG": str(config)}
            settings = load_settings(str(config), env=env)
            configure_logging(settings.log)
            app = App(settings)
            for repo_id in hook_ids:
                replay.set_head(repo_id, 1)
                app.store.watches.add_watch(repo_id, "main", args.interval)
            app.poller.poll(hook_ids)  # their baselines, for real
            first_due = datetime.now(UTC) + timedelta(seconds=args.idle)
            seed_watches(app, heads, args.interval, first_due, seed=15)
            figures = _watch_reads(app, hook_ids[0] if hook_ids else next(iter(heads)))
            app.store.engine.dispose()
            detail(f"setup: seeded in {time.perf_counter() - t:.0f} s; starting the daemon")
            log = Path(os.environ.get("BENCH_DAEMON_LOG", Path(tmp) / "daemon.log")).open("w")
            daemon = subprocess.Popen([sys.executable, "-m", "tracker", "run"], cwd=ROOT, env=env,
                                      stdout=log, stderr=subprocess.STDOUT)
            try:
                figures |= _measure(args, daemon, port, replay, receiver, hook_shas, first_due, Path(tmp) / "h.db")
            finally:
                daemon.send_signal(signal.SIGTERM)
                daemon.wait(60)
                log.close()
        finally:
            replay.stop()
    receiver.stop()
    return figures


def _polled_since(db: Path, since: datetime) -> int:
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        polled = conn.execute(sa.select(sa.func.count()).select_from(Watch).where(Watch.last_polled_at >= since)).scalar_one()
    engine.dispose()
    return int(polled)


def _wait_until(moment: datetime) -> None:
    time.sleep(max(0.0, (moment - datetime.now(UTC)).total_seconds()))


class Hooks:
    """Hub webhooks that each move a hook repo one commit ahead: acknowledgement times and delivery latencies."""

    def __init__(self, client: httpx.Client, replay: ReplayProcess, receiver: Receiver, hook_shas: dict[str, list[str]]) -> None:
        self.client, self.replay, self.receiver, self.hook_shas = client, replay, receiver, hook_shas
        self.step = dict.fromkeys(hook_shas, 1)

    def send(self, rounds: int) -> tuple[list[float], list[float], int]:
        acks: list[float] = []
        latencies: list[float] = []
        missing = 0
        for _ in range(rounds):
            for repo_id, shas in self.hook_shas.items():
                n = self.step[repo_id]
                self.replay.set_head(repo_id, n + 1)
                self.step[repo_id] = n + 1
                sent = time.monotonic()
                ack_ms, status = _hook(self.client, repo_id, shas[n - 1], shas[n])
                assert status == 202, status
                acks.append(ack_ms)
                arrived = _arrival(self.receiver, shas[n], 30)
                if arrived is None:
                    missing += 1
                else:
                    latencies.append((arrived - sent) * 1000)
                time.sleep(0.2)
        return acks, latencies, missing


def _measure(args: argparse.Namespace, daemon: subprocess.Popen, port: int, replay: ReplayProcess, receiver: Receiver,
             hook_shas: dict[str, list[str]], first_due: datetime, db: Path) -> dict[str, float]:
    base = f"http://127.0.0.1:{port}"
    with httpx.Client(base_url=base, timeout=30, trust_env=False) as client:
        deadline = time.monotonic() + 120
        while True:
            try:
                client.get("/healthz")
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or daemon.poll() is not None:
                    raise SystemExit("the daemon did not start") from None
                time.sleep(0.2)
        ready = datetime.now(UTC)
        hooks = Hooks(client, replay, receiver, hook_shas)
        time.sleep(3)  # start-up work (the first sync, the feed warm-up) is not idling
        idle_from, idle_cpu = time.monotonic(), cpu_s(daemon.pid)
        _wait_until(first_due - timedelta(seconds=12))  # leave time for the idle daemon's webhooks
        idle_wall = time.monotonic() - idle_from
        idle_share = (cpu_s(daemon.pid) - idle_cpu) / idle_wall if idle_wall > 1 else float("nan")
        idle_rss = _rss_mb(daemon.pid)
        idle_acks, idle_latencies, idle_missing = hooks.send(1)
        _wait_until(first_due)
        busy_from, busy_cpu = time.monotonic(), cpu_s(daemon.pid)
        busy_acks, busy_latencies, busy_missing = hooks.send(HOOK_COMMITS - 2)
        end = first_due + timedelta(seconds=args.interval)
        _wait_until(end)
        busy_share = (cpu_s(daemon.pid) - busy_cpu) / (time.monotonic() - busy_from)
        busy_rss = _rss_mb(daemon.pid)
        polled = _polled_since(db, first_due - timedelta(seconds=1))
        health = client.get("/healthz").json()
        _wait_until(end + timedelta(seconds=overdue_grace_s(args.interval)))
        polled_with_grace = _polled_since(db, first_due - timedelta(seconds=1))
    n = args.watches
    detail(f"watches: {n}, interval {args.interval} s, jitter 0, per-repo polling (listing off); daemon ready "
           f"{(ready - (first_due - timedelta(seconds=args.idle))).total_seconds():.0f} s after seeding; polled {polled} of {n} "
           f"in the interval, {polled_with_grace} within its {overdue_grace_s(args.interval):g} s overdue grace; "
           f"oldest overdue {health.get('oldest_overdue_s')} s; idle CPU over {idle_wall:.0f} s, RSS idle {idle_rss:.0f} MB")
    figures = {"watches polled in the interval": 100 * polled / n, "overdue polls at the interval's end": health.get("polls_overdue"),
               "daemon CPU share, idle": 100 * idle_share, "daemon CPU share, polling": 100 * busy_share,
               "daemon RSS, polling": busy_rss}
    for label, acks, latencies, missing in (("idle", idle_acks, idle_latencies, idle_missing),
                                            ("polling", busy_acks, busy_latencies, busy_missing)):
        figures[f"Hub webhook acknowledgement p50, {label}"] = statistics.median(acks)
        detail(f"Hub webhook acknowledgement, {label}: p90 {percentile(acks, 0.9):.1f} ms, max {max(acks):.1f} ms over {len(acks)}; "
               f"{len(latencies)} delivered, {missing} missing after 30 s")
        if latencies:
            figures[f"Hub webhook to delivery p50, {label}"] = statistics.median(latencies)
            figures[f"Hub webhook to delivery p90, {label}"] = percentile(latencies, 0.9)
    return figures


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
