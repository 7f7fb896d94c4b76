"""The serving figures as pages show them (feeds/views/serving_view.py): stored JSON read defensively, and
rendered escaped."""

from __future__ import annotations

import pytest

from feeds.views.serving_view import context_label, serving_view
from feeds.views.view_models import ENV

MACRO = ENV.from_string('{% from "_macros.html" import serving_section %}{{ serving_section(s) }}')


@pytest.mark.parametrize("result", [None, {}, {"parameters": {"total": 1}}, {"serving": None}, {"serving": []}])
def test_estimates_without_serving_show_none(result):
    """An estimate stored before serving figures existed (or not an estimate at all) has no serving view."""
    assert serving_view(result) is None


def test_malformed_fields_show_as_unknown_not_errors():
    """Fields of the wrong type are shown as unknown or left out; rendering does not fail."""
    view = serving_view({"serving": {"contexts": ["8192", 8192, True], "weights": "x", "allowance": [],
                                     "cards": {"L4 24GB": {"loads": "yes", "concurrency": []}, "odd": 3},
                                     "kv_cache": {"vllm": {"at_context": {"8192": "big"}}}, "notes": [1, "kept"],
                                     "unknown": "no attention layers"}})
    assert view is not None and view.contexts == [8192] and view.weights_gib is None and view.notes == ["kept"]
    assert [c.name for c in view.cards] == ["L4 24GB", "odd"] and view.cards[0].concurrency == [None]
    html = MACRO.render(s=view)
    assert "unknown:</strong> no attention layers" in html and "&mdash;" in html


def test_upstream_text_is_escaped():
    """Notes and the weights' source (which can quote config values) are escaped by the template engine."""
    view = serving_view({"serving": {"contexts": [8192], "notes": ["model_type '<script>alert(1)</script>'"],
                                     "weights": {"bytes": 2**30, "source": "<b>x</b>"}, "cards": {}}})
    html = MACRO.render(s=view)
    assert "<script>" not in html and "&lt;script&gt;" in html and "&lt;b&gt;x&lt;/b&gt;" in html


def test_gguf_models_are_listed_with_the_cards_they_load_on():
    """A GGUF-only repo's models are listed with their quantization, weights and the cards that load them."""
    view = serving_view({"serving": {"contexts": [8192], "gguf": {"chosen": "m-Q8_0.gguf", "models": [
        {"name": "m-Q8_0.gguf", "file_type": "Q8_0", "weights_bytes": 2**31,
         "cards": {"T4 16GB": {"loads": False}, "L4 24GB": {"loads": True}}}]}}})
    html = MACRO.render(s=view)
    assert "m-Q8_0.gguf" in html and "2.00 GiB" in html and "<td>L4 24GB</td>" in html


@pytest.mark.parametrize(("n", "text"), [(8192, "8k"), (131072, "128k"), (1000, "1,000"), (1536, "1,536")])
def test_context_labels(n, text):
    """Contexts read as people say them."""
    assert context_label(n) == text
