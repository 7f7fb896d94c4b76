"""Figure: what polling N unchanged repos costs, N = 100: HTTP requests (counted at the replay server) and,
on the daemon's path (Poller.poll_if_due, as the scheduler calls it), database sessions (connection
checkouts), SQL statements and connection pre-pings per poll.

Baselines: one HTTP request per repo, the floor for a per-repo head check; and the daemon's path as it was
before issue 15 (commit edb6768): 2 sessions, 3 statements and 2 pre-pings per unchanged poll (measured
with this script on that commit). The first daemon pass reads each watch once (a start); later passes
are the steady state. Prints the counts and the ratios.
Run: .venv/bin/python benchmarks/bench_poll_unchanged.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa

from benchmarks._histories import replayed_app
from tests.support.synthetic_repos import CONFIG, write_repo
from tracker.cli.app import App

N = 100
BEFORE = {"sessions": 2, "statements": 3, "pre-pings": 2}  # per unchanged poll at commit edb6768


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
    counts.checkouts = counts.statements = 0
    counts.counting = True
    started = time.perf_counter()
    outcomes = [app.poller.poll_if_due(repo_id, "main") for repo_id in repo_ids]
    elapsed = time.perf_counter() - started
    counts.counting = False
    assert all(o is not None and o.status == "unchanged" for o in outcomes), [o and o.error for o in outcomes]
    return {"sessions": counts.checkouts / N, "statements": counts.statements / N,
            "pre-pings": counts.checkouts / N if counts.pre_ping else 0.0, "ms": elapsed * 1000 / N}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "histories"
        for i in range(N):
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
    print(f"unchanged repos polled:        {N}")
    print(f"HTTP requests at the replay:   {requests}")
    print(f"requests per repo:             {requests / N:.2f}  (baseline: 1 head check per repo; ratio {requests / N:.2f}x)")
    print(f"wall time for the pass:        {elapsed * 1000:.0f} ms ({elapsed * 1000 / N:.1f} ms per repo, loopback)")
    print("daemon path per unchanged poll (Poller.poll_if_due), before issue 15 -> first pass after a start / steady state:")
    for key, before in BEFORE.items():
        ratio = steady[key] / before
        print(f"  {key:<11} {before:>4}  ->  {first[key]:.2f} / {steady[key]:.2f}   (steady state {ratio:.2f}x of before)")
    print(f"  wall time per poll: {first['ms']:.2f} / {steady['ms']:.2f} ms (loopback replay)")


if __name__ == "__main__":
    main()
