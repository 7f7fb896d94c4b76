"""Kill `hubwatch run` with SIGKILL at random points and compare with an uninterrupted run.

A replay of synthetic histories whose heads advance while the daemon runs (so kills land during
ingests and deliveries), the OSV fake, and a recording receiver for two signed webhook subscriptions.
Each kill restarts the daemon at once;
half the kills wait for a moment when a worker holds an endpoint (a send in flight), and the next
kill waits until the restarted worker has taken the killed one's endpoints over. The outcome: revisions lost or duplicated, deliveries lost,
redundant (one webhook-id received twice: allowed, reported) or out of order per subscription, and how
long a restarted worker took to take over the endpoints the killed one held.
"""

from __future__ import annotations

import base64
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.support.synthetic_repos import CONFIG, write_repo
from tracker.standins.osv import OsvFake
from tracker.standins.replay.control import ReplayServer

SECRET = "whsec_" + base64.b64encode(b"hubwatch-crash-secret-0123456789").decode()
PATHS = ("/hook/a", "/hook/b")
BUSY = "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end: pass\n"  # one core, at most 10 min


@dataclass(frozen=True)
class Arrival:
    at: float  # time.monotonic()
    path: str
    webhook_id: str
    seq: int


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a killed daemon resets its connections: expected here, not worth a traceback


class RecordingReceiver:
    """Answers every webhook 204 after `delay_s`, recording when each webhook-id arrived where."""

    def __init__(self, delay_s: float = 0.05) -> None:
        self.arrivals: list[Arrival] = []
        lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                arrival = Arrival(time.monotonic(), self.path, self.headers["webhook-id"], json.loads(body)["data"]["seq"])
                time.sleep(delay_s)  # a receiver that takes a moment: kills land mid-send
                with lock:
                    receiver.arrivals.append(arrival)
                self.send_response(204)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - BaseHTTPRequestHandler's signature
                pass

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{path}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def write_histories(root: Path, repos: int, commits: int) -> list[str]:
    """`repos` repos of `commits` commits, each changing the generation config (one event per revision)."""
    ids = []
    for r in range(repos):
        repo_id = f"crash/model-{r}"
        history = [{"title": f"commit {i}", "files": {"config.json": CONFIG,
                                                       "generation_config.json": {"temperature": round(0.5 + i / 100, 2)}}}
                   for i in range(commits)]
        write_repo(root, repo_id, history)
        ids.append(repo_id)
    return ids


@dataclass
class Run:
    """What one run left: revisions in the database, deliveries (id -> path), what the receiver got."""

    revisions: list[tuple[str, str]]
    deliveries: dict[str, str]
    pending: int
    arrivals: list[Arrival]
    kills: list[dict[str, object]] = field(default_factory=list)


@dataclass
class Report:
    revisions: int
    revisions_lost: int
    revisions_duplicated: int
    deliveries: int
    deliveries_lost: int
    deliveries_redundant: int
    deliveries_out_of_order: int
    max_lateness_s: float
    kills: int
    kills_during_ingest: int
    kills_with_claims: int
    takeover_s: list[float]
    first_delivery_s: list[float]

    def lines(self) -> list[str]:
        return [
            f"kills: {self.kills} ({self.kills_during_ingest} during ingest, {self.kills_with_claims} holding endpoint claims)",
            f"revisions: {self.revisions}; lost {self.revisions_lost}, duplicated {self.revisions_duplicated}",
            f"deliveries: {self.deliveries}; lost {self.deliveries_lost}, redundant (same webhook-id again) "
            f"{self.deliveries_redundant}, out of order {self.deliveries_out_of_order} (latest by {self.max_lateness_s:.1f} s)",
            f"takeover of a killed worker's endpoints (kill -> logged by the restarted worker): {_spread(self.takeover_s)}",
            f"kill -> first delivery on those endpoints: {_spread(self.first_delivery_s)}",
        ]


def _spread(seconds: list[float]) -> str:
    t = sorted(seconds)
    return f"median {t[len(t) // 2]:.1f} s, max {t[-1]:.1f} s over {len(t)} kills holding claims" if t else "no kill held a claim"


