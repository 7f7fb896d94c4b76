"""Figure (issue 27, item 3): CPU per moved revision in one worker, and Hub requests per revision, against the
issue's baseline of about 113 ms of CPU per moved revision and this session's figure before its changes.

The replay server runs in its own process (`--synthetic N`), so the CPU measured is hubwatch's: this process's,
plus its children's (the template render workers and the tokenizer-behaviour worker, which a template or
tokenizer move starts), never the server's; requests are counted at the server. Logging is what `hubwatch run`
does: JSON lines at info, here into a file. Three moves, each its own server and database:
  plain     N one-file repos whose move rewrites a one-line config.json shared by every repo (the previous
            benchmark's scenario: nothing to download after the first repo);
  config    N copies of a real repo (tracker/standins/replay/realistic.py: Llama-3.1-8B-Instruct's 14 files,
            weight shards with real safetensors headers, a pickled checkpoint, tokenizer_config.json, a chat
            template, a README and a 711 KB tokenizer.json) whose move rewrites its own config.json;
  template  copies of that repo whose move changes the chat template and tokenizer.json (the template engine
            matrix and the tokenizer-behaviour worker run for each): `--template-n` of them, default 50.
Steps for each: the repos baselined (one poll each; not measured), every repo moved one commit, one
`Poller.poll` of them all: CPU ms and requests per revision. `--profile MOVE` adds a cProfile of that move's
poll (top functions by internal time). `--db URL` stores in that database instead of a SQLite file (it must be
empty). Run: python -m benchmarks run ingest_cpu   (size: plain repos, default 1,000; config and template moves
scale with it, 1/5 and 1/20); as a script also [--moves plain,config] [--profile MOVE] [--db URL] [--log off]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tracker.cli.app import App
from tracker.cli.logs import configure_logging
from tracker.config import settings_from_mapping
from tracker.standins.replay.__main__ import synthetic_ids

BASELINE_CPU_MS = 113.0  # the figure
# CPU ms per revision by move before this session's changes (the ingest code of cd8d83a with the stand-in of
# 62ef92e; defaults: plain 1,000, config 200, template 50; JSON logs at info; SQLite): what "halve" is measured
# against. The 113 ms came from bench_workers.py: a whole `hubwatch run` worker's CPU (listing, leases,
# webhook deliveries included) on PostgreSQL, divided by revisions; this benchmark measures the ingest alone.
BEFORE_CPU_MS = {"plain": 20.8, "config": 118.3, "template": 790.5}
# Hub requests per revision by move at the same commit (counted at the server): each file downloaded cost a HEAD
# and a GET through hf_hub_download then; one GET now.
BEFORE_REQUESTS = {"plain": 3.0, "config": 5.0, "template": 7.0}
BEFORE_AT = "this session's start (cd8d83a ingest, 62ef92e stand-in)"
MOVES = ("plain", "config", "template")
BENCHMARK = Benchmark(
    name="ingest_cpu",
    about="CPU per moved revision in one worker (hubwatch's process and children), and Hub requests per revision",
    tags=("slow", "pipeline"),
    size="repos moved in the plain move (default 1,000; config 1/5 of it, template 1/20)",
    small=100,
    timeout_s=1800,
    figures=tuple(f for move in MOVES for f in (
        Figure(f"{move}: CPU per moved revision", "ms", baseline=BEFORE_CPU_MS[move], baseline_at=BEFORE_AT,
               note=f"issue 27 asked to halve it; its ~{BASELINE_CPU_MS:.0f} ms was a whole worker's CPU"),
        Figure(f"{move}: Hub requests per revision", "requests", baseline=BEFORE_REQUESTS[move], baseline_at=BEFORE_AT),
        Figure(f"{move}: wall per revision", "ms"))),
)


def _options(argv: list[str] | None = None, size: int | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=None, help="repos moved in the plain move")
    parser.add_argument("--moves", default="plain,config,template", help="which moves, comma-separated")
    parser.add_argument("--profile", default="", help="a move to profile (its poll under cProfile)")
    parser.add_argument("--db", default="", help="a database URL (default: a SQLite file per move)")
    parser.add_argument("--log", choices=("json", "off"), default="json", help="json: at info into a file")
    args = parser.parse_args(argv or [])
    args.n = size or args.size or 1000
    args.config_n, args.template_n = max(1, args.n // 5), max(1, args.n // 20)
    return args


def _admin(endpoint: str, path: str, method: str = "GET") -> object:
    request = urllib.request.Request(f"{endpoint}/_replay/{path}", method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read())


def _requests(endpoint: str) -> int:
    count = len(_admin(endpoint, "requests"))  # type: ignore[arg-type]
    _admin(endpoint, "reset-requests", "POST")
    return count


def _children_cpu_s(skip: int) -> float:
    """CPU seconds of this process's live descendants (not `skip`'s tree) read from /proc, plus the reaped ones'."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    todo = [os.getpid()]
    while todo:
        pid = todo.pop()
        try:
            kids = [int(k) for t in os.listdir(f"/proc/{pid}/task")
                    for k in Path(f"/proc/{pid}/task/{t}/children").read_text().split()]
        except OSError:
            continue
        for kid in kids:
            if kid == skip:
                continue
            todo.append(kid)
            try:
                fields = Path(f"/proc/{kid}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / ticks
            except (OSError, IndexError, ValueError):
                continue
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return total + reaped.ru_utime + reaped.ru_stime


def _lines(path: Path) -> int:
    with path.open() as f:
        return sum(1 for _ in f)


def measure(size: int | None = None, args: argparse.Namespace | None = None) -> dict[str, float]:
    args = args or _options(size=size)
    detail(f"CPU per moved revision, one worker; logs: {'JSON lines at info into a file' if args.log == 'json' else 'off'};"
           f" database: {args.db.split('@')[-1] or 'SQLite file'}")
    figures: dict[str, float] = {}
    for move in args.moves.split(","):
        n = {"plain": args.n, "config": args.config_n, "template": args.template_n}[move]
        server = subprocess.Popen(
            [sys.executable, "-m", "tracker.standins.replay", "--port", "0", "--no-bundled", "--synthetic", str(n),
             "--synthetic-move", move],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        try:
            endpoint = server.stdout.readline().strip()  # type: ignore[union-attr]
            with tempfile.TemporaryDirectory() as tmp:
                figures |= _run(move, n, endpoint, Path(tmp), args, server.pid)
        finally:
            server.terminate()
            server.wait()
    return figures


def _run(move: str, n: int, endpoint: str, tmp: Path, args: argparse.Namespace, server_pid: int) -> dict[str, float]:
    settings = settings_from_mapping(
        {"hub": {"endpoint": endpoint}, "storage": {"url": args.db or f"sqlite:///{tmp / 'bench.db'}"},
         "osv": {"enabled": False}, "log": {"level": "info" if args.log == "json" else "error", "format": "json"}},
        env={}, source="bench",
    )
    with (tmp / "hubwatch.log").open("w") as log_file:
        configure_logging(settings.log, log_file)
        app = App(settings)
        ids = synthetic_ids(n)
        for repo_id in ids:
            app.store.watches.add_watch(repo_id, "main", 900)
        assert not any(o.failed for o in app.poller.poll(ids))
        for repo_id in ids:
            _admin(endpoint, f"advance/{repo_id}", "POST")
        _requests(endpoint)
        log_file.flush()
        lines_before = _lines(tmp / "hubwatch.log")
        profile = cProfile.Profile() if args.profile == move else None
        cpu0, kids0, wall0 = time.process_time(), _children_cpu_s(server_pid), time.perf_counter()
        if profile:
            profile.enable()
        outcomes = app.poller.poll(ids)
        if profile:
            profile.disable()
        cpu, kids = time.process_time() - cpu0, _children_cpu_s(server_pid) - kids0
        wall = time.perf_counter() - wall0
        revisions = sum(len(o.revisions) for o in outcomes)
        requests = _requests(endpoint)
        assert revisions == n and not any(o.failed for o in outcomes), [o.error for o in outcomes if o.failed][:3]
        app.store.engine.dispose()
        log_file.flush()
        log_lines = _lines(tmp / "hubwatch.log") - lines_before
    per_rev = 1000 * (cpu + kids) / revisions
    before = BEFORE_CPU_MS.get(move, 0.0)
    against = f"before {before:.1f} ms: {before / per_rev:.2f}x less" if before else "no figure before"
    detail(f"{move:>8}: {per_rev:6.1f} ms CPU per revision over {revisions} ({1000 * kids / revisions:.1f} of it in"
          f" child processes){' under cProfile' if profile else ''}; {against}; the issue's ~{BASELINE_CPU_MS:.0f} ms:"
          f" {BASELINE_CPU_MS / per_rev:.2f}x less")
    detail(f"          {requests / revisions:.2f} requests per revision (counted at the server; before"
          f" {BEFORE_REQUESTS.get(move, 0.0):.2f}); wall {1000 * wall / revisions:.1f} ms per revision;"
          f" {log_lines / revisions:.1f} log lines per revision; load average {os.getloadavg()[0]:.2f} at the end"
          f" ({os.cpu_count()} CPUs)")
    if profile:
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(35)
        profile.dump_stats(os.environ.get("BENCH_PROFILE_OUT", str(tmp.parent / "bench_ingest_cpu.prof")))
        detail(out.getvalue())
    return {f"{move}: CPU per moved revision": per_rev, f"{move}: Hub requests per revision": requests / revisions,
            f"{move}: wall per revision": 1000 * wall / revisions}


if __name__ == "__main__":
    options = _options(sys.argv[1:])
    run_alone(BENCHMARK, lambda size: measure(size, options), [f"--size={options.n}"])
