"""Graph builders for the encoder-decoder families: T5, BART, Whisper. Two towers, the encoder's and the
decoder's (its cross-attention reading the encoder's output), each with its layer count; the decoder runs at the
encoder's length for text (the memory estimate's shape) and at its target length for Whisper. Module paths,
classes and call order are transformers' own (checked against its models on the meta device,
tests/estimator/test_estimator_graph.py)."""

from __future__ import annotations

from collections.abc import Callable

from . import graph_heads
from .graph_families import Built, _arch, _listed, _seq
from .graph_nodes import Block, Dims, Tower, activation, heads_divide, mul


def _t5_stack(d: Dims, stack: str, seq: int | None, layers: int | None, notes: list[str], root: str = "") -> Tower:
    h, kv, heads, ff = d.int("d_model"), d.int("d_kv"), d.int("num_heads"), d.int("d_ff")
    inner = mul(heads, kv)
    parts = d.str("feed_forward_proj", "relu").split("-")
    gated = len(parts) > 1 and parts[0] == "gated"
    act = activation("gelu_new" if parts[-1] == "gelu" and gated else parts[-1])
    decoder = stack == "decoder"
    t = Tower(stack, "decoder_input_ids" if decoder else "input_ids", (seq,), layers)
    d.require(t, f"{root}{stack}.embed_tokens", "vocab_size", "d_model")
    t.add(f"{root}{stack}.embed_tokens", "Embedding", (seq, h))
    t.add(f"{root}{stack}.dropout", "Dropout", (seq, h))
    d.require(t, f"{root}{stack}.block", "num_decoder_layers" if decoder else "num_layers",
              defaults={"num_decoder_layers": d.raw("num_layers")})
    b = Block(f"{root}{stack}.block")
    b.add("layer.0.layer_norm", "T5LayerNorm", (seq, h))
    d.require(t, b.at("layer.0.SelfAttention.q"), "num_heads", "d_kv")
    for proj in ("q", "k", "v"):
        b.add(f"layer.0.SelfAttention.{proj}", "Linear", (seq, inner))
    # only the first block has the relative-position table; the others reuse its bias
    b.add("layer.0.SelfAttention.relative_attention_bias", "Embedding", (seq, heads), first=True)
    b.add("layer.0.SelfAttention.o", "Linear", (seq, h))
    b.add("layer.0.dropout", "Dropout", (seq, h))
    ff_at = 1
    if decoder:
        b.add("layer.1.layer_norm", "T5LayerNorm", (seq, h))
        for proj in ("q", "k", "v"):
            b.add(f"layer.1.EncDecAttention.{proj}", "Linear", (seq, inner))
        b.add("layer.1.EncDecAttention.o", "Linear", (seq, h))
        b.add("layer.1.dropout", "Dropout", (seq, h))
        ff_at = 2
    f = f"layer.{ff_at}."
    b.add(f + "layer_norm", "T5LayerNorm", (seq, h))
    d.require(t, b.at(f + ("DenseReluDense.wi_0" if gated else "DenseReluDense.wi")), "d_ff")
    if gated:
        b.add(f + "DenseReluDense.wi_0", "Linear", (seq, ff))
        b.add(f + "DenseReluDense.act", act, (seq, ff))
        b.add(f + "DenseReluDense.wi_1", "Linear", (seq, ff))
    else:
        b.add(f + "DenseReluDense.wi", "Linear", (seq, ff))
        b.add(f + "DenseReluDense.act", act, (seq, ff))
    b.add(f + "DenseReluDense.dropout", "Dropout", (seq, ff))
    b.add(f + "DenseReluDense.wo", "Linear", (seq, h))
    b.add(f + "dropout", "Dropout", (seq, h))
    b.stamp(t, _listed(t, layers, notes))
    t.add(f"{root}{stack}.final_layer_norm", "T5LayerNorm", (seq, h))
    t.add(f"{root}{stack}.dropout", "Dropout", (seq, h))
    return t


