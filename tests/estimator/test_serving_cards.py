"""Serving per card (estimator/serving.py), the GGUF key mapping, and serving changes between revisions."""

from __future__ import annotations

import pytest
from serving_cases import serving_config

from estimator import estimate, serving_crossings
from estimator.gguf_inputs import config_from_gguf
from estimator.kv_cache import layout
from estimator.serving import gguf_weight_bytes, per_sequence, serving, weight_bytes

LLAMA = "configs/llama/Llama-3.1-8B.json"


def test_cards_follow_from_budget_and_cache():
    """Per card: the KV budget is usable minus weights minus allowance; concurrency is the budget over one
    sequence; it loads when one sequence at the full context fits; the longest context is the largest one
    sequence whose cache fits."""
    config = serving_config(LLAMA)
    out = serving(config, parameters=8_030_261_248)
    lay = layout(config)
    for row in out["cards"].values():
        budget = int(row["memory_bytes"] * 0.9) - 2 * 8_030_261_248 - out["allowance"]["bytes"]
        assert row["kv_budget_bytes"] == budget
        assert row["loads"] == (budget >= per_sequence(lay, 131072, 2))
        if not row["weights_fit"]:
            assert budget < per_sequence(lay, 1, 2) and set(row["concurrency"].values()) == {0}
            continue
        assert row["concurrency"]["8192"] == budget // per_sequence(lay, 8192, 2)
        longest = row["longest_context"]
        assert per_sequence(lay, longest, 2) <= budget
        assert longest == 131072 or per_sequence(lay, longest + 1, 2) > budget
    assert out["cards"]["T4 16GB"]["loads"] is False and out["cards"]["H200 141GB"]["concurrency"]["131072"] >= 1


def test_estimate_carries_serving_at_the_asked_contexts():
    """estimate() adds serving at 8k, 32k, the full context and those asked, with both runtimes' caches."""
    result = estimate(serving_config(LLAMA), serve_contexts=[4096]).to_dict()
    kv = result["serving"]["kv_cache"]
    assert list(kv["vllm"]["at_context"]) == ["4096", "8192", "32768", "131072"]
    assert kv["transformers"]["at_context"]["4096"] == 32 * 2 * 8 * 128 * 2 * 4096
    assert kv["transformers"]["fixed_bytes_per_sequence"] == 0


@pytest.mark.parametrize(("q", "per"), [
    ({"quant_method": "gptq", "bits": 4, "group_size": 128}, 0.5 + 2.5 / 128),
    ({"quant_method": "awq", "bits": 4, "group_size": 128}, 0.5 + 2.5 / 128),
    ({"quant_method": "bitsandbytes", "load_in_8bit": True}, 1.0),
    ({"quant_method": "fp8"}, 1.0),
    ({"quant_method": "mxfp4"}, 4.25 / 8),
])
def test_quantized_weights(q, per):
    """quantization_config prices the linear weights at the method's bytes and the rest at bf16."""
    got, source, _ = weight_bytes({"quantization_config": q}, 1000, 800, None)
    assert got == int(800 * per + 2 * 200) and q["quant_method"] in source


def test_stored_bytes_win():
    """A checkpoint's stored bytes (its headers) are its weights, whatever the config says."""
    assert weight_bytes({"quantization_config": {"quant_method": "gptq"}}, 10, 10, 1234)[0] == 1234


def test_gguf_tensor_types():
    """GGUF weights are priced by ggml type (Q4_K 4.5 bits, Q8_0 8.5), an unknown type noted, not counted."""
    total, notes = gguf_weight_bytes({"Q4_K": 1000, "Q8_0": 1000, "Q9_Z": 5})
    assert total == int(1000 * 4.5 / 8 + 1000 * 8.5 / 8) and "Q9_Z" in notes[0]


def test_gguf_metadata_maps_to_the_config_keys():
    """A GGUF header's keys become the config keys the cache needs: the same figures as the config.json."""
    metadata = {"general.architecture": "llama", "llama.block_count": 32, "llama.context_length": 131072,
                "llama.embedding_length": 4096, "llama.attention.head_count": 32,
                "llama.attention.head_count_kv": 8, "llama.vocab_size": 128256}
    config, notes = config_from_gguf(metadata)
    assert notes == []
    ours, theirs = layout(config), layout(serving_config(LLAMA))
    assert ours.at_context("vllm", 8192, 2) == theirs.at_context("vllm", 8192, 2)
    assert ours.max_context == 131072


def test_gguf_sliding_and_hybrid_layers():
    """GGUF's sliding window with a per-layer pattern, and a per-layer head_count_kv with 0 for mamba layers."""
    gemma, _ = config_from_gguf({"general.architecture": "gemma3", "gemma3.block_count": 4,
                                 "gemma3.attention.head_count": 4, "gemma3.attention.head_count_kv": 1,
                                 "gemma3.attention.key_length": 256, "gemma3.attention.sliding_window": 512,
                                 "gemma3.attention.sliding_window_pattern": [True, True, True, False]})
    assert [g.kind for g in layout(gemma).groups] == ["full", "sliding"]
    jamba, _ = config_from_gguf({"general.architecture": "jamba", "jamba.block_count": 4,
                                 "jamba.embedding_length": 4096, "jamba.attention.head_count": 32,
                                 "jamba.attention.head_count_kv": [0, 0, 8, 0], "jamba.ssm.conv_kernel": 4,
                                 "jamba.ssm.state_size": 16})
    groups = {g.kind: g.count for g in layout(jamba).groups}
    assert groups == {"full": 1, "state": 3}


def test_raised_context_is_a_serving_change():
    """Raising the context across a card's capacity is a crossing that says what moved and why."""
    config = serving_config("configs/llama/Llama-2-7b-hf.json")
    before = estimate(config)
    after = estimate({**config, "max_position_embeddings": 131072})
    lines = [c.summary for c in serving_crossings(before, after)]
    assert "on L4 24GB: the model no longer loads at its full context (128k): the context was raised from 4k to " \
           "128k" in lines
    assert any(s.startswith("on L4 24GB: 3 sequences at its full context (4k) before, 0 now") for s in lines)
    assert serving_crossings(before, before) == []


def test_estimates_stored_before_serving_are_not_compared():
    """An estimate stored before serving figures existed (no `serving` key) yields no serving crossing."""
    after = estimate(serving_config(LLAMA)).to_dict()
    before = {k: v for k, v in after.items() if k != "serving"}
    assert serving_crossings(before, after) == []
