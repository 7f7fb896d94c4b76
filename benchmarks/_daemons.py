"""A helper of the benchmarks, not a benchmark.

`hubwatch run` processes for the outside measurements of issue 21 (bench_order_soak, bench_pg_outage): each
on its own HTTP port, one database (a SQLite file, or PostgreSQL shared by several), the Hub replay, the OSV
fake and the recording receiver of tests/support/crash_scenario.py; and what is read back from the database.
Also the one-daemon pieces of bench_daemon_scale and bench_hook_to_delivery: its config, the replay in its own
process, the watches seeded straight into the database, CPU and percentiles."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import sqlalchemy as sa

from tests.support.crash_scenario import PATHS, Arrival, RecordingReceiver, start_daemon, webhook_sections

if TYPE_CHECKING:
    from tracker.cli.app import App

ROOT = Path(__file__).resolve().parent.parent
HUB_SECRET = "hub-secret-for-benchmarks"  # the daemons read it from HUBWATCH_HUB_WEBHOOK_SECRET
BUSY = "import time\nend = time.monotonic() + 3600\nwhile time.monotonic() < end: pass\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(path: Path, hub: str, osv: str, database_url: str, receiver: RecordingReceiver, port: int,
                 shared: bool, listing: str, log_level: str = "warning") -> Path:
    """A daemon's config: webhooks to `receiver`, polls only when asked (a day's interval), jitter off."""
    coordination = 'coordination = "shared"\nlease = "5s"\n' if shared else 'coordination = "local"\n'
    path.write_text(f"""
[hub]
endpoint = "{hub}"
api_requests_per_5min = 0
resolve_requests_per_5min = 0
[storage]
url = "{database_url}"
[osv]
api_url = "{osv}"
[server]
port = {port}
[poll]
jitter = "0s"
default_interval = "1d"
listing = "{listing}"
listing_interval = "1s"
{coordination}
[log]
level = "{log_level}"
format = "json"
[delivery]
allow_private_targets = true
poll_interval_s = 0.5
timeout_s = 5.0
{webhook_sections(receiver)}""", encoding="utf-8")
    return path


class Daemons:
    """`hubwatch run` once per config, logs under `workdir`; stopped with SIGTERM (then killed) on `stop()`."""

    def __init__(self, workdir: Path, configs: list[Path]) -> None:
        self.logs = [workdir / f"worker-{n}.log" for n in range(len(configs))]
        self._files = [log.open("wb") for log in self.logs]
        self.procs = [start_daemon(config, f) for config, f in zip(configs, self._files, strict=True)]

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        for f in self._files:
            f.close()


def wait_http(ports: list[int], timeout_s: float = 120) -> None:
    """Until every daemon's HTTP server answers /healthz (any status)."""
    deadline = time.monotonic() + timeout_s
    for port in ports:
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no daemon answered on port {port}") from None
                time.sleep(0.2)


def hub_webhook(client: httpx.Client, port: int, repo_id: str, sha: str) -> int:
    """One Hub webhook for a push to `repo_id`'s main, as the Hub sends it; the answer's status."""
    payload = {"event": {"action": "update", "scope": "repo.content"},
               "repo": {"type": "model", "name": repo_id, "headSha": sha},
               "updatedRefs": [{"ref": "refs/heads/main", "oldSha": None, "newSha": sha}]}
    answer = client.post(f"http://127.0.0.1:{port}/hooks/hub", json=payload, headers={"X-Webhook-Secret": HUB_SECRET})
    return answer.status_code


def start_busy_cpu() -> subprocess.Popen:
    """A process that keeps one core busy (killed by the caller)."""
    return subprocess.Popen([sys.executable, "-c", BUSY])


def count(engine: sa.Engine, sql: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(sql)).scalar_one())


def revisions(engine: sa.Engine) -> int:
    return count(engine, "SELECT COUNT(*) FROM revision")


def settled(engine: sa.Engine, receiver: RecordingReceiver) -> bool:
    """Every delivery made: none pending, and the receiver holds every delivery's webhook-id."""
    if count(engine, "SELECT COUNT(*) FROM delivery WHERE status = 'pending'"):
        return False
    return len({a.webhook_id for a in receiver.arrivals}) >= count(engine, "SELECT COUNT(*) FROM delivery")


