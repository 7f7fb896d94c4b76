"""A GGUF header's metadata read as the config.json keys the KV cache needs (pure: the header is parsed elsewhere).

llama.cpp names its keys ``<arch>.<key>`` (gguf-py/gguf/constants.py ``Keys``); each maps to the transformers
key that means the same. A per-layer array (``head_count_kv`` of a hybrid, where 0 marks a layer without
attention) becomes ``layer_types``.
"""

from __future__ import annotations

from typing import Any

# llama.cpp architecture names -> transformers model_type, where they differ
ARCHITECTURES = {"deepseek2": "deepseek_v2", "gemma3": "gemma3_text", "gpt-oss": "gpt_oss", "command-r": "cohere",
                 "cohere2": "cohere2", "qwen3next": "qwen3_next", "falcon-h1": "falcon_h1", "granitehybrid":
                 "granitemoehybrid", "lfm2": "lfm2", "qwen2moe": "qwen2_moe", "qwen3moe": "qwen3_moe"}
KEYS = {  # <arch>.<suffix> -> config.json key
    "block_count": "num_hidden_layers",
    "context_length": "max_position_embeddings",
    "embedding_length": "hidden_size",
    "feed_forward_length": "intermediate_size",
    "vocab_size": "vocab_size",
    "attention.head_count": "num_attention_heads",
    "attention.head_count_kv": "num_key_value_heads",
    "attention.key_length": "head_dim",
    "attention.sliding_window": "sliding_window",
    "attention.kv_lora_rank": "kv_lora_rank",
    "rope.dimension_count": "qk_rope_head_dim",
    "attention.value_length": "v_head_dim",
    "ssm.conv_kernel": "mamba_d_conv",
    "ssm.state_size": "mamba_d_state",
    "ssm.inner_size": "mamba_d_ssm",
    "ssm.group_count": "mamba_n_groups",
    "ssm.time_step_rank": "mamba_n_heads",
    "shortconv.l_cache": "conv_L_cache",
    "full_attention_interval": "full_attention_interval",
}


def config_from_gguf(metadata: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(config.json-like dict, notes) from GGUF metadata key/values; never raises."""
    notes: list[str] = []
    arch = metadata.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        return {}, ["unknown: general.architecture is missing, so no <arch>.* key can be read"]
    config: dict[str, Any] = {"model_type": ARCHITECTURES.get(arch, arch)}
    for suffix, key in KEYS.items():
        value = metadata.get(f"{arch}.{suffix}")
        if value is not None:
            config[key] = value
    kv = config.get("num_key_value_heads")
    heads = config.get("num_attention_heads")
    if isinstance(heads, list):
        config["num_attention_heads"] = max((h for h in heads if isinstance(h, int)), default=0) or None
    if isinstance(kv, list):
        attention = [h for h in kv if isinstance(h, int) and h > 0]
        state = "linear_attention" if config.get("mamba_d_state") or config.get("conv_L_cache") else "dummy"
        config["layer_types"] = ["full_attention" if isinstance(h, int) and h > 0 else state for h in kv]
        config["num_key_value_heads"] = max(attention, default=None)
        if len(set(attention)) > 1:
            notes.append("head_count_kv differs between layers: priced at the largest")
    pattern = metadata.get(f"{arch}.attention.sliding_window_pattern")
    if isinstance(pattern, list) and config.get("sliding_window"):
        config["layer_types"] = ["sliding_attention" if p else "full_attention" for p in pattern]
    elif isinstance(pattern, int) and not isinstance(pattern, bool):
        config["sliding_window_pattern"] = pattern
    if "kv_lora_rank" in config:
        config.setdefault("qk_nope_head_dim", metadata.get(f"{arch}.attention.key_length_mla", 0)
                          or (config.get("head_dim") or 0))
    if "vocab_size" not in config and isinstance(metadata.get("tokenizer.ggml.tokens"), list):
        config["vocab_size"] = len(metadata["tokenizer.ggml.tokens"])
    if "num_hidden_layers" not in config:
        notes.append(f"unknown: {arch}.block_count is missing")
    return config, notes
