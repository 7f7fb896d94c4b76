"""The KV cache per sequence (estimator/kv_cache.py) against the bytes transformers' own cache holds after a
prefill: recorded (tests/fixtures/estimator/recorded_kv_truth.json) by default, live with -m groundtruth."""

from __future__ import annotations

import json

import pytest
from serving_cases import KV_CASES, PATHS, RECORDED_KV, RECORDED_ONLY_CASES, case_key, serving_config

from estimator.kv_cache import layout

RECORDED = json.loads(RECORDED_KV.read_text())["bytes"]
KINDS = {"full", "sliding", "latent", "state", "cross"}
JAMBA = "serving/jamba/Jamba-v0.1.json"


def transformers_bytes(path: str, tokens: int) -> int:
    lay = layout(serving_config(path))
    assert lay.unknown is None, lay.unknown
    return lay.at_context("transformers", tokens, 2) + lay.fixed_bytes("transformers", 2)


@pytest.mark.parametrize(("path", "tokens"), [*KV_CASES, *RECORDED_ONLY_CASES])
def test_transformers_figure_is_exact_against_the_recorded_cache(path, tokens):
    """The transformers figure equals, to the byte, what transformers' cache held after the prefill."""
    assert transformers_bytes(path, tokens) == RECORDED[case_key(path, tokens)]


def test_every_case_of_the_cache_is_covered():
    """At least 20 architectures, and every kind of layer (full, sliding, latent, state, cross) among them."""
    types = {serving_config(p).get("model_type") for p in PATHS}
    kinds = {g.kind for p in PATHS for g in layout(serving_config(p)).groups}
    assert len(types) >= 20 and kinds == KINDS


@pytest.mark.groundtruth
@pytest.mark.parametrize(("path", "tokens"), KV_CASES)
def test_transformers_figure_is_exact_live(path, tokens):
    """Live: transformers' cache built on the meta device from the config, after a prefill, holds exactly our bytes."""
    from kv_truth import measure_kv

    assert transformers_bytes(path, tokens) == measure_kv(serving_config(path), tokens)


@pytest.mark.groundtruth
def test_jamba_measured_in_parts_equals_its_whole_prefill():
    """Live: Jamba's cache measured in parts (its Mamba states at two short prefills, its attention layers through
    the all-attention config at the stated length) is, layer by layer, its cache after one whole prefill."""
    from kv_truth import STATE_PROBES, layer_entries, measured_in_parts

    config = serving_config(JAMBA)
    tokens = STATE_PROBES[1] + 16  # past the probes, as short as a whole Jamba prefill stays cheap
    assert measured_in_parts(config, tokens) == layer_entries(config, tokens)


@pytest.mark.parametrize("grown", ["conv_states[0]", "keys"])
def test_measuring_in_parts_refuses_a_state_that_grows(monkeypatch, grown):
    """A per-token scanner whose state (not its K/V) differs between the two short prefills stops the measurement in
    parts (the short run would be no stand-in for the stated length); K/V growing is what it expects."""
    import kv_truth

    def entries(config_json, tokens):
        state = (("conv_states[0]", (1, 8, tokens if grown == "conv_states[0]" else 4), "torch.bfloat16"),)
        attention = (("keys", (1, 2, tokens, 4), "torch.bfloat16"), ("values", (1, 2, tokens, 4), "torch.bfloat16"))
        return (state, attention)

    monkeypatch.setattr(kv_truth, "_layer_entries", entries)
    config = {"model_type": "jamba"}
    if grown == "keys":
        assert kv_truth.measured_in_parts(config, 5000)[1][0][1] == (1, 2, 5000, 4)
    else:
        with pytest.raises(AssertionError, match="grows with the prefill"):
            kv_truth.measured_in_parts(config, 5000)