def compare(reference: Run, crashed: Run) -> Report:
    ref_revs, revs = set(reference.revisions), crashed.revisions
    expected = set(reference.deliveries) | set(crashed.deliveries)
    seen: dict[str, int] = {}
    for a in crashed.arrivals:
        seen[a.webhook_id] = seen.get(a.webhook_id, 0) + 1
    out_of_order, lateness = _out_of_order(crashed.arrivals)
    return Report(
        revisions=len(set(revs)),
        revisions_lost=len(ref_revs - set(revs)),
        revisions_duplicated=len(revs) - len(set(revs)),
        deliveries=len(expected),
        deliveries_lost=len(expected - set(seen)),
        deliveries_redundant=sum(n - 1 for n in seen.values()),
        deliveries_out_of_order=out_of_order,
        max_lateness_s=lateness,
        kills=len(crashed.kills),
        kills_during_ingest=sum(bool(k["ingesting"]) for k in crashed.kills),
        kills_with_claims=sum(bool(k["claimed"]) for k in crashed.kills),
        takeover_s=[float(k["takeover_s"]) for k in crashed.kills if k.get("takeover_s") is not None],  # type: ignore[arg-type]
        first_delivery_s=[float(k["delivery_s"]) for k in crashed.kills if k.get("delivery_s") is not None],  # type: ignore[arg-type]
    )


def _out_of_order(arrivals: list[Arrival]) -> tuple[int, float]:
    """Per subscription, first arrivals that came after a later event's: how many, and the worst delay."""
    count, worst = 0, 0.0
    for path in PATHS:
        first: dict[str, Arrival] = {}
        for a in sorted((a for a in arrivals if a.path == path), key=lambda a: a.at):
            first.setdefault(a.webhook_id, a)
        ordered = sorted(first.values(), key=lambda a: a.at)
        for i, a in enumerate(ordered):
            overtaken = [b for b in ordered[:i] if b.seq > a.seq]
            if overtaken:
                count += 1
                worst = max(worst, a.at - overtaken[0].at)
    return count, worst


def webhook_sections(receiver: RecordingReceiver) -> str:
    """Config text: one signed generic subscription per path of `receiver`, every event."""
    return "".join(
        f'\n[[webhooks]]\nurl = "{receiver.url(path)}"\nformat = "generic"\nsecret_env = "CRASH_HOOK_SECRET"\n'
        f'min_severity = "info"\n'
        for path in PATHS
    )


def daemon_env() -> dict[str, str]:
    return {**os.environ, "CRASH_HOOK_SECRET": SECRET, "HUBWATCH_API_TOKEN": "", "HF_HUB_OFFLINE": "0"}


def run_cli(config: Path, *args: str, stdin: str | None = None) -> None:
    """`hubwatch --config CONFIG ARGS` to completion (raises when it fails)."""
    subprocess.run([sys.executable, "-m", "tracker", "--config", str(config), *args], input=stdin, text=True,
                   env=daemon_env(), check=True, capture_output=True)


def set_up(config: Path, *args: str) -> None:
    """`hubwatch --config CONFIG ARGS` in this process (the set-up before the daemon starts: the process is not what is
    tested there, and a start costs 1-2 CPU-s of imports); raises when it fails."""
    from tests.support.cli import run_cli as run_in_process

    result = run_in_process(*args, config=config, env={"CRASH_HOOK_SECRET": SECRET, "HUBWATCH_API_TOKEN": ""})
    if result.returncode != 0:
        raise RuntimeError(f"hubwatch {' '.join(args)} failed ({result.returncode}): {result.stderr[-2000:]}")


def start_daemon(config: Path, log: object) -> subprocess.Popen:
    """`hubwatch run` in the background, its output to `log`."""
    return subprocess.Popen([sys.executable, "-m", "tracker", "--config", str(config), "run"],
                            env=daemon_env(), stdout=log, stderr=log)  # type: ignore[arg-type]


