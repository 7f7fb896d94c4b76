"""Figure (issue 27, item 3): CPU per moved revision in one worker, and Hub requests per revision, against the
baseline of about 113 ms of CPU per moved revision.

The replay server runs in its own process (`--synthetic N`), so the CPU measured (process_time of this process)
is hubwatch's alone; requests are counted at the server. Each synthetic repo's move rewrites config.json only
(as the baseline's did): the new per-revision work of this session (GGUF/pickle scans of weight files, the
template engine matrix, the tokenizer-behaviour worker) is not exercised by such moves. Steps:
  1. N watches baselined (one poll each; not measured);
  2. every repo moved one commit; one `Poller.poll` of half of them: CPU ms and requests per revision;
  3. the other half polled under cProfile: its top functions by cumulative time (where the CPU goes).
Run: .venv/bin/python benchmarks/bench_ingest_cpu.py [N] (default 1000; several minutes on two busy cores)
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tracker.app import App
from tracker.config import settings_from_mapping
from tracker.logs import configure_logging
from tracker.standins.replay.__main__ import synthetic_ids

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
BASELINE_CPU_MS = 113.0


def _admin(endpoint: str, path: str, method: str = "GET") -> object:
    request = urllib.request.Request(f"{endpoint}/_replay/{path}", method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read())


def _requests(endpoint: str) -> int:
    count = len(_admin(endpoint, "requests"))  # type: ignore[arg-type]
    _admin(endpoint, "reset-requests", "POST")
    return count


def main() -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "tracker.standins.replay", "--port", "0", "--no-bundled", "--synthetic", str(N)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        endpoint = server.stdout.readline().strip()  # type: ignore[union-attr]
        with tempfile.TemporaryDirectory() as tmp:
            _run(endpoint, Path(tmp))
    finally:
        server.terminate()
        server.wait()


def _run(endpoint: str, tmp: Path) -> None:
    settings = settings_from_mapping(
        {"hub": {"endpoint": endpoint}, "storage": {"url": f"sqlite:///{tmp / 'bench.db'}"},
         "osv": {"enabled": False}, "log": {"level": "warning"}},
        env={}, source="bench",
    )
    configure_logging(settings.log)
    app = App(settings)
    ids = synthetic_ids(N)
    for repo_id in ids:
        app.store.watches.add_watch(repo_id, "main", 900)
    assert not any(o.failed for o in app.poller.poll(ids))
    for repo_id in ids:
        _admin(endpoint, f"advance/{repo_id}", "POST")
    _requests(endpoint)

    half = len(ids) // 2
    plain, profiled = ids[:half], ids[half:]
    cpu0 = time.process_time()
    wall0 = time.perf_counter()
    outcomes = app.poller.poll(plain)  # the figure: no profiler
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    revisions = sum(len(o.revisions) for o in outcomes)
    requests = _requests(endpoint)
    assert revisions == len(plain) and not any(o.failed for o in outcomes)
    profile = cProfile.Profile()
    cpu1 = time.process_time()
    profile.enable()
    profiled_outcomes = app.poller.poll(profiled)  # where the time goes (the profiler's overhead included)
    profile.disable()
    profiled_cpu = time.process_time() - cpu1
    assert sum(len(o.revisions) for o in profiled_outcomes) == len(profiled)
    per_rev = 1000 * cpu / revisions
    print(f"{N} moved revisions (config.json only, as the baseline's), one worker, replay server in its own process")
    print(f"  CPU per revision: {per_rev:.1f} ms over {revisions} (baseline ~{BASELINE_CPU_MS:.0f} ms:"
          f" {BASELINE_CPU_MS / per_rev:.2f}x less; goal: half, {BASELINE_CPU_MS / 2:.0f} ms)")
    print(f"  requests per revision: {requests / revisions:.2f} (counted at the server);"
          f" wall {1000 * wall / revisions:.1f} ms per revision")
    print(f"  under cProfile ({len(profiled)} more): {1000 * profiled_cpu / len(profiled):.1f} ms CPU per revision;"
          " top by cumulative time:")
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(30)
    print(out.getvalue())
    app.store.engine.dispose()


if __name__ == "__main__":
    main()