def wait_for(predicate: Callable[[], bool], timeout_s: float, step_s: float = 0.1) -> float:
    """Seconds until `predicate()` held (TimeoutError past `timeout_s`); database errors count as not yet."""
    started = time.monotonic()
    while True:
        try:
            if predicate():
                return time.monotonic() - started
        except sa.exc.OperationalError:
            pass
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"not there after {timeout_s:.0f} s")
        time.sleep(step_s)


def out_of_order(arrivals: list[Arrival]) -> dict[str, tuple[int, int, float]]:
    """Per endpoint: (deliveries received, those received after an event with a higher seq, the worst delay
    in seconds behind that event). A webhook-id received twice counts at its first arrival."""
    report = {}
    for path in PATHS:
        first: dict[str, Arrival] = {}
        for a in sorted((a for a in arrivals if a.path == path), key=lambda a: a.at):
            first.setdefault(a.webhook_id, a)
        ordered = sorted(first.values(), key=lambda a: a.at)
        late, worst = 0, 0.0
        for i, a in enumerate(ordered):
            overtaken = next((b for b in ordered[:i] if b.seq > a.seq), None)
            if overtaken is not None:
                late += 1
                worst = max(worst, a.at - overtaken.at)
        report[path] = (len(ordered), late, worst)
    return report


def receiver_config(path: Path, endpoint: str, db: Path, port: int, receiver_url: str, log_level: str = "warning",
                    json_logs: bool = False) -> Path:
    """One daemon's config (bench_daemon_scale, bench_hook_to_delivery): no listing, OSV off, Hub webhooks
    signed with BENCH_HUB_SECRET, every event to `receiver_url` signed with BENCH_WEBHOOK_SECRET."""
    log_format = 'format = "json"\n' if json_logs else ""
    path.write_text(f"""
[hub]
endpoint = "{endpoint}"
api_requests_per_5min = 0
resolve_requests_per_5min = 0
[storage]
url = "sqlite:///{db}"
[osv]
enabled = false
[server]
port = {port}
hub_webhook_secret_env = "BENCH_HUB_SECRET"
[poll]
jitter = "0"
listing = "off"
[log]
level = "{log_level}"
{log_format}[delivery]
allow_private_targets = true
poll_interval_s = 30.0
[[webhooks]]
url = "{receiver_url}"
format = "generic"
secret_env = "BENCH_WEBHOOK_SECRET"
repos = ["*"]
kinds = []
min_severity = "info"
""", encoding="utf-8")
    return path


class ReplayProcess:
    """The Hub replay server in its own process (`python -m tracker.standins.replay`), moved by its admin routes."""

    def __init__(self, root: Path) -> None:
        command = [sys.executable, "-m", "tracker.standins.replay", "--port", "0", "--no-bundled", "--root", str(root)]
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.endpoint = (self.process.stdout.readline() if self.process.stdout else "").strip()
        if not self.endpoint.startswith("http"):
            raise SystemExit("the replay server did not start")

    def set_head(self, repo_id: str, n: int) -> None:
        httpx.post(f"{self.endpoint}/_replay/head/{repo_id}", params={"n": n}, trust_env=False).raise_for_status()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def seed_watches(app: App, heads: dict[str, str], interval_s: int, first_due: datetime, seed: int) -> None:
    """Every plain watch at its repo's head, due once within [first_due, first_due + interval)."""
    from sqlmodel import Session

    from storage.models import Watch

    rng = random.Random(seed)
    rows = []
    for repo_id, sha in heads.items():
        due = first_due + timedelta(seconds=rng.random() * interval_s)
        rows.append(Watch(repo_id=repo_id, branch="main", interval_s=interval_s, source="cli", created_at=first_due,
                          last_sha=sha, repo_meta={"private": False, "gated": False},
                          last_polled_at=due - timedelta(seconds=interval_s), last_ok_at=due - timedelta(seconds=interval_s)))
    with Session(app.store.engine) as s:
        s.add_all(rows)
        s.commit()


def cpu_s(pid: int) -> float:
    """A process's CPU seconds so far (user + system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]
