"""A soak of delivery order: many repos moving at once, ingested on the daemon's poll threads while another
process keeps the CPU busy; every endpoint still receives its deliveries in event order (issue 21: 35 of
600 arrived after a later event when a writer's time was read before it waited for the database)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.crash_scenario import Scenario, compare, write_histories


@pytest.mark.slow
def test_deliveries_keep_event_order_under_concurrent_ingest_and_a_busy_cpu(tmp_path: Path) -> None:
    """16 repos advanced together, polled every second on the poll threads, one core kept busy: every
    revision stored once, every delivery received, none after an event with a higher seq. The busy core is
    kept busy while the daemon runs (its start, the ingests and the deliveries), not during the set-up."""
    histories = tmp_path / "histories"
    repo_ids = write_histories(histories, 16, 8)
    run = Scenario(tmp_path / "soak", histories, repo_ids, seed=3).run(kills=0, busy_cpu=True)
    report = compare(run, run)
    assert report.revisions == 16 * 8 and report.revisions_duplicated == 0, report.lines()
    assert report.deliveries == 2 * 16 * 8 and report.deliveries_lost == 0, report.lines()
    assert report.deliveries_out_of_order == 0, report.lines()
