"""Bad input to the serving figures: a figure with its assumption noted, or "unknown: reason", never an exception."""

from __future__ import annotations

import pytest
from serving_cases import serving_config

from estimator.gguf_inputs import config_from_gguf
from estimator.serving import serving

LLAMA = "configs/llama/Llama-3.1-8B.json"


def test_no_attention_layers_is_unknown_with_a_reason():
    """A config with no attention or state layer says so instead of pricing an empty cache."""
    out = serving({"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4,
                   "layer_types": ["mlp"] * 4})
    assert out["unknown"] == "no attention or state layer in config.json" and out["cards"] == {}


def test_no_layer_count_is_unknown():
    """Without num_hidden_layers nothing is priced, and the reason names the key."""
    out = serving({"model_type": "llama"})
    assert "num_hidden_layers" in out["unknown"]
    assert out["kv_cache"]["vllm"] == {"unknown": out["unknown"]}


def test_contradictory_head_counts_are_priced_as_stated_and_noted():
    """More key/value heads than attention heads: priced at the stated K/V heads, with a note."""
    config = {**serving_config(LLAMA), "num_key_value_heads": 48}
    out = serving(config)
    assert any("contradictory head counts" in n for n in out["notes"])
    assert out["kv_cache"]["transformers"]["bytes_per_token"] == 32 * 2 * 48 * 128 * 2


def test_non_integer_kv_heads_fall_back_to_one_per_head():
    """A key/value head count that is not a positive integer is replaced by the head count, noted."""
    out = serving({**serving_config(LLAMA), "num_key_value_heads": "eight"})
    assert any("assumed 32" in n for n in out["notes"])
    assert out["kv_cache"]["vllm"]["bytes_per_token"] == 32 * 2 * 32 * 128 * 2


def test_wrong_length_layer_types_is_ignored_and_noted():
    """A layer_types list of the wrong length is ignored for the family's rule, with a note."""
    config = {**serving_config("serving/gpt_oss/gpt-oss-20b.json")}
    config["layer_types"] = config["layer_types"][:5]
    out = serving(config)
    assert any("layer_types has 5 entries for 24 layers" in n for n in out["notes"])
    assert out["unknown"] is None


def test_ten_million_tokens_is_priced_with_a_note():
    """A context of 10 million is priced as asked, noted as beyond the model's positions; one beyond 10^8 is
    left out as unknown."""
    out = serving(serving_config(LLAMA), parameters=8_030_261_248, contexts=[10_000_000, 10**9, -3, "long"])
    assert "10000000" in out["kv_cache"]["vllm"]["at_context"]
    assert all(row["concurrency"]["10000000"] == 0 for row in out["cards"].values())
    assert any("beyond the model's 131,072 positions" in n for n in out["notes"])
    assert sum(n.startswith("unknown: context") for n in out["notes"]) == 3


def test_unknown_quantization_method_assumes_bf16_and_says_so():
    """An unknown quant_method prices the weights at bf16 with a note naming the method."""
    config = {**serving_config(LLAMA), "quantization_config": {"quant_method": "mystery"}}
    out = serving(config, parameters=8_000_000_000, linear=7_000_000_000)
    assert out["weights"]["bytes"] == 16_000_000_000
    assert any("unknown quantization method 'mystery'" in n for n in out["notes"])


@pytest.mark.parametrize("config", [None, [], "llama", 3])
def test_not_an_object_is_unknown(config):
    """A config that is not a JSON object is unknown, not an exception."""
    assert serving(config)["unknown"]  # type: ignore[arg-type]


def test_bad_settings_are_noted():
    """An unknown cache dtype and an out-of-range usable fraction fall back to the defaults, noted."""
    out = serving(serving_config(LLAMA), kv_dtype="int3", gpu_memory_utilization=7)
    assert out["kv_dtype"] == "bfloat16" and out["gpu_memory_utilization"] == 0.9
    assert len([n for n in out["notes"] if "int3" in n or "gpu_memory_utilization" in n]) == 2


def test_gguf_without_architecture_is_unknown():
    """GGUF metadata without general.architecture maps to nothing, with the reason."""
    config, notes = config_from_gguf({"llama.block_count": 32})
    assert config == {} and notes[0].startswith("unknown: general.architecture")
