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
    # One move a repo, revealed in two rounds of 8 (the kill lands in the first): the 16 moves are shared and one
    # worker's leases taken over as with two moves in four rounds (killed with 5-9 leases either way), and the
    # test no longer waits for two more rounds after the takeover (16 s of a quiet 2-core run, now about 2 s less).
    repo_ids = write_moving_repos(tmp_path / "histories", repos=16, commits=2)
    fleet = Fleet(tmp_path / "run", tmp_path / "histories", repo_ids, database_url, workers=2, lease_s=3)
    out = fleet.run(moves=1, rounds=2, kill_one=True, timeout_s=240)
    assert (out.revisions, out.duplicate_revisions, out.duplicate_events) == (32, 0, 0), out
    assert out.deliveries_expected == 2 * 32  # one event per revision, two subscriptions
    assert out.deliveries_received == out.deliveries_expected, out
    assert out.killed_leases > 0 and out.takeover_s is not None and out.takeover_s < 3 + 4, out  # within the lease (and a claim tick)
