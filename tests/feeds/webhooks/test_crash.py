"""`hubwatch run` killed with SIGKILL during ingests and deliveries and restarted: nothing lost or
duplicated, and the killed worker's endpoints are taken over within seconds (benchmarks/bench_crash.py
runs the same with more kills and prints the figures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.crash_scenario import crash_report


@pytest.mark.slow
def test_sigkill_during_ingests_and_deliveries_loses_nothing(tmp_path: Path) -> None:
    """3 kills at random points: every revision stored once, every delivery received, in order, taken over < 10 s."""
    report, reference, crashed = crash_report(tmp_path, kills=3, repos=3, commits=12, seed=7)
    assert (report.revisions, len(reference.revisions)) == (36, 36)
    assert (report.revisions_lost, report.revisions_duplicated) == (0, 0), report.lines()
    assert report.deliveries == len(reference.deliveries) == 72 and crashed.pending == 0
    assert (report.deliveries_lost, report.deliveries_out_of_order) == (0, 0), report.lines()
    assert report.kills == 3 and all(t < 10 for t in report.takeover_s + report.first_delivery_s), report.lines()
