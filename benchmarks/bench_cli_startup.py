"""Figure: how long a new user waits for the CLI, against what its libraries cost to import.

Baselines: `import click` for `hubwatch --help` (goal: within 2x), `import sqlmodel, click` for a
command that reads the database (`history`, `watch list`; goal: within 1.3x). Each figure is the
median wall time of fresh processes; the slowest imports of each command (`-X importtime`) follow.
Run: .venv/bin/python benchmarks/bench_cli_startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPO = "bench/startup-model"


def _wall(argv: list[str], env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _top_imports(argv: list[str], env: dict[str, str], count: int = 6) -> list[tuple[int, str]]:
    """The top-level packages that took longest to import (cumulative microseconds)."""
    done = subprocess.run([sys.executable, "-X", "importtime", *argv], env=env, cwd=ROOT, capture_output=True, text=True)
    rows: dict[str, int] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = (part.strip() for part in line.removeprefix("import time:").split("|"))
        if not name.startswith(" ") and "." not in name.strip():
            rows[name.strip()] = max(rows.get(name.strip(), 0), int(cumulative))
    return sorted(((us, name) for name, us in rows.items()), reverse=True)[:count]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "HUBWATCH_STORAGE_URL": f"sqlite:///{Path(tmp) / 'h.db'}", "PYTHONDONTWRITEBYTECODE": "0"}
        cli = [sys.executable, "-m", "tracker"]
        subprocess.run([*cli, "watch", "add", REPO, "--no-check"], env=env, cwd=ROOT, check=True, capture_output=True)
        baselines = {
            "click": _wall([sys.executable, "-c", "import click"], env, runs),
            "sqlmodel+click": _wall([sys.executable, "-c", "import sqlmodel, click"], env, runs),
        }
        cases = [
            ("hubwatch --help", ["--help"], "click", 2.0),
            (f"hubwatch history {REPO}", ["history", REPO], "sqlmodel+click", 1.3),
            ("hubwatch watch list", ["watch", "list"], "sqlmodel+click", 1.3),
        ]
        for name, base in baselines.items():
            print(f"import {name:<24} {base * 1000:7.0f} ms  (baseline)")
        for label, args, base, goal in cases:
            wall = _wall([*cli, *args], env, runs)
            ratio = wall / baselines[base]
            verdict = "meets" if ratio <= goal else "misses"
            print(f"{label:<31} {wall * 1000:7.0f} ms  {ratio:.2f}x import {base} ({verdict} the {goal}x goal)")
            top = ", ".join(f"{name} {us / 1000:.0f} ms" for us, name in _top_imports(["-m", "tracker", *args], env))
            print(f"    slowest imports: {top}")


if __name__ == "__main__":
    main()
