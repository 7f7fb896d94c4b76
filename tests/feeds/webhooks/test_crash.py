"""`hubwatch run` killed with SIGKILL during an ingest, or while it holds an endpoint with a delivery under way,
and restarted: nothing lost or duplicated, and the killed worker's endpoints are taken over within seconds
(benchmarks/bench_crash.py runs 30 kills at random points and prints the figures). One kill a test, each landing
where the test says: a test of several kills at random points ran for 28 s and could miss either case."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.crash_scenario import Run, Scenario, compare, write_histories

REPOS, COMMITS = 2, 6
LEASE_S = 3.0  # [delivery] lease_s: a killed worker's claims expire while its successor starts (the default is 6 s)


@pytest.fixture(scope="module")
def histories(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], Run]:
    """The repos' histories, and what an uninterrupted ingest of them stores and queues (`Scenario.polled`)."""
    root = tmp_path_factory.mktemp("crash")
    repo_ids = write_histories(root / "histories", REPOS, COMMITS)
    return root / "histories", repo_ids, Scenario(root / "reference", root / "histories", repo_ids).polled()


def crashed(tmp_path: Path, histories: tuple[Path, list[str], Run], kill_at: str, seed: int) -> Run:
    root, repo_ids, reference = histories
    run = Scenario(tmp_path / "crashed", root, repo_ids, seed).run(
        kills=1, kill_at=(kill_at,), gap_s=(0.1, 0.4), reveal_s=3.0, lease_s=LEASE_S)
    report = compare(reference, run)
    assert (report.revisions, len(reference.revisions)) == (REPOS * COMMITS, REPOS * COMMITS)
    assert (report.revisions_lost, report.revisions_duplicated) == (0, 0), report.lines()
    assert report.deliveries == len(reference.deliveries) == 2 * REPOS * COMMITS and run.pending == 0, report.lines()
    assert (report.deliveries_lost, report.deliveries_out_of_order) == (0, 0), report.lines()
    assert report.kills == 1, report.lines()
    return run


@pytest.mark.slow
def test_sigkill_during_an_ingest_loses_no_revision_and_no_delivery(tmp_path: Path, histories) -> None:
    """Killed once it has stored a revision of its own with more commits revealed: the restarted daemon stores
    every revision once and every delivery arrives, in order."""
    run = crashed(tmp_path, histories, "ingest", seed=7)
    assert run.kills[0]["ingesting"], run.kills


@pytest.mark.slow
def test_sigkill_mid_delivery_is_taken_over_within_seconds(tmp_path: Path, histories) -> None:
    """Killed while it holds an endpoint with deliveries to go: the restarted worker takes that endpoint over (logged)
    and delivers on it within 10 s of the kill, nothing lost, in order."""
    run = crashed(tmp_path, histories, "delivery", seed=8)
    [kill] = run.kills
    assert kill["claimed"], run.kills
    assert kill["takeover_s"] is not None and kill["delivery_s"] is not None, run.kills
    assert kill["takeover_s"] < 10 and kill["delivery_s"] < 10, run.kills  # type: ignore[operator]