@pytest.mark.parametrize(("path", "per_token"), [
    # vLLM's MLAAttentionSpec: one head of kv_lora_rank + qk_rope_head_dim, 61 layers, bf16
    ("serving/deepseek_v3/DeepSeek-V3.json", 61 * (512 + 64) * 2),
    ("serving/deepseek_v2/DeepSeek-V2-Lite.json", 27 * (512 + 64) * 2),
    # attention layers only: 4 of Jamba's 32, 12 of Qwen3-Next's 48
    ("serving/jamba/Jamba-v0.1.json", 4 * 2 * 8 * 128 * 2),
    ("serving/qwen3_next/Qwen3-Next-80B-A3B-Instruct.json", 12 * 2 * 2 * 256 * 2),
    # Bamba: the 3 layers of attn_layer_indices; Granite 4.0-H: the 4 attention layers of layer_types
    ("serving/bamba/Bamba-9B.json", 3 * 2 * 8 * 128 * 2),
    ("serving/granitemoehybrid/granite-4.0-h-small.json", 4 * 2 * 8 * 128 * 2),
    # Zamba2: one shared block, but an Attention (own K/V) at each of its 6 places; head_dim 2 * 2048 / 32
    ("serving/zamba2/Zamba2-1.2B.json", 6 * 2 * 32 * 128 * 2),
    # Nemotron-H: the 4 '*' of its pattern; the 24 MLP-only '-' layers keep nothing
    ("serving/nemotron_h/Nemotron-H-8B-Base-8K.json", 4 * 2 * 8 * 128 * 2),
    # LFM2-8B-A1B: 6 attention layers of 8 KV heads x 64
    ("serving/lfm2_moe/LFM2-8B-A1B.json", 6 * 2 * 8 * 64 * 2),
    # Qwen3.5: 10 full-attention layers of 2 KV heads x 256; Kimi Linear: 7 latent (MLA) layers of 512 + 64
    ("serving/qwen3_5_moe/Qwen3.5-35B-A3B.json", 10 * 2 * 2 * 256 * 2),
    ("serving/kimi_linear/Kimi-Linear-48B-A3B-Instruct.json", 7 * (512 + 64) * 2),
])
def test_vllm_grows_by_the_published_rule(path, per_token):
    """vLLM's cache grows by its published per-token rule: latent for MLA, attention layers only for hybrids."""
    lay = layout(serving_config(path))
    assert lay.at_context("vllm", 1600, 2) - lay.at_context("vllm", 800, 2) == 800 * per_token


