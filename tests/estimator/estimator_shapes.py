"""How the truth harness shrinks a real config to a few layers and feeds it (test-only)."""

from __future__ import annotations

import copy

import torch

ATTENTION_DROPOUT_KEYS = ("attention_dropout", "attention_probs_dropout_prob", "attn_pdrop")


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


def inputs_for(config: dict, batch: int, seq: int):
    """Model inputs (with labels, so the loss is part of the pass) for the family of ``config``."""
    mt = config["model_type"]
    arch = (config.get("architectures") or [""])[0]
    ids = torch.zeros(batch, seq, dtype=torch.long)
    if mt in ("clip", "siglip"):
        t = config.get("text_config", {})
        v = config.get("vision_config", {})
        n_text = t.get("max_position_embeddings", 77 if mt == "clip" else 64)
        size = v.get("image_size", 224)
        return dict(input_ids=torch.zeros(batch, n_text, dtype=torch.long),
                    pixel_values=torch.zeros(batch, 3, size, size), return_loss=True)
    if mt in ("vit", "dinov2"):
        size = config.get("image_size", 224)
        return dict(pixel_values=torch.zeros(batch, config.get("num_channels", 3), size, size))
    if mt == "llava":
        size = config["vision_config"].get("image_size", 224)
        return dict(input_ids=ids, pixel_values=torch.zeros(batch, 3, size, size), labels=ids)
    if mt == "whisper":
        feats = torch.zeros(batch, config.get("num_mel_bins", 80), 2 * config.get("max_source_positions", 1500))
        return dict(input_features=feats, labels=ids)
    has_head = "For" in arch or "LMHead" in arch
    if not has_head and mt == "bart":
        return dict(input_ids=ids, decoder_input_ids=ids)
    if not has_head:
        return dict(input_ids=ids)
    return dict(input_ids=ids, labels=ids)
