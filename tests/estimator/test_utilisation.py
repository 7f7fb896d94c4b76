"""The declared utilisations of the cost roofline (estimator/utilisation.py): derived by the stated rule from the
measurements recorded with their sources, and replaced by hubwatch's own measurements once there are any."""

from __future__ import annotations

import dataclasses
import statistics

import pytest

from estimator import cost as costing
from estimator import utilisation as u


def test_each_declared_figure_is_the_rounded_down_median_of_its_rows() -> None:
    """Training 40% from the 14 H100 runs (median 41.9%), serving 45% from those and the 23 A100 runs (46.4%),
    bandwidth 65% from gpt-fast's two decode rows (66.7%); cost.py uses exactly these."""
    train = [r.value for r in u.MEASURED if r.kind == "train"]
    assert len(train) == 14 and statistics.median(train) == pytest.approx(0.4189, abs=1e-4)
    assert u.declared("train") == costing.TRAIN_UTILISATION == 0.40
    assert len(u.rows_for("serve")) == 14 + 23 and u.declared("serve") == costing.SERVE_UTILISATION == 0.45
    assert u.declared("bandwidth") == costing.BANDWIDTH_UTILISATION == 0.65
    assert u.summary("bandwidth")["median"] == pytest.approx((1397.31 + 1322.58) / 2 / 2039, abs=1e-4)


def test_every_row_names_its_source_and_when_it_was_read() -> None:
    """Each measurement has an address it was read at and a date; every value is a fraction of a peak."""
    for row in u.MEASURED:
        assert "https://" in row.source and row.read_on == u.READ_ON and 0 < row.value < 1 and row.tokens > 0


def test_hubwatchs_own_measurements_replace_the_published_rows_of_their_kind() -> None:
    """Two training rows timed by benchmarks/bench_cost_gpu.py (MFU 30% and 36%): the training figure becomes
    their median rounded down (30%), says it was measured by hubwatch, and the bandwidth figure, with no row of its
    own, stays derived from the publications."""
    own = [dataclasses.replace(u.MEASURED[0], value=v, source="benchmarks/results/cost_gpu.json", hubwatch=True)
           for v in (0.30, 0.36)]
    rows = (*u.MEASURED, *own)
    assert u.declared("train", rows) == 0.30 and u.summary("train", rows)["measured_by_hubwatch"] is True
    assert u.declared("bandwidth", rows) == u.declared("bandwidth")
    assert u.summary("bandwidth", rows)["measured_by_hubwatch"] is False


def test_a_kind_without_rows_is_refused() -> None:
    with pytest.raises(ValueError, match="no measurement"):
        u.declared("train", [])


def test_the_cost_section_says_where_its_utilisations_come_from() -> None:
    """An estimate's assumptions carry each figure's value, median, row count and sources; the note says they
    are published measurements, not hubwatch's."""
    from estimator import estimate
    from tests.estimator.estimator_configs import load_config

    result = estimate(load_config("qwen2/Qwen2.5-0.5B.json"), cost=costing.Workload()).cost
    sources = result["assumptions"]["sources"]
    assert sources["train"]["value"] == 0.40 and sources["train"]["rows"] == 14
    assert any("llm-foundry" in s for s in sources["train"]["sources"])
    assert any("gpt-fast" in s for s in sources["bandwidth"]["sources"])
    assert result["assumptions"]["measured"] is False and "MosaicML LLM Foundry" in result["notes"][0]
