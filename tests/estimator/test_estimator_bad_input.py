"""Bad config input: a clear EstimateError naming the key, never a crash and never a silent guess."""

from __future__ import annotations

import copy

import pytest
from estimator_configs import load_config

from estimator import EstimateError, estimate


def edited(path: str, **changes) -> dict:
    config = copy.deepcopy(load_config(path))
    for key, value in changes.items():
        target = config
        *parents, leaf = key.split("__")
        for parent in parents:
            target = target[parent]
        if value is KeyError:
            target.pop(leaf)
        else:
            target[leaf] = value
    return config


LLAMA = "llama/Llama-3.1-8B.json"

CASES = [
    (edited(LLAMA, num_hidden_layers=10**12), "num_hidden_layers"),
    (edited(LLAMA, num_hidden_layers=0), "num_hidden_layers"),
    (edited(LLAMA, hidden_size=-4096), "hidden_size"),
    (edited(LLAMA, hidden_size=KeyError), "hidden_size"),
    (edited(LLAMA, vocab_size="128256"), "vocab_size"),
    (edited(LLAMA, intermediate_size=True), "intermediate_size"),
    (edited(LLAMA, intermediate_size=14336.5), "intermediate_size"),
    (edited(LLAMA, num_key_value_heads=5), "num_key_value_heads"),
    (edited(LLAMA, num_attention_heads=31), "num_attention_heads"),
    (edited(LLAMA, tie_word_embeddings="yes"), "tie_word_embeddings"),
    (edited(LLAMA, model_type="llama-9000"), "model_type"),
    (edited(LLAMA, model_type=KeyError), "model_type"),
    (edited(LLAMA, model_type=7), "model_type"),
    (edited(LLAMA, architectures="LlamaForCausalLM"), "architectures"),
    (edited("mixtral/Mixtral-8x7B-v0.1.json", num_experts_per_tok=9), "num_experts_per_tok"),
    (edited("clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json", vision_config__patch_size=448), "vision_config.patch_size"),
    (edited("clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json", text_config__num_hidden_layers=-1),
     "text_config.num_hidden_layers"),
    (edited("clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json", vision_config="768"), "vision_config"),
    (edited("t5/t5-small.json", d_model=0), "d_model"),
    (edited("gpt2/gpt2.json", n_head=7), "n_head"),
    (edited("bert/bert-base-uncased.json", max_position_embeddings=10**9), "max_position_embeddings"),
    (edited("llava/llava-1.5-7b-hf.json", text_config__model_type="mamba"), "text_config.model_type"),
    (edited("qwen2_moe/Qwen1.5-MoE-A2.7B.json", mlp_only_layers="all"), "mlp_only_layers"),
    (edited("gemma/gemma-2b.json", torch_dtype="float7"), "torch_dtype"),
    ("not a dict", "config"),
]


@pytest.mark.parametrize("config,key", CASES, ids=[c[1] for c in CASES])
def test_bad_config_names_the_key(config, key):
    """Missing, contradictory, non-integer, zero, negative or absurd values raise EstimateError naming the key."""
    with pytest.raises(EstimateError) as err:
        estimate(config)
    assert err.value.key == key
    assert key in str(err.value)


@pytest.mark.parametrize("cap", [0, -1, True, 2.5, "2048"])
def test_bad_sequence_cap(cap):
    """seq_len_cap must be a positive integer."""
    with pytest.raises(EstimateError) as err:
        estimate(load_config(LLAMA), seq_len_cap=cap)
    assert err.value.key == "seq_len_cap"


def test_sub_config_defaults_are_stated():
    """LLaVA's text_config leaves its sizes to LlamaConfig's defaults: applied, and each one is noted."""
    notes = estimate(load_config("llava/llava-1.5-7b-hf.json")).notes
    assert any("text_config.hidden_size=4096" in note for note in notes)


def test_top_level_sizes_are_never_defaulted():
    """A top-level config without its core sizes is an error, not an estimate of a default model."""
    with pytest.raises(EstimateError) as err:
        estimate({"model_type": "llama"})
    assert err.value.key == "vocab_size"


def test_an_unmodelled_head_is_a_warning_not_a_silent_undercount():
    """A head class the estimator does not know is counted without its head, and the estimate warns."""
    config = {**load_config("qwen2/Qwen2.5-0.5B.json"), "architectures": ["Qwen2ForQuestionAnswering"]}
    result = estimate(config)
    assert any("Qwen2ForQuestionAnswering" in w for w in result.warnings)
