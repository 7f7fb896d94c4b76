"""Figure: what polling N unchanged repos costs, N = 100: HTTP requests (counted at the replay server) and,
on the daemon's path (Poller.poll_if_due, as the scheduler calls it), database sessions (connection
checkouts), SQL statements and connection pre-pings per poll.

Baselines: one HTTP request per repo, the floor for a per-repo head check; and the daemon's path as it was
before issue 15 (commit edb6768): 2 sessions, 3 statements and 2 pre-pings per unchanged poll (measured
with this script on that commit). The first daemon pass reads each watch once (a start); later passes
are the steady state. Prints the counts and the ratios.
Run: python -m benchmarks run poll_unchanged   (size: unchanged repos, default 100)
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa

from benchmarks._histories import replayed_app
from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tests.support.synthetic_repos import CONFIG, write_repo
from tracker.cli.app import App

N = 100
BEFORE = {"sessions": 2, "statements": 3, "pre-pings": 2}  # per unchanged poll at commit edb6768
EDB = "the daemon's path before issue 15 (commit edb6768)"
BENCHMARK = Benchmark(
    name="poll_unchanged",
    about="What polling unchanged repos costs: Hub requests, and per poll on the daemon's path sessions, statements, pre-pings",
    tags=("quick", "polling"),
    size="unchanged repos (default 100)",
    small=20,
    figures=(
        Figure("Hub requests per repo", "requests", baseline=1.0, baseline_at="the floor: one head check per repo"),
        Figure("wall time per repo (poll pass)", "ms", note="loopback replay"),
        *(Figure(f"{key} per unchanged poll, steady state", key, baseline=float(before), baseline_at=EDB)
          for key, before in BEFORE.items()),
        *(Figure(f"{key} per unchanged poll, first pass after a start", key) for key in BEFORE),
    ),
)


class _Counts:
    """Connection checkouts and statements on one engine while `counting`."""

    def __init__(self, engine: sa.Engine) -> None:
        self.checkouts = self.statements = 0
        self.counting = False
        self.pre_ping = bool(getattr(engine.pool, "_pre_ping", False))
        sa.event.listen(engine, "before_cursor_execute", self._statement)
        sa.event.listen(engine.pool, "checkout", self._checkout)

    def _statement(self, *_: object) -> None:
        if self.counting:
            self.statements += 1

    def _checkout(self, *_: object) -> None:
        if self.counting:
            self.checkouts += 1


def _daemon_pass(app: App, counts: _Counts, repo_ids: list[str]) -> dict[str, float]:
    n = len(repo_ids)
    counts.checkouts = counts.statements = 0
    counts.counting = True
    started = time.perf_counter()
    outcomes = [app.poller.poll_if_due(repo_id, "main") for repo_id in repo_ids]
    elapsed = time.perf_counter() - started
    counts.counting = False
    assert all(o is not None and o.status == "unchanged" for o in outcomes), [o and o.error for o in outcomes]
    return {"sessions": counts.checkouts / n, "statements": counts.statements / n,
            "pre-pings": counts.checkouts / n if counts.pre_ping else 0.0, "ms": elapsed * 1000 / n}


def measure(size: int | None = None) -> dict[str, float]:
    n = size or N
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "histories"
        for i in range(n):
            write_repo(root, f"bench/model-{i:03d}", [{"files": {"config.json": CONFIG, "README.md": "# model\n"}}])
        with replayed_app(root, Path(tmp) / "h.db") as (app, server):
            repo_ids = server.repo_ids()
            for repo_id in repo_ids:
                app.store.watches.add_watch(repo_id, "main", 900)
            app.poller.poll()  # baselines
            server.reset_requests()
            started = time.perf_counter()
            outcomes = app.poller.poll()
            elapsed = time.perf_counter() - started
            requests = server.count_requests()
            counts = _Counts(app.store.engine)
            first = _daemon_pass(app, counts, repo_ids)
            steady = _daemon_pass(app, counts, repo_ids)
    assert all(o.status == "unchanged" for o in outcomes), [o.error for o in outcomes if o.failed]
    detail(f"{n} unchanged repos polled: {requests} HTTP requests; daemon path wall per poll {first['ms']:.2f} / {steady['ms']:.2f} ms")
    figures = {"Hub requests per repo": requests / n, "wall time per repo (poll pass)": elapsed * 1000 / n}
    figures |= {f"{key} per unchanged poll, steady state": steady[key] for key in BEFORE}
    figures |= {f"{key} per unchanged poll, first pass after a start": first[key] for key in BEFORE}
    return figures


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