@pytest.mark.parametrize(("path", "fixed"), [
    # MambaStateShapeCalculator.mamba1_state_shape: conv (d_conv - 1, inner), ssm (inner, d_state); 28 layers
    ("serving/jamba/Jamba-v0.1.json", 28 * 2 * (8192 * 3 + 8192 * 16)),
    # mamba2_state_shape: conv (d_conv - 1, d_ssm + 2 * groups * d_state), ssm (heads, head_dim, d_state)
    ("serving/falcon_h1/Falcon-H1-0.5B-Instruct.json", 36 * 2 * (1792 * 3 + 24 * 64 * 128)),
    # gated_delta_net_state_shape: conv (kernel - 1, 2 * 16 * 128 + 32 * 128), temporal (32, 128, 128)
    ("serving/qwen3_next/Qwen3-Next-80B-A3B-Instruct.json", 36 * 2 * (8192 * 3 + 32 * 128 * 128)),
    # mamba2_state_shape for Bamba and Granite 4.0-H: d_ssm = expand * hidden = 8192, one group of 128
    ("serving/bamba/Bamba-9B.json", 29 * 2 * (8448 * 3 + 128 * 64 * 128)),
    ("serving/granitemoehybrid/granite-4.0-h-small.json", 36 * 2 * (8448 * 3 + 128 * 64 * 128)),
    # Zamba2: all 38 layers hold mamba 2 (the 6 hybrid ones too), 64 heads of 2 * 2048 / 64
    ("serving/zamba2/Zamba2-1.2B.json", 38 * 2 * (4352 * 3 + 64 * 64 * 128)),
    # Nemotron-H: 24 'M' layers, 8 groups; NemotronHForCausalLMConfig keeps the SSM state in float32
    ("serving/nemotron_h/Nemotron-H-8B-Base-8K.json", 24 * (2 * 10240 * 3 + 4 * 128 * 64 * 128)),
    # gated_delta_net_state_shape for Qwen3.5's 30 layers, the state at its mamba_ssm_dtype float32
    ("serving/qwen3_5_moe/Qwen3.5-35B-A3B.json", 30 * (2 * 8192 * 3 + 4 * 32 * 128 * 128)),
    # kda_state_shape: conv (kernel - 1, 3 * 32 * 128) in bf16, recurrent (32, 128, 128) in float32; 20 KDA layers
    ("serving/kimi_linear/Kimi-Linear-48B-A3B-Instruct.json", 20 * (2 * 12288 * 3 + 4 * 32 * 128 * 128)),
    # short_conv_state_shape: (L_cache - 1, hidden)
    ("serving/lfm2/LFM2-1.2B.json", 10 * 2 * 2048 * 2),
    ("serving/lfm2_moe/LFM2-8B-A1B.json", 18 * 2 * 2048 * 2),
    # CrossAttentionSpec: Whisper's 1500 encoder frames in pages of 16, 4 layers of 6 heads x 64
    ("configs/whisper/whisper-tiny.json", 4 * 2 * 6 * 64 * 1504 * 2),
])
def test_vllm_fixed_state_by_the_published_rule(path, fixed):
    """vLLM's per-sequence state follows its state-shape rules (conv keeps d_conv - 1 columns, model dtype)."""
    assert layout(serving_config(path)).fixed_bytes("vllm", 2) == fixed


def test_mla_reports_latent_and_decompressed():
    """DeepSeek-V3 reports the latent (576 a layer) and the decompressed K/V (128 heads x (192 + 128))."""
    from estimator.serving import serving

    mla = serving(serving_config("serving/deepseek_v3/DeepSeek-V3.json"))["kv_cache"]["mla"]
    assert mla["latent_bytes_per_token"] == 61 * 576 * 2
    assert mla["decompressed_bytes_per_token"] == 61 * 128 * (128 + 64 + 128) * 2


def test_sliding_window_caps_the_cache():
    """Mistral's cache stops growing at its window in both runtimes; Llama's keeps growing."""
    mistral = layout(serving_config("configs/mistral/Mistral-7B-v0.1.json"))
    llama = layout(serving_config("configs/llama/Llama-3.1-8B.json"))
    for runtime in ("transformers", "vllm"):
        assert mistral.at_context(runtime, 100_000, 2) == mistral.at_context(runtime, 200_000, 2)
        assert llama.at_context(runtime, 200_000, 2) == 2 * llama.at_context(runtime, 100_000, 2)


def test_fp8_halves_the_cache():
    """An fp8 cache is half a bf16 one."""
    lay = layout(serving_config("configs/llama/Llama-3.1-8B.json"))
    assert 2 * lay.at_context("vllm", 8192, 1) == lay.at_context("vllm", 8192, 2)


