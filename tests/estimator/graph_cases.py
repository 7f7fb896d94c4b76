"""The configs the module graph is checked on against transformers, and broken copies of real ones (test-only)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from estimator_configs import case_config

# Written by tests/estimator/record_graph.py from transformers on the meta device (the `groundtruth` extra).
RECORDED_GRAPH = Path(__file__).resolve().parents[1] / "fixtures" / "estimator" / "recorded_graph.json"

CASES = [
    "clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json",
    "clip/clip-vit-large-patch14.json",
    "clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json#text_config",
    "clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json#vision_config",
    "llama/Llama-3.2-1B.json",
    "mistral/Mistral-7B-v0.1.json",
    "qwen2/Qwen2.5-0.5B.json",
    "qwen3/Qwen3-0.6B.json",
    "gemma/gemma-2b.json",
    "gemma2/gemma-2-2b.json",
    "gemma3_text/gemma-3-1b-pt.json",
    "gpt2/gpt2.json",
    "bert/bert-base-uncased.json",
    "roberta/roberta-base.json",
    "xlm-roberta/xlm-roberta-base.json",
    "vit/vit-base-patch16-224-in21k.json",
    "siglip/siglip-base-patch16-224.json",
    "phi3/phi-4.json",
    "gpt_neox/pythia-160m.json",
    "falcon/falcon-7b.json",
    "falcon/falcon-40b.json",
    "bloom/bloom-560m.json",
    "gptj/gpt-j-6b.json",
    "phi/phi-2.json",
    "starcoder2/starcoder2-3b.json",
    "opt/opt-125m.json",
    "opt/opt-350m.json",
    "distilbert/distilbert-base-uncased.json",
    "electra/electra-small-discriminator.json",
    "electra/electra-base-discriminator.json",
    "dinov2/dinov2-base.json",
    "deberta-v2/deberta-v3-base.json",
    "t5/t5-small.json",
    "t5/flan-t5-base.json",
    "bart/bart-base.json",
    "whisper/whisper-tiny.json",
]

# Mixture-of-experts models: routing does not run on meta tensors, so these are checked against the module tree and
# the forward up to the router (graph_truth.real_moe), and the shapes after it by hand.
MOE_CASES = [
    "mixtral/Mixtral-8x7B-v0.1.json",
    "qwen2_moe/Qwen1.5-MoE-A2.7B.json",
]


def _edit(case: str, path: str, value: object) -> dict:
    config = copy.deepcopy(case_config(case))
    *parents, key = path.split(".")
    target = config
    for part in parents:
        target = target[part]
    target[key] = value
    return config


# (case, key edited, value, the node the graph must name): each breaks transformers' own model too
BROKEN = [
    ("clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json", "vision_config.num_attention_heads", 7,
     "vision_model.encoder.layers.0.self_attn.q_proj"),
    ("clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json", "text_config.hidden_size", 500,
     "text_model.encoder.layers.0.self_attn.q_proj"),
    ("llama/Llama-3.2-1B.json", "num_key_value_heads", 3, "model.layers.0.self_attn.k_proj"),
    ("bert/bert-base-uncased.json", "num_attention_heads", 10, "bert.encoder.layer.0.attention.self.query"),
    ("gpt2/gpt2.json", "n_head", 5, "transformer.h.0.attn.c_attn"),
    ("vit/vit-base-patch16-224-in21k.json", "patch_size", 448, "embeddings.patch_embeddings.projection"),
    ("opt/opt-125m.json", "num_attention_heads", 7, "model.decoder.layers.0.self_attn.q_proj"),
    ("falcon/falcon-7b.json", "num_attention_heads", 7, "transformer.h.0.self_attention.query_key_value"),
    ("distilbert/distilbert-base-uncased.json", "n_heads", 7, "distilbert.transformer.layer.0.attention.q_lin"),
    ("bart/bart-base.json", "encoder_attention_heads", 7, "encoder.layers.0.self_attn.q_proj"),
    ("mixtral/Mixtral-8x7B-v0.1.json", "num_key_value_heads", 3, "model.layers.0.self_attn.k_proj"),
]


def broken_config(case: str, path: str, value: object) -> dict:
    return _edit(case, path, value)


def broken_id(case: str, path: str, value: object) -> str:
    return f"{case}:{path}={value}"


def recorded_graph(section: str) -> dict:
    figures = json.loads(RECORDED_GRAPH.read_text()).get(section)
    assert figures, f"{RECORDED_GRAPH.name} has no {section!r} figures: rerun tests/estimator/record_graph.py"
    return figures
