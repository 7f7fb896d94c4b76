"""Graph builders per family: model_type -> function(Dims, seq_len_cap) -> (towers, notes).

Module paths, classes and call order are transformers' own (checked against its models on the meta device).
"""

from __future__ import annotations

from collections.abc import Callable

from . import graph_heads
from .families.vision import CLIP_TEXT, CLIP_VISION, SIGLIP_TEXT, SIGLIP_VISION
from .graph_nodes import PARAMETER, Block, Dims, Tower, activation, heads_divide, mul, patch_embedding

LISTED_LAYERS = 1000  # past this many layers a tower lists the first ones only (no real model comes near)
DECODERS = {"llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2", "qwen3": "Qwen3", "gemma": "Gemma",
            "gemma2": "Gemma2", "gemma3_text": "Gemma3", "phi3": "Phi3"}
Built = tuple[list[Tower], list[str]]


_arch, _is_base, _labels = graph_heads.arch_of, graph_heads.is_base, graph_heads.labels


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
    b = Block(f"{root}encoder.layers")
    b.add("layer_norm1", "LayerNorm", (tokens, h))
    if d.require(t, b.at("self_attn.q_proj"), "num_attention_heads"):
        heads_divide(t, b.at("self_attn.q_proj"), h, heads)
    for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
        b.add(f"self_attn.{proj}", "Linear", (tokens, h))
    b.add("layer_norm2", "LayerNorm", (tokens, h))
    d.require(t, b.at("mlp.fc1"), "intermediate_size")
    b.add("mlp.fc1", "Linear", (tokens, inter))
    b.add("mlp.activation_fn", act, (tokens, inter))
    b.add("mlp.fc2", "Linear", (tokens, h))
    b.stamp(t, _listed(t, layers, notes))


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
    if graph_heads.head_of(_arch(d), "clip") == graph_heads.IMAGE:  # the vision transformer alone, classified on its patches' mean
        vision = _clip_vision(d.sub("vision_config", CLIP_VISION), "vision_model.", None, None, notes)
        graph_heads.add(vision, d, "clip", graph_heads.IMAGE, None, None)
        return [vision], notes
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
    if graph_heads.head_of(_arch(d), "siglip") == graph_heads.IMAGE:  # its pooling head runs, the classifier reads the patches
        graph_heads.add(vision, d, "siglip", graph_heads.IMAGE, None, None)
        return [vision], notes
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
    b = Block(f"{root}layers")
    b.add("layernorm_before", "LayerNorm", (tokens, h))
    if d.require(t, b.at("attention.q_proj"), "num_attention_heads"):
        heads_divide(t, b.at("attention.q_proj"), h, heads)
    for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
        b.add(f"attention.{proj}", "Linear", (tokens, h))
    b.add("dropout", "Dropout", (tokens, h))
    b.add("layernorm_after", "LayerNorm", (tokens, h))
    d.require(t, b.at("mlp.fc1"), "intermediate_size")
    b.add("mlp.fc1", "Linear", (tokens, inter))
    b.add("mlp.activation_fn", act, (tokens, inter))
    b.add("mlp.fc2", "Linear", (tokens, h))
    b.add("dropout", "Dropout", (tokens, h))
    b.stamp(t, _listed(t, layers, notes))
    t.add(f"{root}layernorm", "LayerNorm", (tokens, h))
    if classify:
        t.add("classifier", "Linear", (_labels(d),))
    elif d.bool("add_pooling_layer", True):
        t.add("pooler.dense", "Linear", (d.int("pooler_output_size", default=h),))
        t.add("pooler.activation", activation(d.str("pooler_act", "tanh")), (d.int("pooler_output_size", default=h),))
    return [t], notes


# ---- decoder-only language models ----------------------------------------------------------------------------

