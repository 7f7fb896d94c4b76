"""The estimates chart's geometry: points in order, on the plot, linked by sha, with card lines that matter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from feeds.views.estimate_chart import GIB, card_capacities, estimate_tables, memory_panel, parameters_panel
from storage.read_model import EstimatePoint


def _points(n: int) -> list[EstimatePoint]:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    return [EstimatePoint(f"{i:040x}", start + timedelta(days=i), 1_000_000 * (i + 1), (i + 1) * 3 * GIB, (i + 1) * GIB)
            for i in range(n)]


def test_points_run_left_to_right_and_stay_inside_the_plot() -> None:
    """Older revisions are further left, larger values higher, and every point lies inside the plot area."""
    panel = parameters_panel(_points(5))
    dots = panel.series[0].dots
    assert [d.x for d in dots] == sorted(d.x for d in dots)
    assert [d.y for d in dots] == sorted((d.y for d in dots), reverse=True)
    assert all(panel.plot_left <= d.x <= panel.plot_right and 0 <= d.y <= panel.plot_bottom for d in dots)
    assert dots[0].sha == f"{0:040x}" and panel.points[0].label == f"{0:012x}: 1,000,000 parameters"


def test_memory_panel_draws_cards_up_to_the_first_that_holds_the_peak() -> None:
    """Card lines stop at the smallest card above the largest value, and cards of one size share a line."""
    cards = card_capacities({"cards": {"T4": {"memory_bytes": 16 * GIB}, "L4": {"memory_bytes": 24 * GIB},
                                       "A10G": {"memory_bytes": 24 * GIB}, "H200": {"memory_bytes": 141 * GIB}}})
    assert cards == {"T4": 16 * GIB, "L4 / A10G": 24 * GIB, "H200": 141 * GIB}
    panel = memory_panel(_points(6), cards)  # peak: 18 GiB
    assert [c.label for c in panel.cards] == ["T4 (16 GiB)", "L4 / A10G (24 GiB)"]
    assert [s.name for s in panel.series] == ["full fine-tune", "LoRA"]


def test_estimate_tables_read_a_partial_result_without_failing() -> None:
    """Missing or malformed parts of a stored estimate leave gaps in the tables rather than errors."""
    assert estimate_tables(None) is None
    tables = estimate_tables({"parameters": {"by_tower": {"text": 5, "bad": "x"}, "derived": 5}, "memory": {"lora": {}}})
    assert tables is not None and tables.towers == [("text", 5)] and tables.derived == 5 and tables.modes == []
