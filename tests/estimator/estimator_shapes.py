"""How the truth harness shrinks a real config to a few layers and feeds it (test-only)."""

from __future__ import annotations

import torch
from estimator_configs import ATTENTION_DROPOUT_KEYS, with_layers  # noqa: F401 - their names here too


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