def _decoder(d: Dims, cap: int, family: str, root: str | None = None, head: str | None = None) -> Built:
    """A Llama-style decoder; ``root`` and ``head`` given by a model that holds it as its language model (LLaVA)."""
    cls = DECODERS[family]
    if root is None:
        root, head, notes = graph_heads.start(d, family, "model.", "ForCausalLM")
    else:
        notes = []
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
    for _ in range(_rotary_calls(d, family, layers)):  # Gemma 3: one call per kind of layer it has
        t.add(f"{root}rotary_emb", f"{cls}RotaryEmbedding", (seq, _rotary_dim(d, hd)))
    d.require(t, f"{root}layers", "num_hidden_layers")
    norm = f"{cls}RMSNorm"
    act = activation(d.str("hidden_activation", "gelu_pytorch_tanh") if gemma else d.str("hidden_act", "silu"))
    b = Block(f"{root}layers")
    b.add("input_layernorm", norm, (seq, h))
    if family == "phi3":
        _phi3_layer(b, t, d, seq, h, heads, kv, hd, inter, norm, act)
    else:
        _llama_layer(b, t, d, family, seq, h, heads, kv, hd, inter, norm, act)
    b.stamp(t, _listed(t, layers, notes))
    t.add(f"{root}norm", norm, (seq, h))
    if head == "ForCausalLM":
        t.add("lm_head", "Linear", (seq, vocab))
    graph_heads.add(t, d, family, head, seq, h)
    return [t], notes


def _llama_layer(b: Block, t: Tower, d: Dims, family: str, seq: int | None, h: int | None, heads: int | None,
                 kv: int | None, hd: int | None, inter: int | None, norm: str, act: str) -> None:
    """A Llama-style layer after its input norm: Qwen 3's q/k norms on the heads as projected, Gemma 3's on the
    heads split out, Gemma 2 and 3's norms around the MLP."""
    b.add("self_attn.q_proj", "Linear", (seq, mul(heads, hd)))
    if family == "qwen3":
        b.add("self_attn.q_norm", norm, (seq, heads, hd))
    if d.require(t, b.at("self_attn.k_proj"), "num_key_value_heads", defaults={"num_key_value_heads": heads}) \
            and heads and kv and heads % kv:
        t.fail(b.at("self_attn.k_proj"), f"num_key_value_heads={kv} does not divide "
                                         f"num_attention_heads={heads}: k and v cannot be shared by the heads")
    b.add("self_attn.k_proj", "Linear", (seq, mul(kv, hd)))
    if family == "qwen3":
        b.add("self_attn.k_norm", norm, (seq, kv, hd))
    b.add("self_attn.v_proj", "Linear", (seq, mul(kv, hd)))
    if family == "gemma3_text":  # normed per head after the heads are split out: (heads, tokens, head_dim)
        b.add("self_attn.q_norm", norm, (heads, seq, hd))
        b.add("self_attn.k_norm", norm, (kv, seq, hd))
    b.add("self_attn.o_proj", "Linear", (seq, h))
    b.add("post_attention_layernorm", norm, (seq, h))
    if family in ("gemma2", "gemma3_text"):
        b.add("pre_feedforward_layernorm", norm, (seq, h))
    d.require(t, b.at("mlp.gate_proj"), "intermediate_size")
    b.add("mlp.gate_proj", "Linear", (seq, inter))
    b.add("mlp.act_fn", act, (seq, inter))
    b.add("mlp.up_proj", "Linear", (seq, inter))
    b.add("mlp.down_proj", "Linear", (seq, h))
    if family in ("gemma2", "gemma3_text"):
        b.add("post_feedforward_layernorm", norm, (seq, h))


def _phi3_layer(b: Block, t: Tower, d: Dims, seq: int | None, h: int | None, heads: int | None, kv: int | None,
                hd: int | None, inter: int | None, norm: str, act: str) -> None:
    """Phi-3's layer after its input norm: q, k and v fused in one projection, gate and up in another, a dropout
    after each residual branch."""
    if heads and kv and heads % kv:
        t.fail(b.at("self_attn.qkv_proj"), f"num_key_value_heads={kv} does not divide num_attention_heads={heads}")
    qkv = mul(hd, heads + 2 * kv) if heads and kv else None
    b.add("self_attn.qkv_proj", "Linear", (seq, qkv))
    b.add("self_attn.o_proj", "Linear", (seq, h))
    b.add("resid_attn_dropout", "Dropout", (seq, h))
    b.add("post_attention_layernorm", norm, (seq, h))
    d.require(t, b.at("mlp.gate_up_proj"), "intermediate_size")
    b.add("mlp.gate_up_proj", "Linear", (seq, mul(2, inter)))
    b.add("mlp.activation_fn", act, (seq, inter))
    b.add("mlp.down_proj", "Linear", (seq, h))
    b.add("resid_mlp_dropout", "Dropout", (seq, h))


