"""Vision transformers and the models built from them: ViT, DINOv2, CLIP, SigLIP, LLaVA."""

from __future__ import annotations

from .. import blocks
from ..errors import EstimateError
from ..reader import ConfigReader
from ..structure import Stack, Structure
from .common import architecture, plain_mlp_adapters

CLIP_TEXT = {"vocab_size": 49408, "hidden_size": 512, "intermediate_size": 2048, "num_hidden_layers": 12,
             "num_attention_heads": 8, "max_position_embeddings": 77, "hidden_act": "quick_gelu"}
CLIP_VISION = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
               "num_channels": 3, "image_size": 224, "patch_size": 32, "hidden_act": "quick_gelu"}
SIGLIP_TEXT = {"vocab_size": 32000, "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
               "num_attention_heads": 12, "max_position_embeddings": 64, "hidden_act": "gelu_pytorch_tanh"}
SIGLIP_VISION = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
                 "num_channels": 3, "image_size": 224, "patch_size": 16, "hidden_act": "gelu_pytorch_tanh"}
LLAMA_TEXT = {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
              "num_attention_heads": 32, "max_position_embeddings": 2048}


def _patches(r: ConfigReader, s: Structure, tower: str) -> tuple[int, int, int, int]:
    """(channels, image size, patch size, patch count); image and patch sizes must fit each other."""
    channels = r.int("num_channels", "channels")
    image = r.int("image_size", "image")
    patch = r.int("patch_size", "image")
    if patch > image:
        raise EstimateError(r.name("patch_size"), f"patch {patch} is larger than the image {image}")
    n = (image // patch) ** 2
    s.inputs[tower] = {"image_size": image, "patch_size": patch, "patches": n, "channels": channels}
    return channels, image, patch, n


def _vit_layers(s: Structure, r: ConfigReader, tower: str, h: int, inter: int, heads: int, layers: int,
                tokens: int, *, qkv_bias: bool = True, act: str = "gelu", layer_scale: bool = False,
                name: str = "encoder", attention: str = "self_attn", o_proj: str = "out_proj") -> None:
    """Pre-norm transformer layers (ViT, CLIP, SigLIP, DINOv2): LN, attention, LN, plain MLP; the attention
    module's name and its output projection's as transformers names them."""
    if h % heads:
        raise EstimateError(r.name("num_attention_heads"), f"{heads} heads do not divide hidden size {h}")
    for proj in ("q_proj", "k_proj", "v_proj"):
        s.linear(tower, "blocks", h, h, qkv_bias, times=layers, module=f"{attention}.{proj}")
    s.linear(tower, "blocks", h, h, True, times=layers, module=f"{attention}.{o_proj}")
    s.linear(tower, "blocks", h, inter, True, times=layers, module="mlp.fc1")
    s.linear(tower, "blocks", inter, h, True, times=layers, module="mlp.fc2")
    s.add(tower, "norms", 2 * 2 * h * layers)
    if layer_scale:
        s.add(tower, "blocks", 2 * h * layers)
    per_token = (2 * blocks.layer_norm(h) + blocks.linear_inputs(h, 3) + blocks.sdpa(h, h, heads)
                 + blocks.plain_mlp(h, inter, act)
                 + (2 * blocks.BF16 * h if layer_scale else 0))
    s.stacks.append(Stack(tower, name, layers, tokens, h, per_token))
    plain_mlp_adapters(s, tower, inter, layers, act)


def _vision_tower(s: Structure, r: ConfigReader, *, style: str) -> int:
    """A CLIP or SigLIP vision tower; returns its hidden size."""
    h = r.int("hidden_size", "width")
    inter = r.int("intermediate_size", "width")
    heads = r.int("num_attention_heads", "heads")
    layers = r.int("num_hidden_layers", "layers")
    channels, image, patch, n = _patches(r, s, "vision")
    act = r.str("hidden_act")
    if style == "clip":
        tokens = n + 1
        s.add("vision", "embeddings", h + channels * patch * patch * h + tokens * h)
        s.add("vision", "norms", 2 * h * 2)
    else:
        tokens = n
        s.add("vision", "embeddings", channels * patch * patch * h + h + tokens * h)
        s.add("vision", "norms", 2 * h)
    s.matmul("vision", channels * patch * patch * h, n)
    s.inputs["vision"]["tokens"] = tokens
    s.fixed_saved_per_sample += blocks.BF16 * channels * image * image + tokens * (blocks.layer_norm(h) * 2)
    _vit_layers(s, r, "vision", h, inter, heads, layers, tokens, act=act, name="vision encoder")
    if style == "siglip" and r.bool("vision_use_head", default=True):
        s.add("vision", "heads", h)  # the attention-pooling probe
        s.linear("vision", "heads", h, 3 * h, True, lora=False)
        s.linear("vision", "heads", h, h, True, lora=False)
        s.add("vision", "norms", 2 * h)
        s.linear("vision", "heads", h, inter, True, lora=False)
        s.linear("vision", "heads", inter, h, True, lora=False)
    return h


def _text_tower(s: Structure, r: ConfigReader, cap: int, *, style: str) -> int:
    vocab = r.int("vocab_size", "vocab")
    h = r.int("hidden_size", "width")
    inter = r.int("intermediate_size", "width")
    heads = r.int("num_attention_heads", "heads")
    layers = r.int("num_hidden_layers", "layers")
    positions = r.int("max_position_embeddings", "positions")
    tokens = min(positions, cap)
    s.inputs["text"] = {"sequence_length": tokens, "sequence_source": r.name("max_position_embeddings")}
    s.add("text", "embeddings", (vocab + positions) * h)
    s.add("text", "norms", 2 * h)
    s.fixed_saved_per_sample += (16 + blocks.layer_norm(h)) * tokens
    _vit_layers(s, r, "text", h, inter, heads, layers, tokens, act=r.str("hidden_act"), name="text encoder")
    if style == "siglip":
        s.linear("text", "heads", h, r.int("projection_size", "width", default=h), True, lora=False)
    return h


def clip(r: ConfigReader, cap: int) -> Structure:
    s = Structure("clip", architecture(r))
    ht = _text_tower(s, r.sub("text_config", CLIP_TEXT), cap, style="clip")
    hv = _vision_tower(s, r.sub("vision_config", CLIP_VISION), style="clip")
    dim = r.int("projection_dim", "width", default=512)
    s.linear("projection", "projections", hv, dim, False, lora=False)
    s.linear("projection", "projections", ht, dim, False, lora=False)
    s.add("projection", "other", 1)  # logit_scale
    return s


def clip_text_model(r: ConfigReader, cap: int) -> Structure:
    s = Structure("clip_text_model", architecture(r))
    h = _text_tower(s, ConfigReader(r.data, r.path, CLIP_TEXT), cap, style="clip")
    if s.architecture.endswith("WithProjection"):
        s.linear("projection", "projections", h, r.int("projection_dim", "width", default=512), False, lora=False)
    return s


def clip_vision_model(r: ConfigReader, cap: int) -> Structure:
    s = Structure("clip_vision_model", architecture(r))
    h = _vision_tower(s, ConfigReader(r.data, r.path, CLIP_VISION), style="clip")
    if s.architecture.endswith("WithProjection"):
        s.linear("projection", "projections", h, r.int("projection_dim", "width", default=512), False, lora=False)
    return s


def siglip(r: ConfigReader, cap: int) -> Structure:
    s = Structure("siglip", architecture(r))
    _text_tower(s, r.sub("text_config", SIGLIP_TEXT), cap, style="siglip")
    _vision_tower(s, r.sub("vision_config", SIGLIP_VISION), style="siglip")
    s.add("projection", "other", 2)  # logit_scale, logit_bias
    return s


def _vit_like(r: ConfigReader, family: str, *, dino: bool) -> Structure:
    s = Structure(family, architecture(r))
    h = r.int("hidden_size", "width")
    heads = r.int("num_attention_heads", "heads")
    layers = r.int("num_hidden_layers", "layers")
    channels, image, patch, n = _patches(r, s, "vision")
    tokens = n + 1
    s.inputs["vision"]["tokens"] = tokens
    s.add("vision", "embeddings", h + tokens * h + channels * patch * patch * h + h + (h if dino else 0))
    s.matmul("vision", channels * patch * patch * h, n)
    qkv_bias = r.bool("qkv_bias", default=True)
    if dino:
        ratio = r.number("mlp_ratio", default=4)
        inter = int(h * ratio)
        if r.bool("use_swiglu_ffn", default=False):
            raise EstimateError(r.name("use_swiglu_ffn"), "DINOv2 SwiGLU feed-forward is not modelled")
    else:
        inter = r.int("intermediate_size", "width")
    s.fixed_saved_per_sample += blocks.BF16 * channels * image * image + blocks.layer_norm(h) * tokens
    _vit_layers(s, r, "vision", h, inter, heads, layers, tokens, qkv_bias=qkv_bias, act=r.str("hidden_act",
                default="gelu"), layer_scale=dino, attention="attention", o_proj="o_proj")
    s.add("vision", "norms", 2 * h)
    arch = s.architecture
    if arch.endswith("ForImageClassification"):
        width = 2 * h if dino else h  # DINOv2 classifies on [CLS, mean of patches]
        s.linear("head", "heads", width, r.num_labels(), True, lora=False)
    elif (arch in ("ViTModel", "") and not dino) and r.bool("add_pooling_layer", default=True):
        s.linear("head", "heads", h, r.int("pooler_output_size", "width", default=h), True, lora=False)
    elif arch and not arch.endswith("Model"):
        s.warnings.append(f"head of {arch} is not modelled: the count covers the base model only")
    return s


def vit(r: ConfigReader, cap: int) -> Structure:
    return _vit_like(r, "vit", dino=False)


def dinov2(r: ConfigReader, cap: int) -> Structure:
    return _vit_like(r, "dinov2", dino=True)


def llava(r: ConfigReader, cap: int) -> Structure:
    from .decoders import BUILDERS as DECODERS

    text = r.data.get("text_config") or {}
    text_type = text.get("model_type", "llama") if isinstance(text, dict) else "llama"
    if text_type not in DECODERS:
        raise EstimateError(r.name("text_config.model_type"), f"language model {text_type!r} is not modelled")
    tr = r.sub("text_config", LLAMA_TEXT if text_type == "llama" else None)
    tr.data = {**tr.data, "architectures": ["ForCausalLM"]}
    top_tie = r.bool("tie_word_embeddings", default=False)
    if top_tie or tr.data.get("tie_word_embeddings") is None:
        tr.data["tie_word_embeddings"] = top_tie or bool(text.get("tie_word_embeddings", False))
    s = DECODERS[text_type](tr, cap)
    s.family, s.architecture = "llava", architecture(r)
    vr = r.sub("vision_config", CLIP_VISION)
    vision_type = vr.data.get("model_type", "clip_vision_model")
    if vision_type not in ("clip_vision_model", "siglip_vision_model"):
        raise EstimateError(r.name("vision_config.model_type"), f"vision tower {vision_type!r} is not modelled")
    hv = _vision_tower(s, vr, style="clip" if vision_type == "clip_vision_model" else "siglip")
    layer = r.raw("vision_feature_layer", default=-2)
    n_layers = len(layer) if isinstance(layer, list) else 1
    ht = tr.int("hidden_size", "width")
    bias = r.bool("multimodal_projector_bias", default=True)
    s.linear("projection", "projections", hv * n_layers, ht, bias, module="multi_modal_projector.linear_1")
    s.linear("projection", "projections", ht, ht, bias, module="multi_modal_projector.linear_2")
    s.notes.extend(f"default applied: {d}" for d in tr.defaulted + vr.defaulted)
    return s


BUILDERS = {"vit": vit, "dinov2": dinov2, "clip": clip, "clip_text_model": clip_text_model,
            "clip_vision_model": clip_vision_model, "siglip": siglip, "llava": llava}
