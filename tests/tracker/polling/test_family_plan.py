"""The request budget plans derivative passes: a followed family's last pass costs its request count once per
poll of its base, so the intervals stretch to hold it rather than exceed `[hub] api_requests_per_5min`."""

from __future__ import annotations

import math

import pytest

from tracker.cli.app import App
from tracker.polling.budget import RequestBudget
from tracker.polling.listing import ListingJob, family_need

BASE = "meta-llama/Llama-3.1-8B-Instruct"
OTHER = "org/plain-model"


def job_of(app: App, budget: RequestBudget) -> ListingJob:
    return ListingJob(app.settings, app.store.listing, app.hub, lambda r, b: None, budget, app.clock, app.store.derivatives)


def test_a_family_pass_stretches_the_plan(app: App) -> None:
    """Two watches at 15 minutes need 0.67 requests a window; the base's family pass of 40 requests each poll adds
    13.3: 14 against a budget of 10 (9 planned for) stretches every interval by 14 / 9."""
    app.store.watches.add_watch(BASE, "main", 900)
    app.store.watches.add_watch(OTHER, "main", 900)
    budget = RequestBudget(10, 0)
    job = job_of(app, budget)
    watches = app.store.watches.list_watches()
    assert set(job.plan(watches).values()) == {900}  # followed, not passed yet: no cost known
    app.store.derivatives.follow(BASE, ("quantized",), 100)
    assert set(job.plan(watches).values()) == {900}
    app.store.derivatives.record_pass(BASE, [], {"requests": 40}, [], None)
    plan = job.plan(watches)
    needed = 2 * 300 / 900 + 40 * 300 / 900
    assert set(plan.values()) == {math.ceil(900 * needed / 9)}
    assert budget.state()["interval_stretch"] == pytest.approx(needed / 9, abs=1e-3)
    # without the family in the plan the same watches fit
    bare = ListingJob(app.settings, app.store.listing, app.hub, lambda r, b: None, RequestBudget(10, 0), app.clock)
    assert set(bare.plan(watches).values()) == {900}


def test_family_need_is_per_poll_of_the_base() -> None:
    """The shortest interval among the base's branches decides; a base not polled, or no report yet, costs nothing."""
    own = {f"{BASE}@main": 600, f"{BASE}@dev": 300, f"{OTHER}@main": 60}
    assert family_need(BASE, 10, own) == pytest.approx(10.0)
    assert family_need("org/unwatched", 10, own) == 0.0
    assert family_need(BASE, None, own) == 0.0
    assert family_need(BASE, "12", own) == 0.0
