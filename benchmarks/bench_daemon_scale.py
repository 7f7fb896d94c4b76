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
Run: .venv/bin/python benchmarks/bench_daemon_scale.py [--watches N] [--interval S] [--hooks K]
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


def _arrival(receiver: Receiver, sha: str, timeout_s: float) -> float | None:
    """When the delivery of the revision ``sha`` reached the receiver (time.monotonic()), or None."""
    hit = receiver.first(lambda r: json.loads(r.body).get("data", {}).get("sha") == sha, timeout_s)
    return hit.at if hit else None


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _print_watch_reads(app: App, repo_id: str) -> None:
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
    print(f"watch-list change check:          {version:.1f} ms (version query) vs {before:.0f} ms reading every watch "
          f"as ORM rows before (ratio {version / before:.3f}x); light reload when it moved {ms(store.watches.watch_schedule):.0f} ms; "
          f"one repo's watches (Hub webhook) {ms(lambda: store.watches.repo_watches(repo_id)):.2f} ms", flush=True)


def _hook(client: httpx.Client, repo_id: str, old: str, new: str) -> tuple[float, int]:
    body = {"event": {"action": "update", "scope": "repo.content"},
            "repo": {"type": "model", "name": repo_id, "headSha": new},
            "updatedRefs": [{"ref": "refs/heads/main", "oldSha": old, "newSha": new}]}
    started = time.perf_counter()
    response = client.post("/hooks/hub", json=body, headers={"x-webhook-secret": HOOK_SECRET})
    return (time.perf_counter() - started) * 1000, response.status_code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watches", type=int, default=10_000)
    parser.add_argument("--interval", type=int, default=60, help="every watch's poll interval, seconds")
    parser.add_argument("--idle", type=int, default=60, help="seconds after seeding before the first poll is due")
    parser.add_argument("--hooks", type=int, default=8, help="repos moved by Hub webhooks (each moved 3 times)")
    args = parser.parse_args()
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
            print(f"setup: {args.watches} repos written and served in {time.perf_counter() - t:.0f} s", flush=True)
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
            _print_watch_reads(app, hook_ids[0] if hook_ids else next(iter(heads)))
            app.store.engine.dispose()
            print(f"setup: seeded in {time.perf_counter() - t:.0f} s; starting the daemon", flush=True)
            log = Path(os.environ.get("BENCH_DAEMON_LOG", Path(tmp) / "daemon.log")).open("w")
            daemon = subprocess.Popen([sys.executable, "-m", "tracker", "run"], cwd=ROOT, env=env,
                                      stdout=log, stderr=subprocess.STDOUT)
            try:
                _measure(args, daemon, port, replay, receiver, hook_shas, first_due, Path(tmp) / "h.db")
            finally:
                daemon.send_signal(signal.SIGTERM)
                daemon.wait(60)
                log.close()
        finally:
            replay.stop()
    receiver.stop()


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
             hook_shas: dict[str, list[str]], first_due: datetime, db: Path) -> None:
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
    print(f"watches: {n}, interval {args.interval} s, jitter 0, per-repo polling (listing off); daemon ready "
          f"{(ready - (first_due - timedelta(seconds=args.idle))).total_seconds():.0f} s after seeding")
    print(f"polls done in the interval:       {polled} of {n} ({100 * polled / n:.1f}%; goal: all); "
          f"{polled_with_grace} within its {overdue_grace_s(args.interval):g} s overdue grace")
    print(f"overdue polls (/healthz):         {health.get('polls_overdue')} at the interval's end "
          f"(oldest {health.get('oldest_overdue_s')} s)")
    print(f"daemon CPU share, idle:           {100 * idle_share:.1f}% of one core over {idle_wall:.0f} s; RSS {idle_rss:.0f} MB")
    print(f"daemon CPU share, polling:        {100 * busy_share:.1f}% of one core ({n / args.interval:.0f} polls/s); "
          f"RSS {busy_rss:.0f} MB")
    for label, acks, latencies, missing in (("idle daemon", idle_acks, idle_latencies, idle_missing),
                                            ("while polling", busy_acks, busy_latencies, busy_missing)):
        print(f"Hub webhook acknowledgement, {label + ':':<15} p50 {statistics.median(acks):.1f} ms, "
              f"p90 {percentile(acks, 0.9):.1f} ms, max {max(acks):.1f} ms over {len(acks)} (goal < 20 ms; before "
              f"{BEFORE['ack_ms']:.0f} ms: ratio {statistics.median(acks) / BEFORE['ack_ms']:.3f}x)")
        if latencies:
            p50, p90 = statistics.median(latencies), percentile(latencies, 0.9)
            print(f"Hub webhook to delivery, {label + ':':<19} p50 {p50:.0f} ms, p90 {p90:.0f} ms, max {max(latencies):.0f} ms "
                  f"over {len(latencies)} (goal p90 < 300 ms; before p50 {BEFORE['p50_ms']:.0f} / p90 {BEFORE['p90_ms']:.0f} ms: "
                  f"ratio {p90 / BEFORE['p90_ms']:.2f}x at p90), {missing} missing after 30 s")

if __name__ == "__main__":
    main()
