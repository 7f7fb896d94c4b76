"""Graph builders per family: model_type -> function(Dims, seq_len_cap) -> (towers, notes).

Module paths, classes and call order are transformers' own (checked against its models on the meta device).
"""

from __future__ import annotations

from collections.abc import Callable

from .families.vision import CLIP_TEXT, CLIP_VISION, SIGLIP_TEXT, SIGLIP_VISION
from .graph_nodes import PARAMETER, Dims, Tower, activation, heads_divide, mul, patch_embedding

LISTED_LAYERS = 1000  # past this many layers a tower lists the first ones only (no real model comes near)
DECODERS = {"llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2", "qwen3": "Qwen3", "gemma": "Gemma",
            "gemma2": "Gemma2", "gemma3_text": "Gemma3", "phi3": "Phi3"}
Built = tuple[list[Tower], list[str]]


def _arch(d: Dims) -> str:
    archs = d.data.get("architectures")
    return archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else ""


def _is_base(arch: str) -> bool:
    return not arch or arch.endswith("Model") and not arch.endswith("LMHeadModel")


def _listed(tower: Tower, layers: int | None, notes: list[str]) -> range:
    """The layers a tower lists: every one, or the first LISTED_LAYERS with a note."""
    if layers is None:
        return range(0)
    if layers > LISTED_LAYERS:
        notes.append(f"{tower.name}: {layers:,} layers; the graph lists the first {LISTED_LAYERS:,}")
        return range(LISTED_LAYERS)
    return range(layers)


def _seq(d: Dims, tower: Tower, node: str, key: str, cap: int, default: int | None = None) -> int | None:
    positions = d.int(key, default=default)
    if positions is None:
        d.require(tower, node, key, defaults={key: default})
        return None
    return min(positions, cap)


# ---- CLIP --------------------------------------------------------------------------------------------------

def _clip_layers(t: Tower, d: Dims, root: str, tokens: int | None, h: int | None, notes: list[str]) -> None:
    inter, heads = d.int("intermediate_size"), d.int("num_attention_heads")
    layers = d.int("num_hidden_layers")
    t.layers = layers
    d.require(t, f"{root}encoder.layers", "num_hidden_layers")
    act = activation(d.str("hidden_act", "quick_gelu"))
    for i in _listed(t, layers, notes):
        p = f"{root}encoder.layers.{i}."
        t.add(p + "layer_norm1", "LayerNorm", (tokens, h), i)
        if i == 0 and d.require(t, p + "self_attn.q_proj", "num_attention_heads"):
            heads_divide(t, p + "self_attn.q_proj", h, heads)
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            t.add(p + f"self_attn.{proj}", "Linear", (tokens, h), i)
        t.add(p + "layer_norm2", "LayerNorm", (tokens, h), i)
        if i == 0:
            d.require(t, p + "mlp.fc1", "intermediate_size")
        t.add(p + "mlp.fc1", "Linear", (tokens, inter), i)
        t.add(p + "mlp.activation_fn", act, (tokens, inter), i)
        t.add(p + "mlp.fc2", "Linear", (tokens, h), i)


def _clip_vision(d: Dims, root: str, projection: str | None, proj_dim: int | None, notes: list[str]) -> Tower:
    h, channels = d.int("hidden_size"), d.int("num_channels")
    image, patch = d.int("image_size"), d.int("patch_size")
    t = Tower("vision", "pixel_values", (channels, image, image))
    node = f"{root}embeddings.patch_embedding"
    tokens = patch_embedding(d, t, node, h, image, patch, 1)
    t.add(f"{root}embeddings.class_embedding", PARAMETER, (h,))
    t.add(f"{root}embeddings.position_embedding", "Embedding", (tokens, h))
    t.add(f"{root}pre_layrnorm", "LayerNorm", (tokens, h))
    _clip_layers(t, d, root, tokens, h, notes)
    t.add(f"{root}post_layernorm", "LayerNorm", (h,))  # on the class token
    if projection:
        t.add(projection, "Linear", (proj_dim,))
    return t