def test_hybrid_layers_are_read_one_by_one():
    """Each hybrid's layers as its config places them: Nemotron-H's MLP-only layers hold nothing, Zamba2's hybrid
    layers hold the shared block's K/V and their own mamba state, Bamba's attention sits at its indices only."""
    def kinds(path):
        return {g.kind: g.count for g in layout(serving_config(path)).groups}

    assert kinds("serving/nemotron_h/Nemotron-H-8B-Base-8K.json") == {"full": 4, "state": 24}
    assert kinds("serving/zamba2/Zamba2-1.2B.json") == {"full": 6, "state": 38}
    assert kinds("serving/bamba/Bamba-9B.json") == {"full": 3, "state": 29}
    assert kinds("serving/granitemoehybrid/granite-4.0-h-small.json") == {"full": 4, "state": 36}
    # Kimi Linear numbers its layers from 1: 4, 8, ..., 24 and the last (27) are latent attention
    assert kinds("serving/kimi_linear/Kimi-Linear-48B-A3B-Instruct.json") == {"latent": 7, "state": 20}
    # the same layers moved: the figure follows the pattern, not the family
    nemotron = serving_config("serving/nemotron_h/Nemotron-H-8B-Base-8K.json")
    moved = {**nemotron, "hybrid_override_pattern": nemotron["hybrid_override_pattern"].replace("-", "*", 2)}
    assert {g.kind: g.count for g in layout(moved).groups} == {"full": 6, "state": 24}


def test_nemotron_h_ssm_state_follows_its_cache_dtype():
    """vLLM keeps Nemotron-H's SSM state at the config's mamba_ssm_cache_dtype (float32 when absent); transformers
    keeps it in float32 either way."""
    config = serving_config("serving/nemotron_h/Nemotron-H-8B-Base-8K.json")
    half = layout({**config, "mamba_ssm_cache_dtype": "bfloat16"})
    full = layout(config)
    ssm = 24 * 128 * 64 * 128
    assert full.fixed_bytes("vllm", 2) - half.fixed_bytes("vllm", 2) == 2 * ssm
    assert full.fixed_bytes("transformers", 2) == half.fixed_bytes("transformers", 2)
    odd = layout({**config, "mamba_ssm_cache_dtype": "fp7"})
    assert odd.fixed_bytes("vllm", 2) == full.fixed_bytes("vllm", 2)
    assert any("fp7" in n for n in odd.notes)


def test_zamba2_kv_heads_per_runtime():
    """Zamba2 with fewer key/value heads: transformers caches those, vLLM's shared-block Attention all heads."""
    config = {**serving_config("serving/zamba2/Zamba2-1.2B.json"), "num_key_value_heads": 8}
    lay = layout(config)
    assert lay.token_bytes(2) == {"transformers": 6 * 2 * 8 * 128 * 2, "vllm": 6 * 2 * 32 * 128 * 2}
    assert any("zamba2" in n for n in lay.notes)


@pytest.mark.parametrize(("change", "noted"), [
    ({"hybrid_override_pattern": "M*M-"}, "4 letters for 52 layers"),
    ({"hybrid_override_pattern": "Z" * 52}, "letters ['Z']"),
])
def test_a_bad_hybrid_pattern_is_noted(change, noted):
    """A pattern that does not fit the layers, or a letter nobody defined, is said in the notes, never silent."""
    lay = layout({**serving_config("serving/nemotron_h/Nemotron-H-8B-Base-8K.json"), **change})
    assert any(noted in n for n in lay.notes), lay.notes


def test_attention_indices_outside_the_model_are_noted():
    """attn_layer_indices past the last layer are dropped with a note; the rest keep their attention."""
    lay = layout({**serving_config("serving/bamba/Bamba-9B.json"), "attn_layer_indices": [9, 18, 40]})
    assert {g.kind: g.count for g in lay.groups} == {"full": 2, "state": 30}
    assert any("outside" in n for n in lay.notes)


def test_kimi_linear_layers_left_unnamed_are_noted():
    """A linear_attn_config that leaves layers out says how many it named; those layers are priced at nothing."""
    config = serving_config("serving/kimi_linear/Kimi-Linear-48B-A3B-Instruct.json")
    lac = {**config["linear_attn_config"], "kda_layers": config["linear_attn_config"]["kda_layers"][:-2]}
    lay = layout({**config, "linear_attn_config": lac})
    assert {g.kind: g.count for g in lay.groups} == {"latent": 7, "state": 18}
    assert any("names 25 of 27 layers" in n for n in lay.notes), lay.notes
