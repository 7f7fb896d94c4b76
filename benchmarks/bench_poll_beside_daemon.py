"""Figure: `hubwatch poll` alone, and beside a running `hubwatch run` on the same SQLite file.

N repos on the Hub replay server, watched and baselined; then `hubwatch poll` (a subprocess, as a user runs
it: every watch unchanged, one head check each) is timed `--runs` times with no daemon, then as many times
while `hubwatch run` runs on the same database file. Prints the medians and their ratio.

Also printed: the daemon's CPU share while the polls beside it ran (from /proc), which tells a poll slowed
by CPU contention on a small machine from one waiting on the database.

Baseline (issue 21): 3.3 s median alone, 6.2 s median beside a daemon (1.9x).
Run: python -m benchmarks run poll_beside_daemon   (size: repos, default 100; 7 runs each)
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tests.support.synthetic_repos import CONFIG, write_repo
from tracker.standins.osv import OsvFake
from tracker.standins.replay.control import ReplayServer

BEFORE = {"alone_s": 3.3, "beside_s": 6.2}  # issue 21's medians
BENCHMARK = Benchmark(
    name="poll_beside_daemon",
    about="`hubwatch poll` of unchanged repos alone, and beside a running `hubwatch run` on the same SQLite file",
    tags=("slow", "cli", "daemon"),
    size="repos (default 100)",
    small=20,
    timeout_s=900,
    figures=(
        Figure("hubwatch poll alone, median", "s", baseline=BEFORE["alone_s"], baseline_at="issue 21"),
        Figure("hubwatch poll beside the daemon, median", "s", baseline=BEFORE["beside_s"], baseline_at="issue 21"),
        Figure("beside / alone", "ratio", baseline=BEFORE["beside_s"] / BEFORE["alone_s"], baseline_at="issue 21"),
        Figure("the daemon's CPU share meanwhile", "% of a core"),
    ),
)


def _cli(config: Path, *args: str, stdin: str | None = None) -> float:
    """`hubwatch --config CONFIG ARGS` to completion (it must succeed); its wall time in seconds."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tracker", "--config", str(config), *args], input=stdin, text=True,
                   check=True, capture_output=True, env={**os.environ, "HF_HUB_OFFLINE": "0"})
    return time.perf_counter() - started


def _config(path: Path, hub: str, osv: str, db: Path) -> Path:
    path.write_text(
        f'[hub]\nendpoint = "{hub}"\n\n[storage]\nurl = "sqlite:///{db}"\n\n[osv]\napi_url = "{osv}"\n\n'
        '[poll]\njitter = "0"\n\n[server]\nport = 0\n\n[log]\nlevel = "info"\n', encoding="utf-8")
    return path


def _start_daemon(config: Path, log: Path) -> subprocess.Popen:
    """`hubwatch run`, once it says its scheduler started."""
    out = log.open("ab")
    proc = subprocess.Popen([sys.executable, "-m", "tracker", "--config", str(config), "run"],
                            stdout=out, stderr=out, env={**os.environ, "HF_HUB_OFFLINE": "0"})
    deadline = time.monotonic() + 60
    while "scheduler_started" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the daemon did not start:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.1)
    return proc


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used so far; 0.0 where /proc cannot tell."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_polls(repos: int, runs: int, workdir: Path) -> dict[str, list[float]]:
    root = workdir / "histories"
    ids = [f"bench/model-{r:04d}" for r in range(repos)]
    for repo_id in ids:
        write_repo(root, repo_id, [{"title": "initial", "files": {"config.json": CONFIG}}])
    db = workdir / "hubwatch.db"
    with ReplayServer(roots=[root]) as replay, OsvFake() as osv:
        config = _config(workdir / "hubwatch.toml", replay.endpoint, osv.endpoint, db)
        _cli(config, "watch", "add", "--file", "-", stdin="\n".join(ids) + "\n")
        _cli(config, "poll")  # the baselines: every later poll finds each repo unchanged
        alone = [_cli(config, "poll") for _ in range(runs)]
        daemon = _start_daemon(config, workdir / "daemon.log")
        try:
            cpu_before, started = _cpu_s(daemon.pid), time.perf_counter()
            beside = [_cli(config, "poll") for _ in range(runs)]
            share = (_cpu_s(daemon.pid) - cpu_before) / (time.perf_counter() - started)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(30)
    return {"alone": alone, "beside": beside, "daemon_cpu_share": [share]}


def measure(size: int | None = None) -> dict[str, float]:
    repos, runs = size or 100, 7
    with tempfile.TemporaryDirectory(prefix="hubwatch-bench-beside-") as tmp:
        times = measure_polls(repos, runs, Path(tmp))
    [share] = times.pop("daemon_cpu_share")
    alone, beside = statistics.median(times["alone"]), statistics.median(times["beside"])
    for name, values in times.items():
        detail(f"  {name:<7} {statistics.median(values):6.2f} s  ({min(values):.2f}-{max(values):.2f}) over {runs} runs, {repos} repos")
    return {"hubwatch poll alone, median": alone, "hubwatch poll beside the daemon, median": beside,
            "beside / alone": beside / alone, "the daemon's CPU share meanwhile": 100 * share}


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
