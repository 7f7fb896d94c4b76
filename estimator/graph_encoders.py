"""Graph builders for the encoders beyond BERT's own (graph_families.py has BERT, RoBERTa and ViT): DistilBERT,
ELECTRA, DINOv2. Module paths, classes and call order are transformers' own (checked against its models on the
meta device, tests/estimator/test_estimator_graph.py)."""

from __future__ import annotations

from collections.abc import Callable

from . import graph_heads
from .graph_families import Built, _bert_layers, _labels, _listed, _seq
from .graph_nodes import PARAMETER, Block, Dims, Tower, activation, heads_divide, mul, patch_embedding


def _head(d: Dims, family: str, prefix: str, modelled: str) -> tuple[str, str | None, list[str]]:
    """(module root, head, notes): a base model is the encoder itself; the builder's own head (``modelled``) or a
    task head from graph_heads' table; another head is named as not modelled."""
    return graph_heads.start(d, family, prefix, modelled)


# ---- DistilBERT ----------------------------------------------------------------------------------------------

def distilbert(d: Dims, cap: int) -> Built:
    """DistilBERT: BERT without token types or pooler, its own names (q_lin .. out_lin, lin1/lin2), post-norm."""
    root, head, notes = _head(d, "distilbert", "distilbert.", "ForMaskedLM")
    masked = head == "ForMaskedLM"
    h, vocab, inner = d.int("dim", "hidden_size"), d.int("vocab_size"), d.int("hidden_dim")
    heads, layers = d.int("n_heads", "num_attention_heads"), d.int("n_layers", "num_hidden_layers")
    t = Tower("text", "input_ids", (), layers)
    e = f"{root}embeddings."
    seq = _seq(d, t, e + "word_embeddings", "max_position_embeddings", cap)
    t.input_shape = (seq,)
    d.require(t, e + "word_embeddings", "vocab_size", "dim")
    t.add(e + "word_embeddings", "Embedding", (seq, h))
    t.add(e + "position_embeddings", "Embedding", (seq, h))
    t.add(e + "LayerNorm", "LayerNorm", (seq, h))
    t.add(e + "dropout", "Dropout", (seq, h))
    d.require(t, f"{root}transformer.layer", "n_layers")
    act = activation(d.str("activation", "gelu"))
    b = Block(f"{root}transformer.layer")
    if d.require(t, b.at("attention.q_lin"), "n_heads"):
        heads_divide(t, b.at("attention.q_lin"), h, heads, "dim")
    for proj in ("q_lin", "k_lin", "v_lin", "out_lin"):
        b.add(f"attention.{proj}", "Linear", (seq, h))
    b.add("sa_layer_norm", "LayerNorm", (seq, h))
    d.require(t, b.at("ffn.lin1"), "hidden_dim")
    b.add("ffn.lin1", "Linear", (seq, inner))
    b.add("ffn.activation", act, (seq, inner))
    b.add("ffn.lin2", "Linear", (seq, h))
    b.add("ffn.dropout", "Dropout", (seq, h))
    b.add("output_layer_norm", "LayerNorm", (seq, h))
    b.stamp(t, _listed(t, layers, notes))
    if masked:
        t.add("vocab_transform", "Linear", (seq, h))
        t.add("activation", act, (seq, h))
        t.add("vocab_layer_norm", "LayerNorm", (seq, h))
        t.add("vocab_projector", "Linear", (seq, vocab))
    graph_heads.add(t, d, "distilbert", head, seq, h)
    return [t], notes


# ---- ELECTRA -------------------------------------------------------------------------------------------------