def _clip_text(d: Dims, cap: int, root: str, projection: str | None, proj_dim: int | None,
               notes: list[str]) -> Tower:
    h = d.int("hidden_size")
    t = Tower("text", "input_ids", ())
    node = f"{root}embeddings.token_embedding"
    seq = _seq(d, t, node, "max_position_embeddings", cap)
    t.input_shape = (seq,)
    d.require(t, node, "vocab_size", "hidden_size")
    t.add(node, "Embedding", (seq, h))
    t.add(f"{root}embeddings.position_embedding", "Embedding", (seq, h))
    _clip_layers(t, d, root, seq, h, notes)
    t.add(f"{root}final_layer_norm", "LayerNorm", (seq, h))
    if projection:
        t.add(projection, "Linear", (proj_dim,))  # on the end-of-text token
    return t


def clip(d: Dims, cap: int) -> Built:
    notes: list[str] = []
    dim = d.int("projection_dim", default=512)
    if dim is None:
        dim_issue = d.problem("projection_dim", 512)
    vision = _clip_vision(d.sub("vision_config", CLIP_VISION), "vision_model.", "visual_projection", dim, notes)
    text = _clip_text(d.sub("text_config", CLIP_TEXT), cap, "text_model.", "text_projection", dim, notes)
    if dim is None:
        vision.fail("visual_projection", dim_issue or "projection_dim is not a positive integer")
        text.fail("text_projection", dim_issue or "projection_dim is not a positive integer")
    similarity = Tower("similarity", "image_embeds, text_embeds", (dim,), None)
    similarity.add("logit_scale", PARAMETER, ())
    return [vision, text, similarity], notes


def clip_text_model(d: Dims, cap: int) -> Built:
    notes: list[str] = []
    d = Dims(d.data, d.path, CLIP_TEXT)
    projected = _arch(d).endswith("WithProjection")
    dim = d.int("projection_dim", default=512)
    root = "text_model." if projected else ""  # CLIPTextModel is the transformer itself
    return [_clip_text(d, cap, root, "text_projection" if projected else None, dim, notes)], notes


def clip_vision_model(d: Dims, cap: int) -> Built:
    notes: list[str] = []
    d = Dims(d.data, d.path, CLIP_VISION)
    projected = _arch(d).endswith("WithProjection")
    dim = d.int("projection_dim", default=512)
    root = "vision_model." if projected else ""
    return [_clip_vision(d, root, "visual_projection" if projected else None, dim, notes)], notes


def _siglip_vision(d: Dims, notes: list[str]) -> Tower:
    """SigLIP's vision tower: no class token and no pre-norm; the attention-pooling head (a probe, torch's
    MultiheadAttention, a LayerNorm and an MLP) on the patches."""
    root = "vision_model."
    h, channels, inter = d.int("hidden_size"), d.int("num_channels"), d.int("intermediate_size")
    image, patch = d.int("image_size"), d.int("patch_size")
    t = Tower("vision", "pixel_values", (channels, image, image))
    node = f"{root}embeddings.patch_embedding"
    tokens = patch_embedding(d, t, node, h, image, patch, 0)
    t.add(f"{root}embeddings.position_embedding", "Embedding", (tokens, h))
    _clip_layers(t, d, root, tokens, h, notes)
    t.add(f"{root}post_layernorm", "LayerNorm", (tokens, h))
    if d.bool("vision_use_head", True):
        heads = d.int("num_attention_heads")
        if heads and h and h % heads:
            t.fail(f"{root}head.attention", f"{heads} attention heads do not divide the hidden size {h}")
        t.add(f"{root}head.probe", PARAMETER, (1, 1, h))
        t.add(f"{root}head.attention.in_proj_weight", PARAMETER, (mul(3, h), h))
        t.add(f"{root}head.attention.in_proj_bias", PARAMETER, (mul(3, h),))
        t.add(f"{root}head.layernorm", "LayerNorm", (1, h))
        t.add(f"{root}head.mlp.fc1", "Linear", (1, inter))
        t.add(f"{root}head.mlp.activation_fn", activation(d.str("hidden_act", "gelu_pytorch_tanh")), (1, inter))
        t.add(f"{root}head.mlp.fc2", "Linear", (1, h))
    return t