class Scenario:
    """One daemon run against fresh servers and database, with `kills` SIGKILLs at random moments."""

    def __init__(self, workdir: Path, histories: Path, repo_ids: list[str], seed: int = 1, hub_budget: bool = True) -> None:
        """`hub_budget=False`: no Hub request budget ([hub] ... = 0), so that every watch is polled at its 1 s interval;
        under hubwatch's default budget 16 watches' 1 s polls do not fit and the scheduler stretches every interval
        (4-5 s each, logged as hub_budget_stretched)."""
        self.workdir, self.histories, self.repo_ids = workdir, histories, repo_ids
        self.hub_budget = hub_budget
        self.random = random.Random(seed)
        workdir.mkdir(parents=True, exist_ok=True)

    def run(self, kills: int, gap_s: tuple[float, float] = (0.5, 3.0), timeout_s: float = 600, busy_cpu: bool = False,
            kill_at: tuple[str, ...] = (), reveal_s: float | None = None, lease_s: float | None = None,
            receiver_delay_s: float = 0.05) -> Run:
        """`busy_cpu`: another process keeps a core busy from the daemon's first work (a delivery sent or a revision
        stored) to its stop: through its ingests and deliveries, not its set-up nor its start-up (~2 CPU-s of imports).
        `kill_at`: where each kill lands, one per kill ("ingest": the first moment the daemon has stored a revision
        of its own with more revealed; "delivery": the first moment a worker holds an endpoint with deliveries to
        go); by default half the kills wait for a delivery, the others land at once. `reveal_s`: the seconds over
        which the commits are revealed (by default, about the time the kills take). `lease_s`: the config's
        `[delivery] lease_s` (by default hubwatch's own). `receiver_delay_s`: how long the receiver takes to answer
        each webhook (a moment, so that kills land mid-send)."""
        if kill_at and len(kill_at) != kills or set(kill_at) - {"ingest", "delivery"}:
            raise ValueError(f"kill_at names where each of the {kills} kills lands: 'ingest' or 'delivery', got {kill_at}")
        with ReplayServer(roots=[self.histories]) as replay, OsvFake() as osv:
            receiver = RecordingReceiver(receiver_delay_s)
            try:
                return self._run(replay, osv, receiver, kills, gap_s, timeout_s, busy_cpu, kill_at, reveal_s, lease_s)
            finally:
                receiver.stop()

    def polled(self) -> Run:
        """The reference without a daemon: the same set-up (watched from the first commits, a baseline poll), then
        one `hubwatch poll` with every commit revealed; the revisions stored and the deliveries queued (none sent).
        Delivery ids name the event and the subscription (storage/delivery_queue.py), so a daemon's run, killed or
        not, queues the same ones."""
        with ReplayServer(roots=[self.histories]) as replay, OsvFake() as osv:
            receiver = RecordingReceiver()
            try:
                db = self.workdir / "hubwatch.db"
                config = self._config(replay.endpoint, osv.endpoint, db, receiver)
                for repo_id in self.repo_ids:
                    replay.set_head(repo_id, 1)
                set_up(config, "watch", "add", *self.repo_ids, "--interval", "1s")
                set_up(config, "poll")
                for repo_id in self.repo_ids:
                    replay.set_head(repo_id, len(replay.commits(repo_id)))
                set_up(config, "poll")
            finally:
                receiver.stop()
        return Run(_revisions(db), _deliveries(db), _state(db)["pending"], [])  # type: ignore[arg-type]

    def _run(self, replay: ReplayServer, osv: OsvFake, receiver: RecordingReceiver, kills: int,
             gap_s: tuple[float, float], timeout_s: float, busy_cpu: bool, kill_at: tuple[str, ...],
             reveal_s: float | None, lease_s: float | None) -> Run:
        db = self.workdir / "hubwatch.db"
        config = self._config(replay.endpoint, osv.endpoint, db, receiver, lease_s)
        total = sum(len(replay.commits(r)) for r in self.repo_ids)
        for repo_id in self.repo_ids:  # watched from their first commit; the rest revealed below
            replay.set_head(repo_id, 1)
        set_up(config, "watch", "add", *self.repo_ids, "--interval", "1s")
        set_up(config, "poll")  # the baselines: from here on every commit is ingested
        baseline = _state(db)["revisions"]
        # Reveal the commits over about the time the kills take, so they land during ingests.
        if reveal_s is None:
            reveal_s = kills * (sum(gap_s) / 2 + 6)  # a gap, and a takeover, per kill
        step_s = reveal_s / total if kills else 0.0
        stop = threading.Event()
        advancer = threading.Thread(target=self._advance, args=(replay, step_s, stop), daemon=True)
        advancer.start()
        log = (self.workdir / "daemon.log").open("ab")
        before = _state(db)
        proc = start_daemon(config, log)
        burner = None
        records: list[dict[str, object]] = []
        try:
            if busy_cpu:
                _wait_for_work(db, before)
                burner = subprocess.Popen([sys.executable, "-c", BUSY])
            for i in range(kills):
                time.sleep(self.random.uniform(*gap_s))
                if kill_at:
                    state = self._kill_point(db, mid_delivery=kill_at[i] == "delivery",
                                             mid_ingest=(replay, baseline) if kill_at[i] == "ingest" else None, timeout_s=30)
                else:
                    state = self._kill_point(db, mid_delivery=self.random.random() < 0.5)
                baseline = state["revisions"]  # type: ignore[assignment]
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                killed_at = time.monotonic()
                revealed = sum(replay.head_count(r) for r in self.repo_ids)
                records.append({"at": killed_at, "wall": time.time(), "ingesting": state["revisions"] < revealed,
                                "claimed": state["claimed"]})
                proc = start_daemon(config, log)
                self._await_takeover(db, set(state["claimed"].values()))  # type: ignore[union-attr]
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                state = _state(db)
                if state["revisions"] >= total and state["pending"] == 0 and state["deliveries"]:
                    break
                time.sleep(0.3)
        finally:
            stop.set()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()
            if burner is not None:
                burner.kill()
                burner.wait()
        arrivals = sorted(receiver.arrivals, key=lambda a: a.at)
        takeovers = _takeovers_logged(self.workdir / "daemon.log")
        for record in records:
            paths = record["claimed"]
            after = [a.at for a in arrivals if a.at > record["at"] and a.path in paths]  # type: ignore[operator]
            record["delivery_s"] = (after[0] - record["at"]) if paths and after else None  # type: ignore[operator]
            logged = [t for t, worker in takeovers if t > record["wall"] and worker in paths.values()]  # type: ignore[operator,union-attr]
            record["takeover_s"] = (logged[0] - record["wall"]) if paths and logged else None  # type: ignore[operator]
        return Run(_revisions(db), _deliveries(db), _state(db)["pending"], arrivals, records)  # type: ignore[arg-type]

    def _kill_point(self, db: Path, mid_delivery: bool, timeout_s: float = 5,
                    mid_ingest: tuple[ReplayServer, int] | None = None) -> dict[str, object]:
        """Now, or the first moment within `timeout_s` that a worker holds an endpoint with deliveries to go
        (`mid_delivery`), or that the daemon has stored more than `mid_ingest`'s count of revisions and its
        replay has revealed more still (an ingest under way): the database state the kill leaves."""
        deadline = time.monotonic() + timeout_s

        def waiting(state: dict[str, object]) -> bool:
            if mid_delivery:
                return not state["claimed"]
            if mid_ingest:
                replay, stored = mid_ingest
                revealed = sum(replay.head_count(r) for r in self.repo_ids)
                return not stored < state["revisions"] < revealed  # type: ignore[operator]
            return False

        state = _state(db)
        while waiting(state) and time.monotonic() < deadline:
            time.sleep(0.01)
            state = _state(db)
        return state

    def _await_takeover(self, db: Path, killed: set[str], timeout_s: float = 30) -> None:
        """Before the next kill, let the restarted worker take the killed one's endpoints over (so each
        kill's takeover is measured on its own, not after a string of kills)."""
        deadline = time.monotonic() + timeout_s
        while killed and time.monotonic() < deadline:
            if not killed & set(_state(db)["claimed"].values()):  # type: ignore[union-attr]
                return
            time.sleep(0.1)

    def _advance(self, replay: ReplayServer, step_s: float, stop: threading.Event) -> None:
        while not stop.is_set():
            open_repos = [r for r in self.repo_ids if replay.head_count(r) < len(replay.commits(r))]
            if not open_repos:
                return
            replay.advance(self.random.choice(open_repos))
            stop.wait(step_s)

    def _config(self, hub: str, osv: str, db: Path, receiver: RecordingReceiver, lease_s: float | None = None) -> Path:
        hooks = webhook_sections(receiver)
        lease = "" if lease_s is None else f"lease_s = {lease_s}\n"
        budget = "" if self.hub_budget else "api_requests_per_5min = 0\nresolve_requests_per_5min = 0\n"
        text = f"""
[hub]
endpoint = "{hub}"
{budget}[storage]
url = "sqlite:///{db}"
[osv]
api_url = "{osv}"
[server]
port = 0
[poll]
jitter = "0s"
[log]
level = "warning"
[delivery]
allow_private_targets = true
poll_interval_s = 0.2
timeout_s = 5.0
{lease}{hooks}"""
        path = self.workdir / "hubwatch.toml"
        path.write_text(text, encoding="utf-8")
        return path


