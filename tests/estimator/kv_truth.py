"""The bytes transformers' own cache holds after a prefill, measured on the meta device (no weights, no memory):
the ground truth for estimator/kv_cache.py's transformers figures (test-only; needs torch and transformers).

One architecture is measured in two parts: transformers' Mamba-1 mixer (Jamba's) scans a prefill one token at a
time on a CPU, a few Python-dispatched meta ops per token and layer (80 s for Jamba at 5,000 tokens). Its cache
after ``tokens`` tokens is the sum of, each measured by transformers, never computed here:
- the Mamba layers' states after a real prefill of the whole model at two short lengths (``STATE_PROBES``), which
  must hold the same tensors (shapes and dtypes) at both, or the measurement stops: a state that grew with the
  prefill would make the short run no stand-in for the stated length;
- the attention layers' K/V after a real prefill of ``tokens`` tokens through the same config with every layer an
  attention layer (the layer at each index built from the same attention settings), which must hold, at the longer
  probe, exactly what the model's own attention layers hold there.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json

# Prefill lengths of the state measurement: past the conv window (d_conv 4), far apart enough for a growing state
# to show.
STATE_PROBES = (16, 48)
# model_type: the same config with every layer a (full) attention layer, for the per-token scanners.
ALL_ATTENTION = {
    "jamba": lambda config: {**config, "attn_layer_period": 1, "attn_layer_offset": 0},
}

# One layer's cache: (tensor name, shape, dtype) of each tensor it holds, in order.
Entry = tuple[tuple[str, tuple[int, ...], str], ...]


def _entry(layer: object) -> Entry:
    import torch

    held = [(name, getattr(layer, name, None)) for name in ("keys", "values")]
    for name in ("conv_states", "recurrent_states"):
        states = getattr(layer, name, None)
        if isinstance(states, dict):
            held += [(f"{name}[{key}]", t) for key, t in sorted(states.items())]
    return tuple((name, tuple(t.shape), str(t.dtype)) for name, t in held if isinstance(t, torch.Tensor))


def entry_bytes(entry: Entry) -> int:
    import torch

    return sum(_numel(shape) * getattr(torch, dtype.removeprefix("torch.")).itemsize for _, shape, dtype in entry)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _is_state(entry: Entry) -> bool:
    return any(name.startswith(("conv_states", "recurrent_states")) for name, _, _ in entry)


def measure_kv(config: dict, tokens: int) -> int:
    """Bytes of K/V and states in the cache transformers builds for ``config`` (bf16) after ``tokens`` tokens of
    prefill at batch 1; for an encoder-decoder, a source of ``tokens`` tokens too (Whisper: its 30 s input)."""
    if config.get("model_type") in ALL_ATTENTION and tokens > max(STATE_PROBES):
        return sum(entry_bytes(e) for e in measured_in_parts(config, tokens))
    return sum(entry_bytes(e) for e in layer_entries(config, tokens))


def measured_in_parts(config: dict, tokens: int) -> list[Entry]:
    """The cache after ``tokens`` tokens of a per-token scanner, layer by layer, in the two parts the module's
    docstring describes; AssertionError when a part cannot stand in for the stated length."""
    short, probe = (layer_entries(config, n) for n in STATE_PROBES)
    grown = [i for i, (a, b) in enumerate(zip(short, probe, strict=True)) if _is_state(b) and a != b]
    assert not grown, f"the state of layers {grown} grows with the prefill: measure the whole prefill instead"
    variant = ALL_ATTENTION[config["model_type"]](config)
    attention = [i for i, e in enumerate(probe) if not _is_state(e)]
    at_probe = layer_entries(variant, STATE_PROBES[1])
    assert [at_probe[i] for i in attention] == [probe[i] for i in attention], (
        "the all-attention config's attention layers do not cache what the model's own do")
    at_length = layer_entries(variant, tokens)
    return [at_length[i] if i in attention else probe[i] for i in range(len(probe))]


def layer_entries(config: dict, tokens: int) -> list[Entry]:
    """What each layer of transformers' cache holds after a real prefill of ``tokens`` tokens (cached per process:
    the two KV cases of a config share their probes)."""
    return list(_layer_entries(json.dumps(config, sort_keys=True), tokens))


@functools.lru_cache(maxsize=16)
def _layer_entries(config_json: str, tokens: int) -> tuple[Entry, ...]:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoModelForSpeechSeq2Seq

    config = json.loads(config_json)
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
    return tuple(_entry(layer) for layer in layers)
