"""Figure: what the chat template's workers cost the ingest, with each batch in a fresh worker process (as
before issue 23's follow-up: the render, the engine matrix and the end-of-turn check each started their own
Python and Node workers, per revision) and with workers kept warm across batches (`render.WorkerPool`).

Runs `hubwatch demo`'s pipeline in this process (every bundled history replayed commit by commit into a fresh
SQLite database) twice per mode, and prints per mode: wall time, render workers started, and the ratio warm /
cold. The tokenizer behaviour cache is emptied before each run, so both modes tokenize the same.
Optionally `--main-before REV`: the demo of an older commit (git archive into a temporary folder, run with this
venv), e.g. the commit before this session's issue 23 merges, for the cost of the new checks as a whole.
Run: python -m benchmarks run ingest_workers   (size: demo runs per mode, default 1); as a script also
[--main-before 57e4372] (printed beside the table, not a declared figure: it names a commit)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tracker.cli.demo import run_demo
from tracker.differs import render
from tracker.differs.tokenizer_behaviour import CACHE

ROOT = Path(__file__).resolve().parent.parent
BENCHMARK = Benchmark(
    name="ingest_workers",
    about="`hubwatch demo`'s pipeline with a fresh template worker per batch (cold) and with workers kept warm",
    tags=("slow", "pipeline"),
    size="demo runs per mode (default 1; the median is kept)",
    timeout_s=1800,
    figures=(
        Figure("demo wall, cold (a fresh worker per batch)", "s",
               note="the cold mode is the code before issue 23's follow-up"),
        Figure("demo wall, warm (WorkerPool)", "s"),
        Figure("render workers started, cold", "workers"),
        Figure("render workers started, warm", "workers"),
        Figure("warm / cold wall", "ratio"),
    ),
)


def demo_run(keep: int) -> tuple[float, int]:
    """(wall seconds, workers started) of one demo with `keep` idle workers per kind (0: a fresh one per batch)."""
    render.POOL.close()
    render.POOL.keep = keep
    CACHE._items.clear()
    started_before = render.POOL.started
    with tempfile.TemporaryDirectory(prefix="hubwatch-bench-demo-") as folder:
        began = time.perf_counter()
        app = run_demo(data_dir=folder, echo=lambda *_: None)
        elapsed = time.perf_counter() - began
        app.store.engine.dispose()
    return elapsed, render.POOL.started - started_before


def old_demo(rev: str) -> float:
    """Wall seconds of `python -m tracker demo` at an older commit (its own code, this venv's packages)."""
    with tempfile.TemporaryDirectory(prefix="hubwatch-bench-old-") as folder:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        began = time.perf_counter()
        subprocess.run([sys.executable, "-m", "tracker", "demo", "--data-dir", f"{folder}/data"], cwd=folder,
                       capture_output=True, check=True, timeout=1800)
        return time.perf_counter() - began


def measure(size: int | None = None) -> dict[str, float]:
    runs = size or 1
    figures = {}
    for label, keep in (("cold", 0), ("warm", 2)):
        done = [demo_run(keep) for _ in range(runs)]
        figures[label] = (statistics.median(r[0] for r in done), done[0][1])
    render.POOL.close()
    (cold, cold_n), (warm, warm_n) = figures["cold"], figures["warm"]
    return {"demo wall, cold (a fresh worker per batch)": cold, "demo wall, warm (WorkerPool)": warm,
            "render workers started, cold": cold_n, "render workers started, warm": warm_n, "warm / cold wall": warm / cold}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=None, help="demo runs per mode")
    parser.add_argument("--main-before", default=None, help="also time the demo at this older commit")
    args = parser.parse_args()
    run_alone(BENCHMARK, measure, [f"--size={args.size}"] if args.size else [])
    if args.main_before:
        detail(f"demo at {args.main_before} (before the new checks): {old_demo(args.main_before):.1f} s wall")


if __name__ == "__main__":
    main()
