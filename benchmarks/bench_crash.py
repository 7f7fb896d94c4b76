"""Crash safety: SIGKILL `hubwatch run` N times at random points during ingests and deliveries
(restarting it each time) and compare with an uninterrupted run.

Figures: revisions lost / duplicated, deliveries lost / redundant / out of order, and the time a
restarted worker took to take over the endpoints the killed one held (goal: under 10 s). Revisions and
deliveries lost or revisions duplicated are held to 0: the design's promise (one transaction per revision,
at-least-once deliveries); a redundant delivery (the same webhook-id again) is what at-least-once allows.

    python -m benchmarks run crash   (size: kills, default 30; 4 repos x 20 commits, seed 1)
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tests.support.crash_scenario import crash_report

REPOS, COMMITS, SEED = 4, 20, 1
PROMISE = "held to 0 by the design's promise"
BENCHMARK = Benchmark(
    name="crash",
    about="SIGKILL `hubwatch run` at random points during ingests and deliveries, compared with an uninterrupted run",
    tags=("slow", "daemon"),
    size="kills (default 30)",
    small=3,
    timeout_s=3600,
    figures=(
        Figure("revisions lost", "revisions", goal=0, note=PROMISE),
        Figure("revisions duplicated", "revisions", goal=0, note=PROMISE),
        Figure("deliveries lost", "deliveries", goal=0, note=PROMISE),
        Figure("deliveries redundant (same webhook-id again)", "deliveries"),
        Figure("deliveries out of order", "deliveries"),
        Figure("takeover of a killed worker's endpoints, max", "s", goal=10.0, margin=0.2),
        Figure("takeover of a killed worker's endpoints, median", "s"),
        Figure("kills", "kills"),
    ),
)


def measure(size: int | None = None) -> dict[str, float]:
    kills = size or 30
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hubwatch-crash-") as tmp:
        report, reference, crashed = crash_report(Path(tmp), kills, REPOS, COMMITS, SEED)
    detail(f"bench_crash: {REPOS} repos x {COMMITS} commits, 2 webhook subscriptions, seed {SEED}")
    detail(f"uninterrupted run: {len(reference.revisions)} revisions, {len(reference.deliveries)} deliveries, "
           f"{len(reference.arrivals)} received")
    for line in report.lines():
        detail(line)
    detail(f"left pending at the end: {crashed.pending}; took {time.monotonic() - started:.0f} s in all")
    takeover = sorted(report.takeover_s)
    figures = {"revisions lost": report.revisions_lost, "revisions duplicated": report.revisions_duplicated,
               "deliveries lost": report.deliveries_lost,
               "deliveries redundant (same webhook-id again)": report.deliveries_redundant,
               "deliveries out of order": report.deliveries_out_of_order, "kills": report.kills}
    if takeover:  # no kill held a claim: nothing to take over, so no figure
        figures["takeover of a killed worker's endpoints, max"] = takeover[-1]
        figures["takeover of a killed worker's endpoints, median"] = takeover[len(takeover) // 2]
    return figures


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