def siglip(d: Dims, cap: int) -> Built:
    notes: list[str] = []
    vision = _siglip_vision(d.sub("vision_config", SIGLIP_VISION), notes)
    td = d.sub("text_config", SIGLIP_TEXT)
    text = _clip_text(td, cap, "text_model.", None, None, notes)
    text.add("text_model.head", "Linear", (td.int("projection_size", default=td.int("hidden_size")),))
    similarity = Tower("similarity", "image_embeds, text_embeds", text.nodes[-1].output_shape, None)
    similarity.add("logit_scale", PARAMETER, (1,))
    similarity.add("logit_bias", PARAMETER, (1,))
    return [vision, text, similarity], notes


# ---- ViT ---------------------------------------------------------------------------------------------------

def vit(d: Dims, cap: int) -> Built:
    notes: list[str] = []
    arch = _arch(d)
    classify = arch.endswith("ForImageClassification")
    if not classify and not _is_base(arch):
        notes.append(f"the head of {arch} is not modelled: the graph is the base model's")
    root = "vit." if classify else ""
    h, channels = d.int("hidden_size"), d.int("num_channels", default=3)
    image, patch = d.int("image_size", default=224), d.int("patch_size", default=16)
    inter, heads, layers = d.int("intermediate_size"), d.int("num_attention_heads"), d.int("num_hidden_layers")
    t = Tower("vision", "pixel_values", (channels, image, image), layers)
    node = f"{root}embeddings.patch_embeddings.projection"
    tokens = patch_embedding(d, t, node, h, image, patch, 1,
                             defaults={"num_channels": 3, "image_size": 224, "patch_size": 16})
    t.add(f"{root}embeddings.cls_token", PARAMETER, (1, 1, h))
    t.add(f"{root}embeddings.position_embeddings", PARAMETER, (1, tokens, h))
    t.add(f"{root}embeddings.dropout", "Dropout", (tokens, h))
    d.require(t, f"{root}layers", "num_hidden_layers")
    act = activation(d.str("hidden_act", "gelu"))
    for i in _listed(t, layers, notes):
        p = f"{root}layers.{i}."
        t.add(p + "layernorm_before", "LayerNorm", (tokens, h), i)
        if i == 0 and d.require(t, p + "attention.q_proj", "num_attention_heads"):
            heads_divide(t, p + "attention.q_proj", h, heads)
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            t.add(p + f"attention.{proj}", "Linear", (tokens, h), i)
        t.add(p + "dropout", "Dropout", (tokens, h), i)
        t.add(p + "layernorm_after", "LayerNorm", (tokens, h), i)
        if i == 0:
            d.require(t, p + "mlp.fc1", "intermediate_size")
        t.add(p + "mlp.fc1", "Linear", (tokens, inter), i)
        t.add(p + "mlp.activation_fn", act, (tokens, inter), i)
        t.add(p + "mlp.fc2", "Linear", (tokens, h), i)
        t.add(p + "dropout", "Dropout", (tokens, h), i)
    t.add(f"{root}layernorm", "LayerNorm", (tokens, h))
    if classify:
        t.add("classifier", "Linear", (_labels(d),))
    elif d.bool("add_pooling_layer", True):
        t.add("pooler.dense", "Linear", (d.int("pooler_output_size", default=h),))
        t.add("pooler.activation", activation(d.str("pooler_act", "tanh")), (d.int("pooler_output_size", default=h),))
    return [t], notes


def _labels(d: Dims) -> int | None:
    labels = d.data.get("id2label")
    if isinstance(labels, dict) and labels:
        return len(labels)
    return d.int("num_labels", default=2)


# ---- decoder-only language models ----------------------------------------------------------------------------

