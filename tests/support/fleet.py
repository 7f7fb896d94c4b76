"""N `hubwatch run` workers on one database, against the Hub replay with repos that move, one worker
optionally killed with SIGKILL mid-run: what they ingested and delivered, and how fast.

The repos are watched from their first commit; the workers ingest those baselines, then every repo
moves `moves` commits, revealed in rounds while the workers run (the kill lands in the first round, or with no
moves in the baselines' polls). The listing ([poll] listing = "on",
a pass a second) finds the moved repos and makes them due in the database; whichever worker is free
claims each. Each revision changes the generation config (one event each), delivered to a recording
receiver. Shared by tests/tracker/polling/test_workers_e2e.py and benchmarks/bench_workers.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from tests.support.crash_scenario import RecordingReceiver, set_up, start_daemon, webhook_sections
from tests.support.synthetic_repos import CONFIG, write_repo
from tracker.standins.osv import OsvFake
from tracker.standins.replay.control import ReplayServer


def write_moving_repos(root: Path, repos: int, commits: int, prefix: str = "fleet") -> list[str]:
    ids = []
    for r in range(repos):
        repo_id = f"{prefix}/model-{r:05d}"
        write_repo(root, repo_id, [
            {"title": f"commit {i}", "files": {"config.json": CONFIG,
                                                "generation_config.json": {"temperature": round(0.5 + i / 100, 2)}}}
            for i in range(commits)])
        ids.append(repo_id)
    return ids


@dataclass
class Outcome:
    """What one run left, and when. Times are seconds since the workers started."""

    workers: int
    repos: int
    revisions: int = 0
    revisions_expected: int = 0
    duplicate_revisions: int = 0  # (repo, sha) stored more than once
    duplicate_events: int = 0  # one event (repo, sha, kind) stored more than once
    deliveries_expected: int = 0  # delivery rows (one per event and subscription)
    deliveries_received: int = 0  # distinct webhook-ids the receiver got
    deliveries_redundant: int = 0  # a webhook-id received again (a send cut by the kill, then redone)
    baseline_s: float = 0.0  # all baselines stored
    moved_s: float = 0.0  # from the first move revealed to the last revision stored
    moved_revisions: int = 0
    delivered_s: float = 0.0  # to the last delivery
    killed_at_s: float | None = None
    killed_leases: int = 0  # watches the killed worker held when it died
    takeover_s: float | None = None  # kill -> none of them held by the dead worker any more
    worker_cpu_s: float = 0.0  # CPU seconds the workers used, all of them (the killed one until its kill)

    @property
    def moved_per_min(self) -> float:
        return 60 * self.moved_revisions / self.moved_s if self.moved_s else 0.0

    @property
    def cpu_ms_per_revision(self) -> float:
        return 1000 * self.worker_cpu_s / self.revisions if self.revisions else 0.0


class Fleet:
    """`workers` daemons on `database_url` (migrated and empty), against a replay of `histories`."""

    def __init__(self, workdir: Path, histories: Path, repo_ids: list[str], database_url: str, workers: int,
                 lease_s: int = 5) -> None:
        self.workdir, self.histories, self.repo_ids = workdir, histories, repo_ids
        self.database_url, self.workers, self.lease_s = database_url, workers, lease_s
        workdir.mkdir(parents=True, exist_ok=True)

    def run(self, moves: int, kill_one: bool = False, rounds: int = 4, timeout_s: float = 900) -> Outcome:
        with ReplayServer(roots=[self.histories]) as replay, OsvFake() as osv:
            receiver = RecordingReceiver(delay_s=0.0)
            engine = sa.create_engine(self.database_url)
            try:
                return self._run(replay, osv, receiver, engine, moves, kill_one, rounds, timeout_s)
            finally:
                receiver.stop()
                engine.dispose()

    def _run(self, replay: ReplayServer, osv: OsvFake, receiver: RecordingReceiver, engine: sa.Engine, moves: int,
             kill_one: bool, rounds: int, timeout_s: float) -> Outcome:
        config = self._config(replay.endpoint, osv.endpoint, receiver)
        for repo_id in self.repo_ids:
            replay.set_head(repo_id, 1)
        set_up(config, "watch", "add", *self.repo_ids)  # in this process: the daemons' start is what is tested
        out = Outcome(self.workers, len(self.repo_ids), revisions_expected=len(self.repo_ids) * (1 + moves))
        logs = [(self.workdir / f"worker-{n}.log").open("wb") for n in range(self.workers)]
        procs = [start_daemon(config, log) for log in logs]
        started = time.monotonic()
        deadline = started + timeout_s
        try:
            n = len(self.repo_ids)
            if kill_one and not moves:  # no moves to land in: the kill lands in the baselines' polls
                self._kill(procs, engine, out, started, wanted=2)
            _wait(lambda: _count(engine, "revision") >= n, deadline)
            out.baseline_s = time.monotonic() - started
            first_move = time.monotonic()
            per_round = -(-n * moves // rounds)
            pending = [r for _ in range(moves) for r in self.repo_ids]
            revealed = 0
            while pending:
                batch, pending = pending[:per_round], pending[per_round:]
                for repo_id in batch:
                    replay.advance(repo_id)
                revealed += len(batch)
                if kill_one and out.killed_at_s is None:  # in the first round, while the workers are busiest
                    self._kill(procs, engine, out, started)
                # the next round when most of this one is in: the workers stay busy, the listing stays short
                _wait(lambda r=revealed: _count(engine, "revision") >= n + r * 0.8, deadline)
            _wait(lambda: _count(engine, "revision") >= out.revisions_expected, deadline)
            out.moved_s = time.monotonic() - first_move
            out.moved_revisions = _count(engine, "revision") - n
            expected = _count(engine, "delivery")
            _wait(lambda: _pending(engine) == 0 and len({a.webhook_id for a in receiver.arrivals}) >= expected, deadline)
            out.delivered_s = time.monotonic() - started
        finally:
            out.worker_cpu_s += sum(_cpu_s(proc.pid) for proc in procs if proc.poll() is None)
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
            for log in logs:
                log.close()
        self._tally(engine, receiver, out)
        return out

    def _kill(self, procs: list[subprocess.Popen], engine: sa.Engine, out: Outcome, started: float,
              wanted: int = 5) -> None:
        """SIGKILL the worker that holds the most leases, at the first moment (within 10 s) one holds
        `wanted` (else the most seen), and time the takeover: until none of its watches is leased to it."""
        limit = time.monotonic() + 10
        held: dict[int, list[int]] = {}
        while time.monotonic() < limit:
            now = {p.pid: ids for p in procs if p.poll() is None and (ids := _held_by(engine, f":{p.pid}:"))}
            if sum(map(len, now.values())) >= sum(map(len, held.values())):
                held = now
            if any(len(ids) >= wanted for ids in held.values()):
                break
            time.sleep(0.005)
        victim = max(procs, key=lambda p: len(held.get(p.pid, [])))
        out.worker_cpu_s += _cpu_s(victim.pid)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        killed = time.monotonic()
        out.killed_at_s = killed - started
        prefix = f":{victim.pid}:"
        out.killed_leases = len(_held_by(engine, prefix))
        _wait(lambda: not _held_by(engine, prefix), killed + 120, step_s=0.05)
        out.takeover_s = time.monotonic() - killed

    def _tally(self, engine: sa.Engine, receiver: RecordingReceiver, out: Outcome) -> None:
        with engine.connect() as conn:
            out.revisions = conn.execute(sa.text("SELECT COUNT(*) FROM revision")).scalar_one()
            out.duplicate_revisions = out.revisions - conn.execute(sa.text(
                "SELECT COUNT(*) FROM (SELECT DISTINCT repo_id, sha FROM revision) AS d")).scalar_one()
            out.duplicate_events = conn.execute(sa.text(
                "SELECT COALESCE(SUM(n - 1), 0) FROM (SELECT COUNT(*) AS n FROM event WHERE sha IS NOT NULL"
                " GROUP BY repo_id, sha, kind) AS e")).scalar_one()
            out.deliveries_expected = conn.execute(sa.text("SELECT COUNT(*) FROM delivery")).scalar_one()
        ids = [a.webhook_id for a in receiver.arrivals]
        out.deliveries_received = len(set(ids))
        out.deliveries_redundant = len(ids) - len(set(ids))

    def _config(self, hub: str, osv: str, receiver: RecordingReceiver) -> Path:
        hooks = webhook_sections(receiver)
        path = self.workdir / "hubwatch.toml"
        path.write_text(f"""
[hub]
endpoint = "{hub}"
api_requests_per_5min = 0
resolve_requests_per_5min = 0
[storage]
url = "{self.database_url}"
[osv]
api_url = "{osv}"
[server]
port = 0
[poll]
jitter = "0s"
default_interval = "1h"
listing = "on"
listing_interval = "1s"
coordination = "shared"
lease = "{self.lease_s}s"
[log]
level = "warning"
format = "json"
[delivery]
allow_private_targets = true
poll_interval_s = 0.5
timeout_s = 5.0
{hooks}""", encoding="utf-8")
        return path


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait(predicate, deadline: float, step_s: float = 0.2) -> None:
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the workers did not get there in time")
        time.sleep(step_s)


def _count(engine: sa.Engine, table: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one())


def _pending(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT COUNT(*) FROM delivery WHERE status = 'pending'")).scalar_one())


def _held_by(engine: sa.Engine, prefix: str) -> list[int]:
    """Watches whose lease names the worker with this pid (live or expired, not yet taken over)."""
    with engine.connect() as conn:
        return [row[0] for row in conn.execute(
            sa.text("SELECT id FROM watch WHERE leased_by LIKE :p"), {"p": f"%{prefix}%"})]
