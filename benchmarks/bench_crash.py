"""Crash safety: SIGKILL `hubwatch run` N times at random points during ingests and deliveries
(restarting it each time) and compare with an uninterrupted run.

    python -m benchmarks.bench_crash [--kills 30] [--repos 4] [--commits 20] [--seed 1]

Prints revisions lost / duplicated, deliveries lost / redundant / out of order, and the time a
restarted worker took to take over the endpoints the killed one held (goal: under 10 s).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from tests.support.crash_scenario import crash_report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--repos", type=int, default=4)
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hubwatch-crash-") as tmp:
        report, reference, crashed = crash_report(Path(tmp), args.kills, args.repos, args.commits, args.seed)
    print(f"bench_crash: {args.repos} repos x {args.commits} commits, 2 webhook subscriptions, seed {args.seed}")
    print(f"uninterrupted run: {len(reference.revisions)} revisions, {len(reference.deliveries)} deliveries, "
          f"{len(reference.arrivals)} received")
    for line in report.lines():
        print(line)
    print(f"left pending at the end: {crashed.pending}; took {time.monotonic() - started:.0f} s in all")


if __name__ == "__main__":
    main()
