"""The estimator's fixture configs (tests/fixtures/estimator/configs) and the figures recorded from transformers
for them: what the default tests compare the estimator with, without torch (test-only)."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "estimator" / "configs"
# Written by tests/estimator/record_truth.py from transformers, torch and PEFT (the `groundtruth` extra).
RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "estimator" / "recorded_truth.json"
ATTENTION_DROPOUT_KEYS = ("attention_dropout", "attention_probs_dropout_prob", "attn_pdrop")
# Fixture configs the memory estimate refuses, with the key its message names: their module graph is still checked
# (tests/estimator/test_estimator_graph.py), their parameters and memory are not.
REFUSED = {"dinov2/dinov2-giant.json": "use_swiglu_ffn"}  # DINOv2's SwiGLU MLP is not in the parameter ledger
STANDALONE = {"text_config": ("clip_text_model", "CLIPTextModel"),
              "vision_config": ("clip_vision_model", "CLIPVisionModel")}


def load_config(relpath: str) -> dict:
    """Read one fixture config.json as a plain dict."""
    return json.loads((FIXTURES / relpath).read_text())


def case_config(case: str) -> dict:
    """A fixture config by path; ``path#text_config`` or ``path#vision_config`` is that CLIP sub-config standing
    alone, as a CLIPTextModel or CLIPVisionModel checkpoint's config.json is."""
    path, _, sub = case.partition("#")
    config = load_config(path)
    if not sub:
        return config
    model_type, arch = STANDALONE[sub]
    return {**config[sub], "model_type": model_type, "architectures": [arch]}


def with_layers(config: dict, layers: int) -> dict:
    """A copy of ``config`` with every stack cut to ``layers`` layers, widths untouched.

    Attention-probability dropout is set to 0: on a GPU, SDPA applies it inside the fused kernel without
    storing the score matrix, which the CPU kernel cannot do (it falls back to the math path).
    """
    cfg = copy.deepcopy(config)
    for sub in [cfg, cfg.get("text_config"), cfg.get("vision_config")]:
        if not isinstance(sub, dict):
            continue
        for key in ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "num_decoder_layers",
                    "encoder_layers", "decoder_layers"):
            if key in sub or (sub is not cfg and key == "num_hidden_layers"):
                sub[key] = layers
        for key in ATTENTION_DROPOUT_KEYS:
            if key in sub:
                sub[key] = 0.0
        if "layer_types" in sub:
            sub["layer_types"] = sub["layer_types"][:layers]
    return cfg


def recorded(section: str) -> dict:
    """One section of the recorded ground truth; a missing or empty one fails (never a test of nothing)."""
    figures = _recorded().get(section)
    assert figures, f"{RECORDED.name} has no {section!r} figures: rerun tests/estimator/record_truth.py"
    return figures


@functools.cache
def _recorded() -> dict:
    return json.loads(RECORDED.read_text())
