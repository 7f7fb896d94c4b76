"""The cost figures as the revision page shows them (feeds/views/cost_view.py): stored JSON read defensively, one
row per card, "no price" said, and rendered escaped."""

from __future__ import annotations

import pytest

from estimator import estimate
from estimator.cost import Workload
from feeds.views.cost_view import cost_view
from feeds.views.view_models import ENV
from tests.estimator.estimator_configs import load_config

TEMPLATE = ENV.from_string('{% include "_cost.html" %}')


@pytest.mark.parametrize("result", [None, {}, {"parameters": {"total": 1}}, {"cost": None}, {"cost": []}])
def test_estimates_without_cost_show_none(result):
    """An estimate stored before cost figures existed has no cost view, and the page no cost section."""
    assert cost_view(result) is None
    assert "What it costs to run" not in TEMPLATE.render(cost=cost_view(result))


def test_a_real_estimate_gives_a_row_per_card_with_hours_dollars_and_tokens():
    """Llama-3.1-8B: a row per card with LoRA hours and dollars, tokens/s and $ per million tokens; the H200's
    price is "no price"; the table says it is an estimate and names each price's source."""
    result = estimate(load_config("llama/Llama-3.1-8B.json"), cost=Workload()).to_dict()
    view = cost_view(result)
    assert view is not None and len(view.rows) == 7 and view.workload == "10 epochs over 50,000 samples at batch 32"
    h100 = next(r for r in view.rows if r.card == "H100 80GB")
    assert h100.hours == "—" and h100.lora_hours.endswith(" h") and h100.lora_usd.startswith("$")
    assert h100.tokens_per_s != "—" and h100.usd_per_mtok.startswith("$")
    h200 = next(r for r in view.rows if r.card == "H200 141GB")
    assert h200.lora_usd == "no price" and h200.usd_per_mtok == "no price"
    html = TEMPLATE.render(cost=view)
    assert "What it costs to run" in html and "A roofline estimate, not a measurement" in html
    assert "$ per million tokens" in html and "AWS EC2 On-Demand" in html


def test_malformed_fields_show_as_absent_and_text_is_escaped():
    """Fields of the wrong type show as dashes; notes are escaped by the template engine."""
    view = cost_view({"cost": {"workload": "x", "train": {"cards": [{"card": "<b>T4</b>", "hours": "long"}, 3]},
                               "serve": {"unknown": "<script>x</script>"}, "cards": [], "notes": [1, "<i>kept</i>"]}})
    assert view is not None and view.rows[0].hours == "—" and view.notes == ["<i>kept</i>"]
    html = TEMPLATE.render(cost=view)
    assert "<script>" not in html and "&lt;script&gt;" in html and "&lt;b&gt;T4&lt;/b&gt;" in html
