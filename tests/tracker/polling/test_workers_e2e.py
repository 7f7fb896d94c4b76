"""Real `hubwatch run` workers sharing one database (SQLite, and PostgreSQL in the CI's second pass): the repos
that move are shared out, every revision ingested once and every event delivered; and one worker killed with
SIGKILL while it holds leases has its watches taken over within its lease (benchmarks/bench_workers.py: the
figures). Two tests, not one run: each pays two daemon start-ups, but the kill's wait for the lease to run out
no longer adds to the moves' rounds (one run of both was 10-15 s of a loaded CI pass)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fleet import Fleet, Outcome, write_moving_repos

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)


def _delivered_once(out: Outcome, revisions: int) -> None:
    assert (out.revisions, out.duplicate_revisions, out.duplicate_events) == (revisions, 0, 0), out
    assert out.deliveries_expected == 2 * revisions  # one event per revision, two subscriptions
    assert out.deliveries_received == out.deliveries_expected, out


@pytest.mark.slow
def test_workers_share_moving_repos_each_revision_once(tmp_path: Path, database_url: str) -> None:
    # 10 repos move one commit each, revealed in two rounds of 5 while both workers run: the listing makes them
    # due in the database and whichever worker is free claims each.
    repo_ids = write_moving_repos(tmp_path / "histories", repos=10, commits=2)
    fleet = Fleet(tmp_path / "run", tmp_path / "histories", repo_ids, database_url, workers=2, lease_s=3)
    out = fleet.run(moves=1, rounds=2, timeout_s=240)
    _delivered_once(out, 20)
    assert out.moved_revisions == 10 and out.killed_at_s is None, out


@pytest.mark.slow
def test_a_killed_workers_leases_are_taken_over_within_the_lease(tmp_path: Path, database_url: str) -> None:
    # The worker holding the most leases in the baselines' polls (at least 2 when first seen) is killed: its
    # watches wait out its 3 s lease, and the other worker claims them as it ends (its claim loop wakes for the
    # end of a lease on a due watch, not at its next tick); nothing is stored or delivered twice.
    repo_ids = write_moving_repos(tmp_path / "histories", repos=6, commits=1)
    fleet = Fleet(tmp_path / "run", tmp_path / "histories", repo_ids, database_url, workers=2, lease_s=3)
    out = fleet.run(moves=0, kill_one=True, timeout_s=240)
    _delivered_once(out, 6)
    # the lease, and slack for a loaded machine (3.0 s measured quiet)
    assert out.killed_leases > 0 and out.takeover_s is not None and out.takeover_s < 3 + 2.5, out
