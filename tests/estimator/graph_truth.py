"""The module graph transformers really builds and runs (test-only): the model built on the meta device from the
config, one forward on meta tensors at the estimate's input shape with a hook on every leaf module, and the
parameters composite modules own themselves."""

from __future__ import annotations

import torch
from estimator_truth import build

# Families whose SDPA mask reads the (all-ones) mask's values, which meta tensors cannot; their eager attention
# runs the same modules (its dropout is functional too).
EAGER = ("bart", "whisper")
# Families whose whole forward stops on meta tensors at the image-placeholder check (it reads the ids' values): their
# towers run apart, each through transformers' own code path (_towers_apart).
SPLIT = ("llava",)


def inputs_for(config: dict, cap: int = 2048) -> dict:
    """Meta input tensors at batch 1: text at min(positions, cap) tokens (RoBERTa's two reserved positions off),
    images at the config's size; read from config.json alone, so that a config the estimator refuses still runs.
    test_estimator_graph checks these are the shapes the memory estimate uses."""
    out = {}
    if config.get("model_type") == "whisper":  # 30 s of log-mel frames in, the decoder at its target length
        frames = 2 * config.get("max_source_positions", 1500)
        out["input_features"] = torch.zeros(1, config.get("num_mel_bins", 80), frames, device="meta")
        out["decoder_input_ids"] = torch.zeros(1, min(config.get("max_target_positions", 448), cap), dtype=torch.long,
                                               device="meta")
        return out
    text = config.get("text_config") or config
    positions = next((text[k] for k in ("max_position_embeddings", "n_positions") if k in text), None)
    if config.get("model_type") == "siglip" and not positions:
        positions = 64  # SiglipTextConfig's default
    if config.get("model_type") in ("bloom", "falcon") and not positions:
        positions = 2048  # no position limit (ALiBi, or rotary without one): the memory estimate's default length
    if positions and config.get("model_type") not in ("vit", "clip_vision_model"):
        reserved = 2 if config.get("model_type") in ("roberta", "xlm-roberta") else 0
        out["input_ids"] = torch.zeros(1, min(positions, cap, positions - reserved), dtype=torch.long,
                                       device="meta")
    if config.get("model_type") == "deberta-v2" and "input_ids" in out:  # its padding check reads the ids without one
        out["attention_mask"] = torch.ones_like(out["input_ids"])
    if config.get("is_encoder_decoder") and "input_ids" in out:  # T5, BART: the decoder at the same length
        out["decoder_input_ids"] = torch.zeros_like(out["input_ids"])
    vision = config.get("vision_config") or config
    if "image_size" in vision or "patch_size" in vision:
        side, channels = vision.get("image_size", 224), vision.get("num_channels", 3)
        out["pixel_values"] = torch.zeros(1, channels, side, side, device="meta")
    return out


def real_graph(config: dict) -> dict:
    """{"calls": [[name, class, output shape without batch], ...] in the order the forward runs them,
    "parameters": {name: shape} of parameters owned by modules that also have children}."""
    model = build(config, torch.device("meta"))
    if config.get("model_type") in EAGER:
        model.set_attn_implementation("eager")
    calls: list[list] = []

    def hook(name):
        def record(module, args, output):
            tensor = output[0] if isinstance(output, (tuple, list)) else output
            calls.append([name, type(module).__name__, list(tensor.shape[1:])])
        return record

    for name, module in model.named_modules():
        if not list(module.children()):
            module.register_forward_hook(hook(name))
    with torch.no_grad():
        if config.get("model_type") in SPLIT:
            _towers_apart(model, config)
        else:
            model(**inputs_for(config))
    parameters = {}
    for name, module in model.named_modules():
        if list(module.children()):
            for pname, p in module.named_parameters(recurse=False):
                parameters[f"{name}.{pname}" if name else pname] = list(p.shape)
    return {"calls": calls, "parameters": parameters}


def _towers_apart(model, config: dict) -> None:
    """LLaVA's towers as its forward runs them, apart: the image features through ``get_image_features`` (the vision
    tower, the hidden layer and strategy the config selects, the projector), then the language model and its head on
    the ids alone (no pixels, so no placeholder to fill)."""
    inputs = inputs_for(config)
    base = model.model if hasattr(model, "model") else model
    base.get_image_features(pixel_values=inputs["pixel_values"],
                            vision_feature_layer=model.config.vision_feature_layer,
                            vision_feature_select_strategy=model.config.vision_feature_select_strategy)
    model(input_ids=inputs["input_ids"])


def real_moe(config: dict) -> dict:
    """What can be read from transformers for a mixture-of-experts model, whose routing does not run on meta
    tensors: {"leaves": sorted [name, class] of every leaf module, "parameters": as real_graph's, "calls": the
    forward's calls up to the router, where it stops}."""
    model = build(config, torch.device("meta"))
    calls: list[list] = []

    def hook(name):
        def record(module, args, output):
            tensor = output[0] if isinstance(output, (tuple, list)) else output
            calls.append([name, type(module).__name__, list(tensor.shape[1:])])
        return record

    leaves = sorted([name, type(m).__name__] for name, m in model.named_modules() if not list(m.children()))
    for name, module in model.named_modules():
        if not list(module.children()):
            module.register_forward_hook(hook(name))
    try:
        with torch.no_grad():
            model(**inputs_for(config))
    except (RuntimeError, NotImplementedError):  # the experts' data-dependent dispatch
        pass
    else:
        raise AssertionError("the MoE forward ran on meta tensors: check it with real_graph instead")
    parameters = {}
    for name, module in model.named_modules():
        if list(module.children()):
            for pname, p in module.named_parameters(recurse=False):
                parameters[f"{name}.{pname}" if name else pname] = list(p.shape)
    return {"leaves": leaves, "parameters": parameters, "calls": calls}


def real_failure(config: dict) -> str | None:
    """What transformers says when it builds and runs this config at batch 1 (None: it goes through)."""
    try:
        real_graph(config)
    except Exception as err:  # noqa: BLE001 - any refusal counts; its message is what is recorded
        return f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
    return None
