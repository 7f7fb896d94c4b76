"""The structure section of a revision's page and API: every tower's module graph with repeated blocks shown once, the
layer count and the forward-pass verdict, from the estimate stored at ingest; estimates stored before it show none."""

from __future__ import annotations

import html

import httpx
import pytest

from feeds.views.structure_view import shape_text, structure_view
from tests.support.served import LLAMA, Served


def _estimated(served: Served):
    history = served.store.history
    return next((r, e) for r in history.list_revisions(LLAMA) if (e := history.estimate_for(r.id)) is not None
                and e.result is not None)


def test_revision_page_shows_the_collapsed_graph(client: httpx.Client, served: Served) -> None:
    """An estimated Llama revision's page lists its 32 identical layers once, the head, and "Will it forward-pass"."""
    revision, estimate = _estimated(served)
    text = html.unescape(client.get(f"/repos/{LLAMA}/revisions/{revision.sha}").text)
    section = text[text.index('id="structure"'):]
    assert "Will it forward-pass: <strong>yes</strong>" in section
    assert "<code>model.layers.0-31.self_attn.k_proj</code>" in section and "×32" in section
    assert "<code>lm_head</code>" in section and "2048 × 128256" in section
    assert "model.layers.5." not in section


def test_api_revision_has_the_structure(client: httpx.Client, served: Served) -> None:
    """GET /api/v1/repos/.../revisions/{sha} carries estimate.result.structure.towers[].nodes[] (an added field)."""
    revision, _ = _estimated(served)
    body = client.get(f"/api/v1/repos/{LLAMA}/revisions/{revision.sha}").json()
    [tower] = body["estimate"]["result"]["structure"]["towers"]
    assert tower["nodes"][-1] == {"name": "lm_head", "type": "Linear", "output_shape": [2048, 128256]}
    assert body["estimate"]["result"]["structure"]["layers"] == 32
    assert body["estimate"]["parameters_total"] == 8_030_261_248  # the existing fields unchanged


@pytest.mark.parametrize("result", [None, {}, {"structure": None}, {"structure": "junk"}])
def test_an_estimate_without_structure_shows_no_section(result) -> None:
    """Estimates stored before structures existed (or damaged) give no section rather than an error."""
    assert structure_view(result) is None


def test_damaged_fields_read_as_unknown() -> None:
    """Odd stored values (a tower without rows, a shape that is not a list) read as unknown, never raise."""
    view = structure_view({"structure": {"towers": [{"name": "text", "output_shape": "x", "rows": [{"name": 3}]}],
                                         "forward_pass": False, "failure": {"node": "a.b", "reason": "r"}}})
    assert view is not None and view.failure == "a.b: r" and view.towers[0].output_shape == "?"
    assert view.towers[0].rows[0].name == "3" and view.towers[0].rows[0].repeat == 1
    assert shape_text([]) == "scalar" and shape_text([50, None]) == "50 × ?"


def test_revision_page_shows_the_two_card_split(client: httpx.Client, served: Served) -> None:
    """Llama-3.1-8B's full fine-tune fits no single card at batch 1: the page gives the two-card split, as stored."""
    revision, estimate = _estimated(served)
    stored = estimate.result["split"]["cards"]["H100 80GB"]["full_finetune"]
    text = html.unescape(client.get(f"/repos/{LLAMA}/revisions/{revision.sha}").text)
    section = text[text.index("Two-card split"):]
    assert "2 × H100 80GB" in section and "a contiguous layer cut (pipeline parallel)" in section
    assert f"{stored['layers'][0]} | {stored['layers'][1]}" in section and stored["cut_after"] in section
    assert "does not fit" in section


def test_split_rows_read_damaged_values_as_unknown() -> None:
    """A split stored with odd values reads as unknown cells, never an error."""
    view = structure_view({"structure": {"towers": []}, "split": {"cards": {"T4 16GB": {"lora": {"layers": "x"}}}}})
    assert view is not None and view.splits[0].layers == "?" and view.splits[0].fits is False