def electra(d: Dims, cap: int) -> Built:
    """ELECTRA: BERT's layers after embeddings of their own width (projected up when narrower, as in the small
    model); the discriminator's head scores each token; no pooler."""
    root, head, notes = _head(d, "electra", "electra.", "ForPreTraining")
    discriminator = head == "ForPreTraining"
    h, layers = d.int("hidden_size"), d.int("num_hidden_layers")
    emb = d.int("embedding_size", default=h)
    t = Tower("text", "input_ids", (), layers)
    e = f"{root}embeddings."
    seq = _seq(d, t, e + "word_embeddings", "max_position_embeddings", cap)
    t.input_shape = (seq,)
    d.require(t, e + "word_embeddings", "vocab_size", "embedding_size", defaults={"embedding_size": h})
    for name in ("word_embeddings", "token_type_embeddings", "position_embeddings"):
        t.add(e + name, "Embedding", (seq, emb))
    t.add(e + "LayerNorm", "LayerNorm", (seq, emb))
    t.add(e + "dropout", "Dropout", (seq, emb))
    if emb != h:
        t.add(f"{root}embeddings_project", "Linear", (seq, h))
    act = _bert_layers(t, d, root, seq, h, notes)
    if discriminator:
        t.add("discriminator_predictions.dense", "Linear", (seq, h))
        t.add("discriminator_predictions.activation", act, (seq, h))
        t.add("discriminator_predictions.dense_prediction", "Linear", (seq, 1))
    graph_heads.add(t, d, "electra", head, seq, h)
    return [t], notes


# ---- DINOv2 --------------------------------------------------------------------------------------------------

def dinov2(d: Dims, cap: int) -> Built:
    """DINOv2: ViT's patches and class token (plus a mask token), layer scale after each branch, a drop-path
    module (Identity at rate 0), a GELU or SwiGLU MLP; the classifier reads the class token and the mean patch."""
    root, head, notes = _head(d, "dinov2", "dinov2.", "ForImageClassification")
    classify = head == "ForImageClassification"
    h, channels = d.int("hidden_size"), d.int("num_channels", default=3)
    image, patch = d.int("image_size", default=224), d.int("patch_size", default=14)
    heads, layers = d.int("num_attention_heads"), d.int("num_hidden_layers")
    t = Tower("vision", "pixel_values", (channels, image, image), layers)
    node = f"{root}embeddings.patch_embeddings.projection"
    tokens = patch_embedding(d, t, node, h, image, patch, 1,
                             defaults={"num_channels": 3, "image_size": 224, "patch_size": 14})
    t.add(f"{root}embeddings.cls_token", PARAMETER, (1, 1, h))
    t.add(f"{root}embeddings.mask_token", PARAMETER, (1, h))
    t.add(f"{root}embeddings.position_embeddings", PARAMETER, (1, tokens, h))
    t.add(f"{root}embeddings.dropout", "Dropout", (tokens, h))
    d.require(t, f"{root}encoder.layer", "num_hidden_layers")
    ratio = d.raw("mlp_ratio", 4)
    ratio = ratio if isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and ratio > 0 else None
    hidden = int(h * ratio) if h and ratio else None
    swiglu = d.bool("use_swiglu_ffn", False)
    if swiglu and hidden:
        hidden = (int(hidden * 2 / 3) + 7) // 8 * 8
    drop = "Dinov2DropPath" if d.positive("drop_path_rate") else "Identity"
    act = activation(d.str("hidden_act", "gelu"))
    b = Block(f"{root}encoder.layer")
    b.add("norm1", "LayerNorm", (tokens, h))
    if d.require(t, b.at("attention.q_proj"), "num_attention_heads"):
        heads_divide(t, b.at("attention.q_proj"), h, heads)
    for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
        b.add(f"attention.{proj}", "Linear", (tokens, h))
    b.add("layer_scale1", "Dinov2LayerScale", (tokens, h))
    b.add("drop_path", drop, (tokens, h))
    b.add("norm2", "LayerNorm", (tokens, h))
    if swiglu:  # SiLU on the gate whatever hidden_act says, times the up projection
        b.add("mlp.gate_proj", "Linear", (tokens, hidden))
        b.add("mlp.act_fn", activation("silu"), (tokens, hidden))
        b.add("mlp.up_proj", "Linear", (tokens, hidden))
        b.add("mlp.down_proj", "Linear", (tokens, h))
    else:
        b.add("mlp.fc1", "Linear", (tokens, hidden))
        b.add("mlp.activation_fn", act, (tokens, hidden))
        b.add("mlp.fc2", "Linear", (tokens, h))
    b.add("layer_scale2", "Dinov2LayerScale", (tokens, h))
    b.add("drop_path", drop, (tokens, h))
    b.stamp(t, _listed(t, layers, notes))
    t.add(f"{root}layernorm", "LayerNorm", (tokens, h))
    if classify:
        t.add("classifier", "Linear", (_labels(d),))
    return [t], notes


# ---- DeBERTa-v2 / v3 -----------------------------------------------------------------------------------------

