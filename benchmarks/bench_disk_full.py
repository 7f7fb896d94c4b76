"""Figure: Hub requests per minute while the database cannot be written (disk full), counted at the
replay server. Goal: 0 once the failure is known (before issue 9 the daemon sent 35 requests a second).

N watches whose heads moved are polled through `Poller.poll_if_due` (the scheduler's job) every TICK_S
seconds of a simulated clock for MINUTES minutes while every write fails with SQLite's own
"database or disk is full"; then writes work again and the time to resume is measured.
Run: .venv/bin/python benchmarks/bench_disk_full.py
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
from tests.support.synthetic_repos import CONFIG, write_repo

N = 20
TICK_S = 10
MINUTES = 60
BEFORE_PER_S = 35.0  # measured before the fix, with the disk full


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def main() -> None:
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
            for _minute in range(MINUTES):
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
    steady_rate = sum(steady) / len(steady)
    print(f"watches (heads moved), polled every {TICK_S} s:    {N}")
    print(f"simulated time with the disk full:              {MINUTES} min ({elapsed:.1f} s wall)")
    print(f"Hub requests, first minute (finds the failure):  {per_minute[0]}")
    print(f"Hub requests per minute after that:              {steady_rate:.2f}  (goal 0)")
    print(f"Hub requests per minute before the fix:          {BEFORE_PER_S * 60:.0f}  (35/s)")
    print(f"Hub requests over the whole hour:                {sum(per_minute)}  (before: {BEFORE_PER_S * 3600:.0f})")
    print(f"after writes work again, all {N} ingested within: {resumed_after_s / 60:.0f} min of simulated time"
          f" ({ingested} ingested; the storage probe backs off to {app.settings.poll.retry_max})")


if __name__ == "__main__":
    main()