def t5(d: Dims, cap: int) -> Built:
    """T5 (and flan-T5's gated GELU): pre-norm RMS-style norms, relative position bias from the first block's
    table, no position embeddings; T5EncoderModel is the encoder alone, T5Model has no head."""
    notes: list[str] = []
    arch = _arch(d)
    head = graph_heads.head_of(arch, "t5")
    root = "transformer." if head == graph_heads.TOKEN else ""  # the token classifier wraps the encoder alone
    probe = Tower("encoder", "input_ids", ())
    seq = _seq(d, probe, f"{root}encoder.embed_tokens", "n_positions", cap, default=512)
    layers = d.int("num_layers")
    towers = [_t5_stack(d, "encoder", seq, layers, notes, root)]
    if probe.failure:
        towers[0].fail(**probe.failure)
    if head == graph_heads.TOKEN:
        graph_heads.add(towers[0], d, "t5", head, seq, d.int("d_model"))
    elif not arch.endswith("EncoderModel"):
        decoder = _t5_stack(d, "decoder", seq, d.int("num_decoder_layers", default=layers), notes)
        if arch.endswith("ForConditionalGeneration"):
            decoder.add("lm_head", "Linear", (seq, d.int("vocab_size")))
        elif head:
            graph_heads.add(decoder, d, "t5", head, seq, d.int("d_model"))
        elif arch and not arch.endswith("Model"):
            notes.append(f"the head of {arch} is not modelled: the graph is the base model's")
        towers.append(decoder)
    return towers, notes


# ---- BART and Whisper: one layer shape, post-norm (BART) or pre-norm (Whisper) ---------------------------------

def _layers(t: Tower, d: Dims, stack: str, seq: int | None, source: int | None, cross: bool, pre_norm: bool,
            notes: list[str]) -> None:
    """The layers of one stack under ``{stack}.layers``: self-attention, the decoder's cross-attention (its k and v
    on the encoder's ``source`` positions), and the fc1/fc2 MLP, each branch with its LayerNorm before (pre-norm)
    or after (post-norm)."""
    h = d.int("d_model")
    side = "decoder" if cross else "encoder"
    heads, ffn = d.int(f"{side}_attention_heads"), d.int(f"{side}_ffn_dim")
    d.require(t, f"{stack}.layers", f"{side}_layers")
    act = activation(d.str("activation_function", "gelu"))
    branches = [("self_attn", seq)] + ([("encoder_attn", source)] if cross else [])
    b = Block(f"{stack}.layers")
    if d.require(t, b.at("self_attn.q_proj"), f"{side}_attention_heads"):
        heads_divide(t, b.at("self_attn.q_proj"), h, heads, "d_model")
    for branch, kv_len in branches:
        if pre_norm:
            b.add(f"{branch}_layer_norm", "LayerNorm", (seq, h))
        b.add(f"{branch}.q_proj", "Linear", (seq, h))
        b.add(f"{branch}.k_proj", "Linear", (kv_len, h))
        b.add(f"{branch}.v_proj", "Linear", (kv_len, h))
        b.add(f"{branch}.out_proj", "Linear", (seq, h))
        if not pre_norm:
            b.add(f"{branch}_layer_norm", "LayerNorm", (seq, h))
    if pre_norm:
        b.add("final_layer_norm", "LayerNorm", (seq, h))
    d.require(t, b.at("fc1"), f"{side}_ffn_dim")
    b.add("fc1", "Linear", (seq, ffn))
    b.add("activation_fn", act, (seq, ffn))
    b.add("fc2", "Linear", (seq, h))
    if not pre_norm:
        b.add("final_layer_norm", "LayerNorm", (seq, h))
    b.stamp(t, _listed(t, t.layers, notes))


