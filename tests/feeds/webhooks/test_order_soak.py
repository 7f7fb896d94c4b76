"""A soak of delivery order: many repos moving at once, ingested on the daemon's poll threads while another
process keeps the CPU busy; every endpoint still receives its deliveries in event order (issue 21: 35 of
600 arrived after a later event when a writer's time was read before it waited for the database)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.crash_scenario import Scenario, compare, write_histories

BUSY = "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end: pass\n"


@pytest.mark.slow
def test_deliveries_keep_event_order_under_concurrent_ingest_and_a_busy_cpu(tmp_path: Path) -> None:
    """16 repos advanced together, polled every second on the poll threads, one core kept busy: every
    revision stored once, every delivery received, none after an event with a higher seq."""
    histories = tmp_path / "histories"
    repo_ids = write_histories(histories, 16, 8)
    burner = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        run = Scenario(tmp_path / "soak", histories, repo_ids, seed=3).run(kills=0)
    finally:
        burner.kill()
        burner.wait()
    report = compare(run, run)
    assert report.revisions == 16 * 8 and report.revisions_duplicated == 0, report.lines()
    assert report.deliveries == 2 * 16 * 8 and report.deliveries_lost == 0, report.lines()
    assert report.deliveries_out_of_order == 0, report.lines()