def _wait_for_work(db: Path, before: dict[str, object], timeout_s: float = 120) -> None:
    """Until the daemon has sent a delivery or stored a revision since `before` (its state at the daemon's start)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = _state(db)
        if state["pending"] < before["pending"] or state["revisions"] > before["revisions"]:  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise TimeoutError(f"the daemon did no work within {timeout_s:.0f} s of its start")


def _takeovers_logged(log: Path) -> list[tuple[float, str]]:
    """When (epoch seconds) a restarted worker logged taking over an endpoint, and from which worker."""
    taken = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if '"webhook_endpoint_taken_over"' in line:
            record = json.loads(line)
            stamp = datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00")).timestamp()
            taken.append((stamp, record["from_worker"]))
    return sorted(taken)


def _connect(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)


def _state(db: Path) -> dict[str, object]:
    """Counts read straight from the database, and the endpoints (paths) a worker holds a claim on
    while they have deliveries to go."""
    if not db.exists():
        return {"revisions": 0, "pending": 0, "deliveries": 0, "claimed": {}}
    with _connect(db) as conn:
        revisions = conn.execute("SELECT COUNT(*) FROM revision").fetchone()[0]
        pending, deliveries = conn.execute(
            "SELECT COALESCE(SUM(status = 'pending'), 0), COUNT(*) FROM delivery").fetchone()
        claimed = {url[url.index("/hook"):]: worker for url, worker in conn.execute(
            "SELECT url, claimed_by FROM subscription s WHERE claimed_by IS NOT NULL AND EXISTS"
            " (SELECT 1 FROM delivery d WHERE d.subscription_id = s.id AND d.status = 'pending')")}
    return {"revisions": revisions, "pending": pending, "deliveries": deliveries, "claimed": claimed}


def _revisions(db: Path) -> list[tuple[str, str]]:
    with _connect(db) as conn:
        return [tuple(row) for row in conn.execute("SELECT repo_id, sha FROM revision")]  # type: ignore[misc]


def _deliveries(db: Path) -> dict[str, str]:
    with _connect(db) as conn:
        rows = conn.execute("SELECT d.id, s.url FROM delivery d JOIN subscription s ON s.id = d.subscription_id")
        return {did: url[url.index("/hook"):] for did, url in rows}


def crash_report(workdir: Path, kills: int, repos: int = 4, commits: int = 20, seed: int = 1) -> tuple[Report, Run, Run]:
    """The uninterrupted run, the run with `kills` kills, and their comparison."""
    histories = workdir / "histories"
    repo_ids = write_histories(histories, repos, commits)
    reference = Scenario(workdir / "reference", histories, repo_ids, seed).run(kills=0)
    crashed = Scenario(workdir / "crashed", histories, repo_ids, seed).run(kills=kills)
    return compare(reference, crashed), reference, crashed
