"""The bytes transformers' own cache holds after a prefill, measured on the meta device (no weights, no memory):
the ground truth for estimator/kv_cache.py's transformers figures (test-only; needs torch and transformers)."""

from __future__ import annotations

import contextlib
import io


def _nbytes(t: object) -> int:
    import torch

    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


def _layer_bytes(layer: object) -> int:
    total = _nbytes(getattr(layer, "keys", None)) + _nbytes(getattr(layer, "values", None))
    for name in ("conv_states", "recurrent_states"):
        states = getattr(layer, name, None)
        if isinstance(states, dict):
            total += sum(_nbytes(t) for t in states.values())
    return total


def measure_kv(config: dict, tokens: int) -> int:
    """Bytes of K/V and states in the cache transformers builds for ``config`` (bf16) after ``tokens`` tokens of
    prefill at batch 1; for an encoder-decoder, a source of ``tokens`` tokens too (Whisper: its 30 s input)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoModelForSpeechSeq2Seq

    if isinstance(config.get("text_config"), dict) and not config.get("is_encoder_decoder"):
        # a multimodal checkpoint: the language model's cache (the vision tower keeps none)
        config = {**config["text_config"], "model_type": config["text_config"].get("model_type", "llama")}
    cfg = AutoConfig.for_model(**{k: v for k, v in config.items() if k not in ("auto_map", "quantization_config")})
    seq2seq = bool(getattr(cfg, "is_encoder_decoder", False))
    whisper = cfg.model_type == "whisper"
    auto = AutoModelForSpeechSeq2Seq if whisper else AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM
    with torch.device("meta"), contextlib.redirect_stderr(io.StringIO()):
        model = auto.from_config(cfg, dtype=torch.bfloat16, attn_implementation="eager")
        ids = torch.zeros((1, tokens), dtype=torch.long, device="meta")
        kwargs: dict = {"input_ids": ids}
        if whisper:
            frames = 2 * cfg.max_source_positions
            kwargs = {"input_features": torch.zeros((1, cfg.num_mel_bins, frames), dtype=torch.bfloat16, device="meta")}
        if seq2seq:
            kwargs["decoder_input_ids"] = ids
        with torch.no_grad():
            cache = model(**kwargs, use_cache=True).past_key_values
    if seq2seq:
        layers = [*cache.self_attention_cache.layers, *cache.cross_attention_cache.layers]
    else:
        layers = cache.layers
    return sum(_layer_bytes(layer) for layer in layers)
