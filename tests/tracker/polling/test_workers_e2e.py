"""Real `hubwatch run` workers sharing one database (SQLite, and PostgreSQL in the CI's second pass), one
of them killed with SIGKILL while it holds leases: every revision ingested once, every event delivered,
the killed worker's watches taken over within its lease (benchmarks/bench_workers.py: the figures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fleet import Fleet, write_moving_repos

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)


@pytest.mark.slow
def test_workers_share_moving_repos_and_take_a_killed_workers_leases_over(tmp_path: Path, database_url: str) -> None:
    repo_ids = write_moving_repos(tmp_path / "histories", repos=16, commits=3)
    fleet = Fleet(tmp_path / "run", tmp_path / "histories", repo_ids, database_url, workers=2, lease_s=3)
    out = fleet.run(moves=2, kill_one=True, timeout_s=240)
    assert (out.revisions, out.duplicate_revisions, out.duplicate_events) == (48, 0, 0), out
    assert out.deliveries_expected == 2 * 48  # one event per revision, two subscriptions
    assert out.deliveries_received == out.deliveries_expected, out
    assert out.killed_leases > 0 and out.takeover_s is not None and out.takeover_s < 3 + 4, out  # within the lease (and a claim tick)
