"""Figure: Hub requests per minute while the database cannot be written (disk full), counted at the
replay server. Goal: 0 once the failure is known (before issue 9 the daemon sent 35 requests a second).

N watches whose heads moved are polled through `Poller.poll_if_due` (the scheduler's job) every TICK_S
seconds of a simulated clock for MINUTES minutes while every write fails with SQLite's own
"database or disk is full"; then writes work again and the time to resume is measured.
Run: python -m benchmarks run disk_full   (size: simulated minutes with the disk full, default 60)
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._histories import replayed_app
from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tests.support.synthetic_repos import CONFIG, write_repo

N = 20
TICK_S = 10
MINUTES = 60
BEFORE_PER_S = 35.0  # measured before the fix, with the disk full
BENCHMARK = Benchmark(
    name="disk_full",
    about="Hub requests a minute while the database cannot be written (disk full), 20 moved watches, simulated clock",
    tags=("quick", "polling"),
    size="simulated minutes with the disk full (default 60)",
    small=10,
    figures=(
        Figure("Hub requests a minute once the failure is known", "req/min", goal=0, baseline=BEFORE_PER_S * 60,
               baseline_at="before issue 9's fix (35 a second)"),
        Figure("Hub requests in the first minute", "requests", note="finds the failure"),
        Figure("all ingested after writes work again, within", "min", note="simulated time; the storage probe backs off"),
    ),
)


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def measure(size: int | None = None) -> dict[str, float]:
    minutes = size or MINUTES
    full = {"on": False}

    def refuse(_conn, _cursor, statement: str, *_args) -> None:  # type: ignore[no-untyped-def]
        if full["on"] and statement.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
            raise sqlite3.OperationalError("database or disk is full")

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "histories"
        for i in range(N):
            commits = [{"files": {"config.json": CONFIG, "README.md": f"# model {i} v{v}\n"}} for v in (1, 2)]
            write_repo(root, f"bench/model-{i:03d}", commits)
        with replayed_app(root, Path(tmp) / "h.db") as (app, server):
            clock = Clock()
            app.clock = clock
            for repo_id in server.repo_ids():
                server.set_head(repo_id, 1)
                app.store.watches.add_watch(repo_id, "main", TICK_S)
            app.poller.poll()  # baselines
            sa.event.listen(app.store.engine, "before_cursor_execute", refuse)
            for repo_id in server.repo_ids():
                server.advance(repo_id)  # every head moved: a poll would fetch the new commit
            full["on"] = True
            server.reset_requests()
            per_minute: list[int] = []
            started = time.perf_counter()
            for _minute in range(minutes):
                before = server.count_requests()
                for _tick in range(60 // TICK_S):
                    for repo_id in server.repo_ids():
                        app.poller.poll_if_due(repo_id, "main")
                    clock.now += timedelta(seconds=TICK_S)
                per_minute.append(server.count_requests() - before)
            elapsed = time.perf_counter() - started
            full["on"] = False
            failed_at = clock.now
            ingested = 0
            while ingested < N and clock.now - failed_at < timedelta(hours=7):
                for repo_id in server.repo_ids():
                    outcome = app.poller.poll_if_due(repo_id, "main")
                    ingested += bool(outcome is not None and outcome.status == "ingested")
                clock.now += timedelta(seconds=TICK_S)
            resumed_after_s = (clock.now - failed_at).total_seconds()
    steady = per_minute[1:]
    detail(f"{N} watches (heads moved) polled every {TICK_S} s for {minutes} simulated min ({elapsed:.1f} s wall); "
           f"{sum(per_minute)} Hub requests in all; {ingested} ingested after writes worked again")
    return {"Hub requests a minute once the failure is known": sum(steady) / max(len(steady), 1),
            "Hub requests in the first minute": per_minute[0],
            "all ingested after writes work again, within": resumed_after_s / 60}


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