def _rotary_calls(d: Dims, family: str, layers: int | None) -> int:
    """Gemma 3 runs its rotary module once per kind of layer among its layers (sliding-window and full attention:
    ``layer_types``, else every ``sliding_window_pattern``-th layer full); the others once."""
    if family != "gemma3_text":
        return 1
    kinds = d.raw("layer_types")
    if isinstance(kinds, list) and kinds:
        return len({str(k) for k in kinds})
    pattern = d.int("sliding_window_pattern", default=6)
    if not layers or not pattern:
        return 1
    return len({(i + 1) % pattern == 0 for i in range(layers)})


def _rotary_dim(d: Dims, head_dim: int | None) -> int | None:
    factor = d.raw("partial_rotary_factor", 1.0)
    if head_dim is None or isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
        return head_dim  # NaN, inf or out of range: transformers would fail on it; the graph keeps the full width
    return int(head_dim * factor)


def _decoder_family(family: str) -> Callable[[Dims, int], Built]:
    return lambda d, cap: _decoder(d, cap, family)


def gpt2(d: Dims, cap: int) -> Built:
    root, head, notes = graph_heads.start(d, "gpt2", "transformer.", "LMHeadModel")
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
    b = Block(f"{root}h")
    b.add("ln_1", "LayerNorm", (seq, h))
    if d.require(t, b.at("attn.c_attn"), "n_head"):
        heads_divide(t, b.at("attn.c_attn"), h, heads, "n_embd")
    b.add("attn.c_attn", "Conv1D", (seq, mul(3, h)))
    b.add("attn.c_proj", "Conv1D", (seq, h))
    b.add("attn.resid_dropout", "Dropout", (seq, h))
    b.add("ln_2", "LayerNorm", (seq, h))
    b.add("mlp.c_fc", "Conv1D", (seq, inner))
    b.add("mlp.act", act, (seq, inner))
    b.add("mlp.c_proj", "Conv1D", (seq, h))
    b.add("mlp.dropout", "Dropout", (seq, h))
    b.stamp(t, _listed(t, layers, notes))
    t.add(f"{root}ln_f", "LayerNorm", (seq, h))
    if head == "LMHeadModel":
        t.add("lm_head", "Linear", (seq, vocab))
    graph_heads.add(t, d, "gpt2", head, seq, h)
    return [t], notes


# ---- BERT and RoBERTa --------------------------------------------------------------------------------------

def _bert(d: Dims, cap: int, style: str, family: str) -> Built:
    root, head, notes = graph_heads.start(d, family, f"{style}.", "ForMaskedLM")
    arch = _arch(d)
    masked = head == "ForMaskedLM"
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
    graph_heads.add(t, d, family, head, seq, h, root)
    return [t], notes


def _bert_layers(t: Tower, d: Dims, root: str, seq: int | None, h: int | None, notes: list[str]) -> str:
    """BERT's encoder layers (RoBERTa's, ELECTRA's too) under ``{root}encoder.layer``; returns the activation's class."""
    inter, heads = d.int("intermediate_size"), d.int("num_attention_heads")
    d.require(t, f"{root}encoder.layer", "num_hidden_layers")
    act = activation(d.str("hidden_act", "gelu"))
    b = Block(f"{root}encoder.layer")
    if d.require(t, b.at("attention.self.query"), "num_attention_heads"):
        heads_divide(t, b.at("attention.self.query"), h, heads)
    for proj in ("query", "key", "value"):
        b.add(f"attention.self.{proj}", "Linear", (seq, h))
    b.add("attention.output.dense", "Linear", (seq, h))
    b.add("attention.output.dropout", "Dropout", (seq, h))
    b.add("attention.output.LayerNorm", "LayerNorm", (seq, h))
    d.require(t, b.at("intermediate.dense"), "intermediate_size")
    b.add("intermediate.dense", "Linear", (seq, inter))
    b.add("intermediate.intermediate_act_fn", act, (seq, inter))
    b.add("output.dense", "Linear", (seq, h))
    b.add("output.dropout", "Dropout", (seq, h))
    b.add("output.LayerNorm", "LayerNorm", (seq, h))
    b.stamp(t, _listed(t, t.layers, notes))
    return act


BUILDERS: dict[str, Callable[[Dims, int], Built]] = {
    "clip": clip, "clip_text_model": clip_text_model, "siglip": siglip, "clip_vision_model": clip_vision_model, "vit": vit,
    "gpt2": gpt2, "bert": lambda d, cap: _bert(d, cap, "bert", "bert"),
    "roberta": lambda d, cap: _bert(d, cap, "roberta", "roberta"),
    "xlm-roberta": lambda d, cap: _bert(d, cap, "roberta", "xlm-roberta"),
    **{family: _decoder_family(family) for family in DECODERS},
}
