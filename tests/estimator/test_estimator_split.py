"""The two-card split: only where one card cannot hold batch 1, a contiguous layer cut whose two cards share out the
mode's batch-1 peak (each with its own CUDA context), cut where the larger card is smallest."""

from __future__ import annotations

import pytest
from estimator_configs import load_config

from estimator import estimate
from estimator.memory import CARDS, CUDA_CONTEXT_BYTES, HEADROOM
from estimator.split import render_split

LLAMA_1B = "llama/Llama-3.2-1B.json"


@pytest.mark.parametrize("path", [LLAMA_1B, "llama/Llama-3.1-8B.json", "t5/flan-t5-base.json"])
def test_a_split_exactly_where_batch_1_does_not_fit(path):
    """Every (card, mode) with a largest batch of 0 has a split, and no other."""
    result = estimate(load_config(path))
    splits = (result.split or {}).get("cards", {})
    for card, row in result.cards.items():
        for mode, batch in row["max_batch"].items():
            assert (mode in splits.get(card, {})) == (batch == 0), (card, mode)


def test_the_two_cards_share_out_the_peak():
    """The two cards together hold the mode's batch-1 peak plus one more CUDA context; the layers are all placed."""
    result = estimate(load_config(LLAMA_1B))
    cut = result.split["cards"]["T4 16GB"]["full_finetune"]
    assert sum(cut["layers"]) == 16 and min(cut["layers"]) >= 1
    peak = result.memory["full_finetune"]["batch_1_bytes"]
    assert abs(sum(cut["card_bytes"]) - (peak + CUDA_CONTEXT_BYTES)) <= 2
    assert cut["fits"] == (max(cut["card_bytes"]) <= CARDS["T4 16GB"] * (1 - HEADROOM))
    assert cut["cut_after"] == f"text decoder layer {cut['layers'][0] - 1}"


def test_a_model_that_fits_everywhere_has_no_split():
    """CLIP fits every card at batch 1 in every mode: no split section at all (the JSON is unchanged)."""
    result = estimate(load_config("clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json"))
    assert result.split is None and "split" not in result.to_dict()


def test_too_big_for_two_cards_says_so():
    """Llama-3.1-8B's full fine-tune does not fit two 80 GB cards either: the split says it does not fit."""
    result = estimate(load_config("llama/Llama-3.1-8B.json"))
    assert result.split["cards"]["H100 80GB"]["full_finetune"]["fits"] is False
    text = render_split(result.split)
    assert "2 x H100 80GB" in text and "does not fit" in text and "pipeline parallel" in text