def _decoder(d: Dims, cap: int, family: str) -> Built:
    notes: list[str] = []
    cls = DECODERS[family]
    arch = _arch(d)
    causal = arch.endswith("ForCausalLM")
    if not causal and not _is_base(arch):
        notes.append(f"the head of {arch} is not modelled: the graph is the base model's")
    root = "" if _is_base(arch) else "model."
    h, vocab, inter = d.int("hidden_size"), d.int("vocab_size"), d.int("intermediate_size")
    heads, layers = d.int("num_attention_heads"), d.int("num_hidden_layers")
    kv = d.int("num_key_value_heads", default=heads)
    hd = d.int("head_dim") or (h // heads if h and heads else None)
    gemma = family.startswith("gemma")
    t = Tower("text", "input_ids", (), layers)
    node = f"{root}embed_tokens"
    seq = _seq(d, t, node, "max_position_embeddings", cap)
    t.input_shape = (seq,)
    d.require(t, node, "vocab_size", "hidden_size")
    t.add(node, f"{cls}TextScaledWordEmbedding" if gemma else "Embedding", (seq, h))
    d.require(t, f"{root}rotary_emb", "num_attention_heads")
    if d.data.get("head_dim") is not None:
        d.require(t, f"{root}rotary_emb", "head_dim")
    for _ in range(2 if family == "gemma3_text" else 1):  # Gemma 3: one call for global layers, one for local
        t.add(f"{root}rotary_emb", f"{cls}RotaryEmbedding", (seq, _rotary_dim(d, hd)))
    d.require(t, f"{root}layers", "num_hidden_layers")
    norm = f"{cls}RMSNorm"
    act = activation(d.str("hidden_activation", "gelu_pytorch_tanh") if gemma else d.str("hidden_act", "silu"))
    for i in _listed(t, layers, notes):
        p = f"{root}layers.{i}."
        t.add(p + "input_layernorm", norm, (seq, h), i)
        if family == "phi3":
            _phi3_layer(t, d, p, i, seq, h, heads, kv, hd, inter, norm, act)
            continue
        t.add(p + "self_attn.q_proj", "Linear", (seq, mul(heads, hd)), i)
        if family == "qwen3":
            t.add(p + "self_attn.q_norm", norm, (seq, heads, hd), i)
        if i == 0:
            if d.require(t, p + "self_attn.k_proj", "num_key_value_heads", defaults={"num_key_value_heads": heads}) \
                    and heads and kv and heads % kv:
                t.fail(p + "self_attn.k_proj", f"num_key_value_heads={kv} does not divide "
                                                f"num_attention_heads={heads}: k and v cannot be shared by the heads")
        t.add(p + "self_attn.k_proj", "Linear", (seq, mul(kv, hd)), i)
        if family == "qwen3":
            t.add(p + "self_attn.k_norm", norm, (seq, kv, hd), i)
        t.add(p + "self_attn.v_proj", "Linear", (seq, mul(kv, hd)), i)
        if family == "gemma3_text":  # normed per head after the heads are split out: (heads, tokens, head_dim)
            t.add(p + "self_attn.q_norm", norm, (heads, seq, hd), i)
            t.add(p + "self_attn.k_norm", norm, (kv, seq, hd), i)
        t.add(p + "self_attn.o_proj", "Linear", (seq, h), i)
        t.add(p + "post_attention_layernorm", norm, (seq, h), i)
        if family in ("gemma2", "gemma3_text"):
            t.add(p + "pre_feedforward_layernorm", norm, (seq, h), i)
        if i == 0:
            d.require(t, p + "mlp.gate_proj", "intermediate_size")
        t.add(p + "mlp.gate_proj", "Linear", (seq, inter), i)
        t.add(p + "mlp.act_fn", act, (seq, inter), i)
        t.add(p + "mlp.up_proj", "Linear", (seq, inter), i)
        t.add(p + "mlp.down_proj", "Linear", (seq, h), i)
        if family in ("gemma2", "gemma3_text"):
            t.add(p + "post_feedforward_layernorm", norm, (seq, h), i)
    t.add(f"{root}norm", norm, (seq, h))
    if causal:
        t.add("lm_head", "Linear", (seq, vocab))
    return [t], notes


def _phi3_layer(t: Tower, d: Dims, p: str, i: int, seq: int | None, h: int | None, heads: int | None,
                kv: int | None, hd: int | None, inter: int | None, norm: str, act: str) -> None:
    """Phi-3's layer: q, k and v fused in one projection, gate and up in another, a dropout after each residual
    branch (the input norm is the caller's)."""
    if i == 0 and heads and kv and heads % kv:
        t.fail(p + "self_attn.qkv_proj", f"num_key_value_heads={kv} does not divide num_attention_heads={heads}")
    qkv = mul(hd, heads + 2 * kv) if heads and kv else None
    t.add(p + "self_attn.qkv_proj", "Linear", (seq, qkv), i)
    t.add(p + "self_attn.o_proj", "Linear", (seq, h), i)
    t.add(p + "resid_attn_dropout", "Dropout", (seq, h), i)
    t.add(p + "post_attention_layernorm", norm, (seq, h), i)
    if i == 0:
        d.require(t, p + "mlp.gate_up_proj", "intermediate_size")
    t.add(p + "mlp.gate_up_proj", "Linear", (seq, mul(2, inter)), i)
    t.add(p + "mlp.activation_fn", act, (seq, inter), i)
    t.add(p + "mlp.down_proj", "Linear", (seq, h), i)
    t.add(p + "resid_mlp_dropout", "Dropout", (seq, h), i)


def _rotary_dim(d: Dims, head_dim: int | None) -> int | None:
    factor = d.raw("partial_rotary_factor", 1.0)
    if head_dim is None or isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
        return head_dim  # NaN, inf or out of range: transformers would fail on it; the graph keeps the full width
    return int(head_dim * factor)


def _decoder_family(family: str) -> Callable[[Dims, int], Built]:
    return lambda d, cap: _decoder(d, cap, family)


def gpt2(d: Dims, cap: int) -> Built:
    notes: list[str] = []
    arch = _arch(d)
    causal = arch.endswith("LMHeadModel")
    if not causal and not _is_base(arch):
        notes.append(f"the head of {arch} is not modelled: the graph is the base model's")
    root = "transformer." if not _is_base(arch) else ""
    h, vocab = d.int("n_embd", "hidden_size"), d.int("vocab_size")
    heads, layers = d.int("n_head", "num_attention_heads"), d.int("n_layer", "num_hidden_layers")
    inner = d.int("n_inner", default=mul(4, h))
    t = Tower("text", "input_ids", (), layers)
    seq = _seq(d, t, f"{root}wte", "n_positions", cap)
    t.input_shape = (seq,)
    d.require(t, f"{root}wte", "vocab_size", "n_embd")
    t.add(f"{root}wte", "Embedding", (seq, h))
    t.add(f"{root}wpe", "Embedding", (seq, h))
    t.add(f"{root}drop", "Dropout", (seq, h))
    d.require(t, f"{root}h", "n_layer")
    act = activation(d.str("activation_function", "gelu_new"))
    for i in _listed(t, layers, notes):
        p = f"{root}h.{i}."
        t.add(p + "ln_1", "LayerNorm", (seq, h), i)
        if i == 0 and d.require(t, p + "attn.c_attn", "n_head"):
            heads_divide(t, p + "attn.c_attn", h, heads, "n_embd")
        t.add(p + "attn.c_attn", "Conv1D", (seq, mul(3, h)), i)
        t.add(p + "attn.c_proj", "Conv1D", (seq, h), i)
        t.add(p + "attn.resid_dropout", "Dropout", (seq, h), i)
        t.add(p + "ln_2", "LayerNorm", (seq, h), i)
        t.add(p + "mlp.c_fc", "Conv1D", (seq, inner), i)
        t.add(p + "mlp.act", act, (seq, inner), i)
        t.add(p + "mlp.c_proj", "Conv1D", (seq, h), i)
        t.add(p + "mlp.dropout", "Dropout", (seq, h), i)
    t.add(f"{root}ln_f", "LayerNorm", (seq, h))
    if causal:
        t.add("lm_head", "Linear", (seq, vocab))
    return [t], notes


# ---- BERT and RoBERTa --------------------------------------------------------------------------------------

def _bert(d: Dims, cap: int, style: str) -> Built:
    notes: list[str] = []
    arch = _arch(d)
    masked = arch.endswith("ForMaskedLM")
    if not masked and not _is_base(arch):
        notes.append(f"the head of {arch} is not modelled: the graph is the base model's")
    root = "" if _is_base(arch) else f"{style}."
    h, vocab = d.int("hidden_size"), d.int("vocab_size")
    layers = d.int("num_hidden_layers")
    t = Tower("text", "input_ids", (), layers)
    e = f"{root}embeddings."
    seq = _seq(d, t, e + "word_embeddings", "max_position_embeddings", cap)
    if style == "roberta" and seq is not None:
        seq = min(seq, d.int("max_position_embeddings") - 2)  # type: ignore[operator]
    t.input_shape = (seq,)
    d.require(t, e + "word_embeddings", "vocab_size", "hidden_size")
    t.add(e + "word_embeddings", "Embedding", (seq, h))
    t.add(e + "token_type_embeddings", "Embedding", (seq, h))
    t.add(e + "position_embeddings", "Embedding", (seq, h))
    t.add(e + "LayerNorm", "LayerNorm", (seq, h))
    t.add(e + "dropout", "Dropout", (seq, h))
    act = _bert_layers(t, d, root, seq, h, notes)
    if masked and style == "bert":
        t.add("cls.predictions.transform.dense", "Linear", (seq, h))
        t.add("cls.predictions.transform.transform_act_fn", act, (seq, h))
        t.add("cls.predictions.transform.LayerNorm", "LayerNorm", (seq, h))
        t.add("cls.predictions.decoder", "Linear", (seq, vocab))
        t.add("cls.predictions.bias", PARAMETER, (vocab,))
    elif masked:
        t.add("lm_head.dense", "Linear", (seq, h))
        t.add("lm_head.layer_norm", "LayerNorm", (seq, h))
        t.add("lm_head.decoder", "Linear", (seq, vocab))
        t.add("lm_head.bias", PARAMETER, (vocab,))
    elif _is_base(arch) and d.bool("add_pooling_layer", True):
        t.add("pooler.dense", "Linear", (h,))
        t.add("pooler.activation", "Tanh", (h,))
    return [t], notes


def _bert_layers(t: Tower, d: Dims, root: str, seq: int | None, h: int | None, notes: list[str]) -> str:
    """BERT's encoder layers (RoBERTa's, ELECTRA's too) under ``{root}encoder.layer``; returns the activation's class."""
    inter, heads = d.int("intermediate_size"), d.int("num_attention_heads")
    d.require(t, f"{root}encoder.layer", "num_hidden_layers")
    act = activation(d.str("hidden_act", "gelu"))
    for i in _listed(t, t.layers, notes):
        p = f"{root}encoder.layer.{i}."
        if i == 0 and d.require(t, p + "attention.self.query", "num_attention_heads"):
            heads_divide(t, p + "attention.self.query", h, heads)
        for proj in ("query", "key", "value"):
            t.add(p + f"attention.self.{proj}", "Linear", (seq, h), i)
        t.add(p + "attention.output.dense", "Linear", (seq, h), i)
        t.add(p + "attention.output.dropout", "Dropout", (seq, h), i)
        t.add(p + "attention.output.LayerNorm", "LayerNorm", (seq, h), i)
        if i == 0:
            d.require(t, p + "intermediate.dense", "intermediate_size")
        t.add(p + "intermediate.dense", "Linear", (seq, inter), i)
        t.add(p + "intermediate.intermediate_act_fn", act, (seq, inter), i)
        t.add(p + "output.dense", "Linear", (seq, h), i)
        t.add(p + "output.dropout", "Dropout", (seq, h), i)
        t.add(p + "output.LayerNorm", "LayerNorm", (seq, h), i)
    return act


BUILDERS: dict[str, Callable[[Dims, int], Built]] = {
    "clip": clip, "clip_text_model": clip_text_model, "siglip": siglip, "clip_vision_model": clip_vision_model, "vit": vit,
    "gpt2": gpt2, "bert": lambda d, cap: _bert(d, cap, "bert"), "roberta": lambda d, cap: _bert(d, cap, "roberta"),
    "xlm-roberta": lambda d, cap: _bert(d, cap, "roberta"),
    **{family: _decoder_family(family) for family in DECODERS},
}