def deberta_v2(d: Dims, cap: int) -> Built:
    """DeBERTa-v2 and v3: disentangled attention. The relative-position table is read as a weight (normed once per
    forward, no batch axis), each layer's q/k projections (or their own position projections) run again on its first
    2 x span rows, and the attention-probability dropout is a module (heads x tokens x tokens)."""
    root, head, notes = _head(d, "deberta-v2", "deberta.", ())
    h, inter = d.int("hidden_size"), d.int("intermediate_size")
    heads, layers = d.int("num_attention_heads"), d.int("num_hidden_layers")
    emb = d.int("embedding_size", default=h)
    t = Tower("text", "input_ids", (), layers)
    e = f"{root}embeddings."
    seq = _seq(d, t, e + "word_embeddings", "max_position_embeddings", cap, default=512)
    t.input_shape = (seq,)
    d.require(t, e + "word_embeddings", "vocab_size", "hidden_size")
    t.add(e + "word_embeddings", "Embedding", (seq, emb))
    if d.bool("position_biased_input", True):
        t.add(e + "position_embeddings", "Embedding", (seq, emb))
    if d.positive("type_vocab_size"):
        t.add(e + "token_type_embeddings", "Embedding", (seq, emb))
    if emb != h:
        t.add(e + "embed_proj", "Linear", (seq, h))
    t.add(e + "LayerNorm", "LayerNorm", (seq, h))
    t.add(e + "dropout", "Dropout", (seq, h))
    relative = d.bool("relative_attention", False)
    norms = str(d.raw("norm_rel_ebd", "none")).lower().split("|")
    if relative and "layer_norm" in [n.strip() for n in norms]:
        t.add(f"{root}encoder.LayerNorm", "LayerNorm", (h,))
    if d.positive("conv_kernel_size"):
        notes.append("the convolution DeBERTa-v2 adds after its first layer (conv_kernel_size) is not in the graph")
    buckets, max_rel = d.raw("position_buckets", -1), d.raw("max_relative_positions", -1)
    span = buckets if isinstance(buckets, int) and buckets > 0 else (
        max_rel if isinstance(max_rel, int) and max_rel >= 1 else d.int("max_position_embeddings", default=512))
    rows = mul(2, span)
    kinds = d.raw("pos_att_type") or []
    kinds = kinds if isinstance(kinds, (str, list)) else []
    share = d.bool("share_att_key", False)
    d.require(t, f"{root}encoder.layer", "num_hidden_layers")
    act = activation(d.str("hidden_act", "gelu"))
    b = Block(f"{root}encoder.layer")
    if d.require(t, b.at("attention.self.query_proj"), "num_attention_heads"):
        heads_divide(t, b.at("attention.self.query_proj"), h, heads)
    for proj in ("query_proj", "key_proj", "value_proj"):
        b.add(f"attention.self.{proj}", "Linear", (seq, h))
    if relative:
        b.add("attention.self.pos_dropout", "Dropout", (h,))
        if share:
            b.add("attention.self.query_proj", "Linear", (rows, h))
            b.add("attention.self.key_proj", "Linear", (rows, h))
        else:
            if "c2p" in kinds:
                b.add("attention.self.pos_key_proj", "Linear", (rows, h))
            if "p2c" in kinds:
                b.add("attention.self.pos_query_proj", "Linear", (rows, h))
    b.add("attention.self.dropout", "Dropout", (heads, seq, seq))
    for name, kind in (("dense", "Linear"), ("dropout", "Dropout"), ("LayerNorm", "LayerNorm")):
        b.add(f"attention.output.{name}", kind, (seq, h))
    d.require(t, b.at("intermediate.dense"), "intermediate_size")
    b.add("intermediate.dense", "Linear", (seq, inter))
    b.add("intermediate.intermediate_act_fn", act, (seq, inter))
    for name, kind in (("dense", "Linear"), ("dropout", "Dropout"), ("LayerNorm", "LayerNorm")):
        b.add(f"output.{name}", kind, (seq, h))
    b.stamp(t, _listed(t, layers, notes))
    graph_heads.add(t, d, "deberta-v2", head, seq, h)
    return [t], notes


BUILDERS: dict[str, Callable[[Dims, int], Built]] = {
    "distilbert": distilbert,
    "electra": electra,
    "dinov2": dinov2,
    "deberta-v2": deberta_v2,
}
