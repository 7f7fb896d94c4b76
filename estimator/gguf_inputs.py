"""A GGUF-only repo as the estimator's inputs (pure: the headers are parsed elsewhere, tracker/formats/gguf.py).

``config_from_gguf``: llama.cpp names its keys ``<arch>.<key>`` (gguf-py/gguf/constants.py ``Keys``); each maps
to the transformers key that means the same. A per-layer array (``head_count_kv`` of a hybrid, where 0 marks a
layer without attention) becomes ``layer_types``.

``gguf_models`` / ``estimate_gguf``: a repo's GGUF files as models (the parts of a split
``-00001-of-0000N.gguf`` are one model, their tensors summed), each with a weight manifest (names as
transformers names them where llama.cpp's map is known, the ggml type as dtype, the shape in torch's order:
GGUF lists the innermost dimension first) and its config. A repo with several quantizations is estimated on
its largest (the highest precision: the one every other is cut from); each other quantization gets its weights
and per card whether it loads and how many sequences fit, in ``serving.gguf``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .api import estimate
from .errors import EstimateError
from .ggml_types import GGML_TYPES_BY_NAME
from .result import Estimate
from .serving import serving

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
    "expert_count": "num_experts",
    "expert_used_count": "num_experts_per_tok",
    "expert_feed_forward_length": "moe_intermediate_size",
    "expert_shared_feed_forward_length": "shared_expert_intermediate_size",
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
        ff = config.get("intermediate_size")
        if arch == "nemotron_h" and isinstance(ff, list) and len(ff) == len(kv):
            # llama.cpp: a Nemotron-H layer is recurrent only when it has neither K/V heads nor a feed-forward; one
            # with a feed-forward alone is an MLP-only layer and keeps nothing
            config["layer_types"] = [t if t == "full_attention" or not (isinstance(f, int) and f > 0) else "mlp"
                                     for t, f in zip(config["layer_types"], ff, strict=True)]
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
    if arch == "llama" and isinstance(config.get("num_experts"), int) and config["num_experts"] > 0:
        config["model_type"] = "mixtral"  # llama.cpp writes Mixtral as llama with experts
        config["num_local_experts"] = config.pop("num_experts")
    if "num_hidden_layers" not in config:
        notes.append(f"unknown: {arch}.block_count is missing")
    return config, notes


# llama.cpp's tensor names (gguf-py/gguf/tensor_mapping.py) -> transformers' names, for the llama family
# (llama, mistral, mixtral, qwen2/3, gemma, phi3): towers and LoRA roles read them. Others keep their name.
TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
BUFFERS = {"rope_freqs.weight": "model.rotary_emb.inv_freq"}  # llama 3's rope factors: a buffer, not a parameter
BLOCK_NAMES = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
               "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "attn_qkv": "self_attn.qkv_proj",
               "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
               "ffn_norm": "post_attention_layernorm", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
               "ffn_down": "mlp.down_proj", "ffn_gate_inp": "mlp.gate", "ffn_gate_exps": "mlp.experts.gate_proj",
               "ffn_up_exps": "mlp.experts.up_proj", "ffn_down_exps": "mlp.experts.down_proj"}
_BLOCK = re.compile(r"^blk\.(\d+)\.(\w+)\.(weight|bias)$")
_TOP = re.compile(r"^(\w+)\.(weight|bias)$")
SPLIT = re.compile(r"^(?P<stem>.+)-(?P<part>\d{5})-of-(?P<parts>\d{5})\.gguf$", re.IGNORECASE)


def tensor_name(name: str) -> str:
    """A GGUF tensor's name as transformers names it, where llama.cpp's map is known."""
    if name in BUFFERS:
        return BUFFERS[name]
    block = _BLOCK.match(name)
    if block and block[2] in BLOCK_NAMES:
        return f"model.layers.{block[1]}.{BLOCK_NAMES[block[2]]}.{block[3]}"
    top = _TOP.match(name)
    if top and top[1] in TOP_NAMES:
        return f"{TOP_NAMES[top[1]]}.{top[2]}"
    return name


@dataclass
class GgufModel:
    """One model of a repo's GGUF files: a file, or the parts of a split."""

    name: str  # the file, or the split's name with its part numbers as -*-of-N
    paths: list[str]
    file_type: str | None = None
    tensor_bytes: int | None = 0  # None when a tensor's type has no known size
    metadata: dict[str, Any] = field(default_factory=dict)
    tensors: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def manifest(self) -> dict[str, tuple[str, tuple[int, ...]]]:
        """name -> (ggml type, torch-order shape); tensors of an unknown type are left out (noted)."""
        out: dict[str, tuple[str, tuple[int, ...]]] = {}
        for t in self.tensors:
            name, kind, shape = t.get("name"), t.get("type"), t.get("shape")
            if not isinstance(name, str) or kind not in GGML_TYPES_BY_NAME or not isinstance(shape, list):
                continue
            out[tensor_name(name)] = (str(kind), tuple(reversed(shape)))
        return out

    def config(self) -> tuple[dict[str, Any], list[str]]:
        config, notes = config_from_gguf(self.metadata)
        if not config:
            return config, notes
        embedding = next((t for t in self.tensors if t.get("name") == "token_embd.weight"), None)
        if "vocab_size" not in config and embedding and isinstance(embedding.get("shape"), list) \
                and len(embedding["shape"]) == 2:
            config["vocab_size"] = embedding["shape"][1]
        config["tie_word_embeddings"] = not any(t.get("name") == "output.weight" for t in self.tensors)
        # llama.cpp runs GGUFs as causal language models: the head is the embedding's or output.weight
        config.setdefault("architectures", ["GgufForCausalLM"])
        return config, notes


