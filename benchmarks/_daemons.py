"""`hubwatch run` processes for the outside measurements of issue 21 (bench_order_soak, bench_pg_outage): each
on its own HTTP port, one database (a SQLite file, or PostgreSQL shared by several), the Hub replay, the OSV
fake and the recording receiver of tests/support/crash_scenario.py; and what is read back from the database."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import sqlalchemy as sa

from tests.support.crash_scenario import PATHS, Arrival, RecordingReceiver, start_daemon, webhook_sections

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
