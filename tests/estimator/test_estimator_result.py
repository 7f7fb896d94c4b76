"""The estimate's shape, its memory modes and cards, and the arithmetic that ties them together."""

from __future__ import annotations

import json

import pytest
from estimator_configs import load_config

from estimator import Estimate, at_batch, estimate, render_table
from estimator.memory import CARDS, CUDA_CONTEXT_BYTES, HEADROOM

MODES = ["inference", "full_finetune", "lora", "qlora", "full_finetune_gc", "lora_gc", "qlora_gc"]


def test_to_dict_has_the_promised_json_shape():
    """to_dict() carries parameters, input, memory, cards, notes, warnings and serving (and, where a card cannot
    hold batch 1, the two-card split), with integers where promised."""
    result = estimate(load_config("llama/Llama-3.1-8B.json"))
    doc = json.loads(json.dumps(result.to_dict()))
    assert set(doc) == {"parameters", "input", "memory", "cards", "notes", "warnings", "serving", "split"}
    p = doc["parameters"]
    assert {"total", "derived", "checkpoint", "by_tower", "by_component", "by_dtype", "delta", "used"} <= set(p)
    assert p["total"] == p["derived"] == 8_030_261_248 and p["checkpoint"] is None and p["used"] == "derived"
    assert all(isinstance(v, int) for v in [*p["by_tower"].values(), *p["by_component"].values()])
    assert sum(p["by_tower"].values()) == sum(p["by_component"].values()) == p["total"]
    for mode in MODES:
        assert isinstance(doc["memory"][mode]["batch_1_bytes"], int)
    assert set(doc["cards"]) == set(CARDS)


def test_llama3_8b_counts_its_lm_head_unlike_accelerate():
    """Llama-3-8B's LM head (525M) is in the count, in the head tower; accelerate's AutoModel misses it."""
    p = estimate(load_config("llama/Llama-3.1-8B.json")).parameters
    assert p["by_tower"] == {"text": 7_504_924_672, "head": 525_336_576}


def test_tied_embeddings_are_counted_once():
    """Qwen2.5-0.5B and GPT-2 tie the head to the embeddings: 494.0M and 124.4M, not 630.2M and 163.0M."""
    qwen = estimate(load_config("qwen2/Qwen2.5-0.5B.json"))
    gpt2 = estimate(load_config("gpt2/gpt2.json"))
    assert qwen.total == 494_032_768 and gpt2.total == 124_439_808
    assert any("counted once" in note for note in qwen.notes)


def test_clip_counts_both_towers_and_the_projections():
    """The seed's error: CLIP-ViT-B-32 is 151,277,313 parameters over text, vision and projection, not 87.5M."""
    p = estimate(load_config("clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json")).parameters
    assert p["total"] == 151_277_313
    assert set(p["by_tower"]) == {"text", "vision", "projection"}
    assert p["by_tower"]["vision"] == 87_456_000 and p["by_tower"]["projection"] == 655_361


def test_sequence_length_is_capped_and_configurable():
    """max_position_embeddings is capped at seq_len_cap (2048 by default) and the source is stated."""
    config = load_config("llama/Llama-3.1-8B.json")
    assert estimate(config).input["sequence_length"] == 2048
    short = estimate(config, seq_len_cap=512)
    assert short.input["sequence_length"] == 512 and "131072" in short.input["sequence_source"]
    assert (short.memory["full_finetune"]["per_sample_bytes"]
            < estimate(config).memory["full_finetune"]["per_sample_bytes"])


def test_vision_and_audio_inputs_are_stated():
    """Image size and patch count for vision towers; mel frames for an audio encoder."""
    clip = estimate(load_config("clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json")).input
    assert clip["vision"] == {"image_size": 224, "patch_size": 32, "patches": 49, "channels": 3, "tokens": 50}
    whisper = estimate(load_config("whisper/whisper-tiny.json")).input
    assert whisper["audio_frames"] == 3000 and whisper["audio_positions"] == 1500


def test_memory_modes_order_as_they_must():
    """Checkpointing saves activations (the step's peak never rises), LoRA is below full fine-tuning and QLoRA
    below LoRA, at batch 1."""
    mem = estimate(load_config("mistral/Mistral-7B-v0.1.json")).memory
    b1 = {m: mem[m]["batch_1_bytes"] for m in MODES}
    assert mem["full_finetune_gc"]["per_sample_bytes"] < mem["full_finetune"]["per_sample_bytes"]
    assert b1["full_finetune_gc"] <= b1["full_finetune"]
    assert b1["qlora"] < b1["lora"] < b1["full_finetune"]
    assert b1["qlora_gc"] < b1["lora_gc"] < b1["full_finetune_gc"]
    assert b1["inference"] < b1["qlora"]


def test_full_finetune_holds_at_least_sixteen_bytes_a_parameter():
    """AdamW with fp32 master weights and grads: the step holds 16 bytes a parameter plus the CUDA allowance
    whatever the batch (20 with foreach AdamW's temporary)."""
    result = estimate(load_config("llama/Llama-3.2-1B.json"))
    full = result.memory["full_finetune"]
    assert full["floor_bytes"] >= 16 * result.total + CUDA_CONTEXT_BYTES
    assert full["parts"]["adamw_moments"] == 8 * result.total


def test_inference_is_bf16_weights_plus_kv_cache():
    """Inference: 2 bytes a parameter plus a bf16 KV cache of 2 x layers x kv heads x head_dim x tokens."""
    result = estimate(load_config("llama/Llama-3.1-8B.json"))
    inference = result.memory["inference"]
    assert inference["parts"]["weights_bf16"] == 2 * result.total
    assert inference["parts"]["kv_cache_per_sample"] == 2 * 32 * 8 * 128 * 2048 * 2


@pytest.mark.parametrize("mode", MODES)
def test_card_batches_fit_and_the_next_one_does_not(mode):
    """The largest batch per card fits in the card less its headroom, and one more sample does not."""
    result = estimate(load_config("qwen2/Qwen2.5-0.5B.json"))
    doc = result.to_dict()
    for card, row in result.cards.items():
        batch = row["max_batch"][mode]
        usable = int(CARDS[card] * (1 - HEADROOM))
        if batch:
            assert at_batch(doc, mode, batch)["peak_bytes"] <= usable
        assert at_batch(doc, mode, batch + 1)["peak_bytes"] > usable


def test_a_model_too_big_for_a_card_gets_zero():
    """Full fine-tuning Mixtral fits on no card: every batch is 0, not a negative or a guess."""
    cards = estimate(load_config("mixtral/Mixtral-8x7B-v0.1.json")).cards
    assert all(row["max_batch"]["full_finetune"] == 0 for row in cards.values())


def test_render_table_shows_the_figures():
    """The table names the total, the towers, every mode and every card."""
    text = render_table(estimate(load_config("clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json")))
    assert "151,277,313" in text and "vision" in text
    for name in [*MODES, *CARDS]:
        assert name in text


def test_estimate_is_a_dataclass_with_total():
    """Estimate exposes total for callers that only want the number."""
    result = estimate(load_config("bert/bert-base-uncased.json"))
    assert isinstance(result, Estimate) and result.total == 109_514_298