def gguf_models(scans: Mapping[str, Mapping[str, Any]]) -> list[GgufModel]:
    """The models among a revision's GGUF scans (path -> the reader's facts), largest first; a split's parts
    are one model, a missing part noted."""
    models: dict[str, GgufModel] = {}
    expected: dict[str, int] = {}
    for path in sorted(scans):
        facts = scans[path]
        split = SPLIT.match(path)
        key = f"{split['stem']}-*-of-{split['parts']}.gguf" if split else path
        model = models.setdefault(key, GgufModel(key, []))
        model.paths.append(path)
        if split:
            expected[key] = int(split["parts"])
        tensors = facts.get("tensors") if isinstance(facts.get("tensors"), list) else []
        model.tensors += [t for t in tensors if isinstance(t, Mapping)]
        size = facts.get("tensor_bytes")
        model.tensor_bytes = None if model.tensor_bytes is None or not isinstance(size, int) \
            else model.tensor_bytes + size
        if isinstance(facts.get("note"), str):
            model.notes.append(f"{path}: header not fully read ({facts['note']}); estimated from what was read")
        if size is None and tensors:
            model.notes.append(f"{path}: a tensor's ggml type has no known size, so its bytes are not counted")
        metadata = facts.get("metadata")
        if isinstance(metadata, Mapping) and metadata.get("general.architecture") and not model.metadata:
            model.metadata = dict(metadata)
            model.file_type = facts.get("file_type") if isinstance(facts.get("file_type"), str) else None
    for key, parts in expected.items():
        if len(models[key].paths) != parts:
            models[key].notes.append(f"{key}: {len(models[key].paths)} of {parts} parts present; the tensors of "
                                     "the others are not counted")
    found = [m for m in models.values() if m.tensors or m.metadata]
    return sorted(found, key=lambda m: (-(m.tensor_bytes or 0), m.name))


def estimate_gguf(scans: Mapping[str, Mapping[str, Any]], **options: Any) -> Estimate | None:
    """The estimate of a GGUF-only repo on its largest model, with every model's serving figures in
    ``serving.gguf``; None when no GGUF was read. EstimateError as estimate() raises it."""
    models = gguf_models(scans)
    if not models:
        return None
    chosen = models[0]
    config, notes = chosen.config()
    manifest = chosen.manifest()
    if not config and not manifest:
        raise EstimateError(chosen.name, "; ".join(notes) or "no metadata and no tensors were read")
    try:
        result = estimate(config, manifest or None, weights_from="GGUF header", **options)
    except EstimateError as err:
        if not manifest:
            raise
        notes.append(f"the header's keys do not derive the structure ({err}): counted from its tensors")
        bare = {k: v for k, v in config.items() if k not in ("model_type", "architectures")}
        result = estimate(bare, manifest, weights_from="GGUF header", **options)
    result.notes[:0] = [*notes, *chosen.notes,
                        f"GGUF-only repo: estimated from {chosen.name} ({chosen.file_type or 'type unknown'}), the "
                        f"largest of its {len(models)} GGUF model(s); config keys read from its header"]
    if result.serving is not None:
        result.serving["gguf"] = {"chosen": chosen.name,
                                  "why": "the largest file: the highest precision, every smaller quantization fits "
                                         "where it does",
                                  "models": [_variant(m, options) for m in models]}
    return result


def _variant(model: GgufModel, options: Mapping[str, Any]) -> dict[str, Any]:
    """One GGUF model's weights and, per card, whether it loads and the sequences that fit."""
    config, notes = model.config()
    section = serving(config, stored_bytes=model.tensor_bytes, stored_from="GGUF header",
                      kv_dtype=options.get("kv_dtype"),
                      gpu_memory_utilization=options.get("gpu_memory_utilization", 0.9))
    cards = {card: {k: row[k] for k in ("loads", "longest_context", "concurrency_full_context", "concurrency")
                    if k in row} for card, row in (section.get("cards") or {}).items()}
    return {"name": model.name, "paths": model.paths, "file_type": model.file_type,
            "weights_bytes": model.tensor_bytes, "full_context": section.get("full_context"),
            "unknown": section.get("unknown"), "notes": [*notes, *model.notes], "cards": cards}
