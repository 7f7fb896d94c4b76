"""A family pass takes its turns under `[hub] api_requests_per_5min`: with a small budget it stretches over
several windows (waiting for each to turn) and never sends more requests in a window than the budget holds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.derivative_repos import BASE, GGUF, write_family
from tests.support.settings import settings_for
from tracker.cli.app import App
from tracker.hub.client import install_budget, remove_budget
from tracker.polling.budget import RequestBudget, pool_of
from tracker.standins.replay.control import BUNDLED_ROOT, ReplayServer

BUDGET = 5


@pytest.fixture
def hub(tmp_path) -> Iterator[ReplayServer]:
    write_family(tmp_path / "family")
    server = ReplayServer(roots=[BUNDLED_ROOT, tmp_path / "family"])
    server.set_head(BASE, 2)
    server.set_head(GGUF, 1)
    with server:
        yield server


def test_a_family_pass_stretches_over_windows_within_a_small_budget(hub: ReplayServer, database_url: str) -> None:
    """Budget 5 api requests a window: the base's poll and its family pass wait for each window to turn, every
    window holds at most 5 api requests counted at the replay, and the pass still checks every derivative."""
    now = [1000.0]
    api_counts: list[int] = []  # api requests the replay had answered when each wait began

    def api_requests() -> int:
        return sum(1 for r in hub.requests if pool_of(r.path) == "api")

    def sleep(seconds: float) -> None:
        api_counts.append(api_requests())
        now[0] += seconds

    budget = RequestBudget(BUDGET, 0, clock=lambda: now[0], sleep=sleep)
    install_budget(budget, hub.endpoint)
    app = App(settings_for(hub.endpoint, database_url))  # type: ignore[arg-type]
    try:
        app.store.watches.add_watch(BASE, "main", 900)
        app.store.derivatives.follow(BASE, ("quantized", "finetune"), 100)
        [outcome] = app.poller.poll()
        assert not outcome.failed, outcome.error
        report = app.store.derivatives.get_follow(BASE).last_report
        assert report["followed"] == 6 and report["checked"] == 5
        windows = [b - a for a, b in zip([0, *api_counts], [*api_counts, api_requests()], strict=True)]
        assert len(windows) >= report["requests"] // BUDGET  # stretched: the family alone needs that many windows
        assert max(windows) <= BUDGET, windows
    finally:
        remove_budget()
        app.store.engine.dispose()