def bart(d: Dims, cap: int) -> Built:
    """BART: learned positions (two reserved rows), a LayerNorm on the embeddings, post-norm layers; the head of
    BartForConditionalGeneration is lm_head on the decoder."""
    notes: list[str] = []
    arch = _arch(d)
    generate = arch.endswith("ForConditionalGeneration")
    head = graph_heads.head_of(arch, "bart")
    if not generate and not head and arch and arch != "BartModel":
        notes.append(f"the head of {arch} is not modelled: the graph is the base model's")
    root = "model." if arch and arch != "BartModel" else ""
    h = d.int("d_model")
    towers = []
    probe = Tower("encoder", "input_ids", ())
    seq = _seq(d, probe, f"{root}encoder.embed_tokens", "max_position_embeddings", cap, default=1024)
    for side, name in (("encoder", "input_ids"), ("decoder", "decoder_input_ids")):
        t = Tower(side, name, (seq,), d.int(f"{side}_layers"))
        if probe.failure and side == "encoder":
            t.fail(**probe.failure)
        d.require(t, f"{root}{side}.embed_tokens", "vocab_size", "d_model")
        t.add(f"{root}{side}.embed_tokens", "BartScaledWordEmbedding", (seq, h))
        t.add(f"{root}{side}.embed_positions", "BartLearnedPositionalEmbedding", (seq, h))
        t.add(f"{root}{side}.layernorm_embedding", "LayerNorm", (seq, h))
        _layers(t, d, f"{root}{side}", seq, seq, side == "decoder", False, notes)
        towers.append(t)
    if generate:
        towers[1].add("lm_head", "Linear", (seq, d.int("vocab_size")))
    graph_heads.add(towers[1], d, "bart", head, seq, h)  # question answering reads the decoder's output
    return towers, notes


def whisper(d: Dims, cap: int) -> Built:
    """Whisper: two convolutions over 30 s of log-mel frames (the second halving them to the encoder's positions),
    fixed sinusoidal positions read whole (no batch axis), pre-norm layers; the decoder at its target length with
    cross-attention over the audio positions, and proj_out as the head."""
    notes: list[str] = []
    arch = _arch(d)
    generate = arch.endswith("ForConditionalGeneration")
    if not generate and arch and arch != "WhisperModel":
        notes.append(f"the head of {arch} is not modelled: the graph is the base model's")
    root = "model." if arch and arch != "WhisperModel" else ""
    h, mels, source = d.int("d_model"), d.int("num_mel_bins", default=80), d.int("max_source_positions", default=1500)
    frames = mul(2, source)
    enc = Tower("encoder", "input_features", (mels, frames), d.int("encoder_layers"))
    e = f"{root}encoder."
    d.require(enc, e + "conv1", "num_mel_bins", "d_model", "max_source_positions",
              defaults={"num_mel_bins": 80, "max_source_positions": 1500})
    enc.add(e + "conv1", "Conv1d", (h, frames))
    enc.add(e + "conv2", "Conv1d", (h, source))
    enc.add(e + "embed_positions", "Embedding", (h,))
    _layers(enc, d, f"{root}encoder", source, source, False, True, notes)
    enc.add(e + "layer_norm", "LayerNorm", (source, h))
    dec = Tower("decoder", "decoder_input_ids", (), d.int("decoder_layers"))
    p = f"{root}decoder."
    seq = _seq(d, dec, p + "embed_tokens", "max_target_positions", cap, default=448)
    dec.input_shape = (seq,)
    d.require(dec, p + "embed_tokens", "vocab_size", "d_model")
    dec.add(p + "embed_tokens", "Embedding", (seq, h))
    dec.add(p + "embed_positions", "WhisperPositionalEmbedding", (seq, h))
    _layers(dec, d, f"{root}decoder", seq, source, True, True, notes)
    dec.add(p + "layer_norm", "LayerNorm", (seq, h))
    if generate:
        dec.add("proj_out", "Linear", (seq, d.int("vocab_size")))
    return [enc, dec], notes


BUILDERS: dict[str, Callable[[Dims, int], Built]] = {
    "t5": t5,
    "bart": bart,
    "whisper": whisper,
}
