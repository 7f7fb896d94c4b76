"""The configs the module graph is checked on against transformers, and broken copies of real ones (test-only)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from estimator_configs import case_config, with_layers

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
    "falcon/falcon-rw-1b.json",
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
    "dinov2/dinov2-giant.json",
    "deberta-v2/deberta-v3-base.json",
    "t5/t5-small.json",
    "t5/flan-t5-base.json",
    "bart/bart-base.json",
    "whisper/whisper-tiny.json",
    "llava/llava-1.5-7b-hf.json",
]

# Task heads on real bases: (case, the class named in `architectures`, keys a real fine-tuned repo adds). The base's
# stacks are cut to 2 layers (the head reads the last one's output; the layers are checked whole in CASES).
NER = {"id2label": {str(i): tag for i, tag in enumerate(
    ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"])}}  # CoNLL-2003's nine tags
NLI = {"id2label": {"0": "entailment", "1": "neutral", "2": "contradiction"}}  # MNLI's three classes
_TEXT = ("ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering")
HEADS = [
    *[("llama/Llama-3.2-1B.json", "Llama" + kind, {}) for kind in _TEXT],
    *[("mistral/Mistral-7B-v0.1.json", "Mistral" + kind, {}) for kind in _TEXT],
    *[("qwen2/Qwen2.5-0.5B.json", "Qwen2" + kind, {}) for kind in _TEXT],
    *[("qwen3/Qwen3-0.6B.json", "Qwen3" + kind, {}) for kind in _TEXT],
    ("gemma/gemma-2b.json", "GemmaForSequenceClassification", {}),
    ("gemma/gemma-2b.json", "GemmaForTokenClassification", {}),
    ("gemma2/gemma-2-2b.json", "Gemma2ForSequenceClassification", {}),
    ("gemma2/gemma-2-2b.json", "Gemma2ForTokenClassification", {}),
    ("gemma3_text/gemma-3-1b-pt.json", "Gemma3TextForSequenceClassification", {}),
    ("phi3/phi-4.json", "Phi3ForSequenceClassification", {}),
    ("phi3/phi-4.json", "Phi3ForTokenClassification", {}),
    ("phi/phi-2.json", "PhiForSequenceClassification", {}),
    ("phi/phi-2.json", "PhiForTokenClassification", {}),
    ("starcoder2/starcoder2-3b.json", "Starcoder2ForSequenceClassification", {}),
    ("starcoder2/starcoder2-3b.json", "Starcoder2ForTokenClassification", {}),
    *[("gpt2/gpt2.json", "GPT2" + kind, {}) for kind in _TEXT],
    *[("gpt_neox/pythia-160m.json", "GPTNeoX" + kind, {}) for kind in _TEXT],
    *[("falcon/falcon-7b.json", "Falcon" + kind, {}) for kind in _TEXT],
    *[("bloom/bloom-560m.json", "Bloom" + kind, {}) for kind in _TEXT],
    ("gptj/gpt-j-6b.json", "GPTJForSequenceClassification", {}),
    ("gptj/gpt-j-6b.json", "GPTJForQuestionAnswering", {}),
    ("opt/opt-350m.json", "OPTForSequenceClassification", {}),  # the head reads project_out's narrower width
    ("opt/opt-125m.json", "OPTForQuestionAnswering", {}),
    ("bert/bert-base-uncased.json", "BertForSequenceClassification", NLI),
    ("bert/bert-base-uncased.json", "BertForTokenClassification", NER),
    ("bert/bert-base-uncased.json", "BertForQuestionAnswering", {}),
    ("roberta/roberta-base.json", "RobertaForSequenceClassification", NLI),
    ("roberta/roberta-base.json", "RobertaForTokenClassification", NER),
    ("roberta/roberta-base.json", "RobertaForQuestionAnswering", {}),
    *[("xlm-roberta/xlm-roberta-base.json", "XLMRoberta" + kind, {}) for kind in _TEXT],
    *[("electra/electra-small-discriminator.json", "Electra" + kind, {}) for kind in _TEXT],
    ("distilbert/distilbert-base-uncased.json", "DistilBertForSequenceClassification", {"num_labels": 5}),
    ("distilbert/distilbert-base-uncased.json", "DistilBertForTokenClassification", NER),
    ("distilbert/distilbert-base-uncased.json", "DistilBertForQuestionAnswering", {}),
    ("deberta-v2/deberta-v3-base.json", "DebertaV2ForSequenceClassification", NLI),
    ("deberta-v2/deberta-v3-base.json", "DebertaV2ForTokenClassification", {}),
    ("deberta-v2/deberta-v3-base.json", "DebertaV2ForQuestionAnswering", {}),
    ("t5/flan-t5-base.json", "T5ForTokenClassification", {}),
    ("t5/t5-small.json", "T5ForQuestionAnswering", {}),
    ("bart/bart-base.json", "BartForQuestionAnswering", {}),
    ("clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json", "CLIPForImageClassification", {"num_labels": 1000}),
    ("siglip/siglip-base-patch16-224.json", "SiglipForImageClassification", {}),
]

# Branches no real repo's config found ships, checked on a real config with that one key changed.
VARIANTS = [
    ("phi/phi-2.json", "qk_layernorm", True),  # Phi's per-head q/k LayerNorm
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


def head_config(case: str, arch: str, extra: dict) -> dict:
    return {**with_layers(case_config(case), 2), "architectures": [arch], **extra}


def head_id(case: str, arch: str) -> str:
    return f"{case}@{arch}"


def variant_config(case: str, path: str, value: object) -> dict:
    return _edit(case, path, value)


def broken_config(case: str, path: str, value: object) -> dict:
    return _edit(case, path, value)


def broken_id(case: str, path: str, value: object) -> str:
    return f"{case}:{path}={value}"


def recorded_graph(section: str) -> dict:
    figures = json.loads(RECORDED_GRAPH.read_text()).get(section)
    assert figures, f"{RECORDED_GRAPH.name} has no {section!r} figures: rerun tests/estimator/record_graph.py"
    return figures
