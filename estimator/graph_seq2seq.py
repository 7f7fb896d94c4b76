"""Graph builders for the encoder-decoder families: T5, BART, Whisper. Two towers, the encoder's and the
decoder's (its cross-attention reading the encoder's output), each with its layer count; the decoder runs at the
encoder's length for text (the memory estimate's shape) and at its target length for Whisper. Module paths,
classes and call order are transformers' own (checked against its models on the meta device,
tests/estimator/test_estimator_graph.py)."""

from __future__ import annotations

from collections.abc import Callable

from .graph_families import Built, _arch, _listed, _seq
from .graph_nodes import Dims, Tower, activation, mul


def _t5_stack(d: Dims, stack: str, seq: int | None, layers: int | None, notes: list[str]) -> Tower:
    h, kv, heads, ff = d.int("d_model"), d.int("d_kv"), d.int("num_heads"), d.int("d_ff")
    inner = mul(heads, kv)
    parts = d.str("feed_forward_proj", "relu").split("-")
    gated = len(parts) > 1 and parts[0] == "gated"
    act = activation("gelu_new" if parts[-1] == "gelu" and gated else parts[-1])
    decoder = stack == "decoder"
    t = Tower(stack, "decoder_input_ids" if decoder else "input_ids", (seq,), layers)
    d.require(t, f"{stack}.embed_tokens", "vocab_size", "d_model")
    t.add(f"{stack}.embed_tokens", "Embedding", (seq, h))
    t.add(f"{stack}.dropout", "Dropout", (seq, h))
    d.require(t, f"{stack}.block", "num_decoder_layers" if decoder else "num_layers",
              defaults={"num_decoder_layers": d.raw("num_layers")})
    for i in _listed(t, layers, notes):
        p = f"{stack}.block.{i}.layer."
        t.add(p + "0.layer_norm", "T5LayerNorm", (seq, h), i)
        if i == 0:
            d.require(t, p + "0.SelfAttention.q", "num_heads", "d_kv")
        for proj in ("q", "k", "v"):
            t.add(p + f"0.SelfAttention.{proj}", "Linear", (seq, inner), i)
        if i == 0:  # only the first block has the relative-position table; the others reuse its bias
            t.add(p + "0.SelfAttention.relative_attention_bias", "Embedding", (seq, heads), i)
        t.add(p + "0.SelfAttention.o", "Linear", (seq, h), i)
        t.add(p + "0.dropout", "Dropout", (seq, h), i)
        ff_at = 1
        if decoder:
            t.add(p + "1.layer_norm", "T5LayerNorm", (seq, h), i)
            for proj in ("q", "k", "v"):
                t.add(p + f"1.EncDecAttention.{proj}", "Linear", (seq, inner), i)
            t.add(p + "1.EncDecAttention.o", "Linear", (seq, h), i)
            t.add(p + "1.dropout", "Dropout", (seq, h), i)
            ff_at = 2
        f = f"{p}{ff_at}."
        t.add(f + "layer_norm", "T5LayerNorm", (seq, h), i)
        if i == 0:
            d.require(t, f + ("DenseReluDense.wi_0" if gated else "DenseReluDense.wi"), "d_ff")
        if gated:
            t.add(f + "DenseReluDense.wi_0", "Linear", (seq, ff), i)
            t.add(f + "DenseReluDense.act", act, (seq, ff), i)
            t.add(f + "DenseReluDense.wi_1", "Linear", (seq, ff), i)
        else:
            t.add(f + "DenseReluDense.wi", "Linear", (seq, ff), i)
            t.add(f + "DenseReluDense.act", act, (seq, ff), i)
        t.add(f + "DenseReluDense.dropout", "Dropout", (seq, ff), i)
        t.add(f + "DenseReluDense.wo", "Linear", (seq, h), i)
        t.add(f + "dropout", "Dropout", (seq, h), i)
    t.add(f"{stack}.final_layer_norm", "T5LayerNorm", (seq, h))
    t.add(f"{stack}.dropout", "Dropout", (seq, h))
    return t


def t5(d: Dims, cap: int) -> Built:
    """T5 (and flan-T5's gated GELU): pre-norm RMS-style norms, relative position bias from the first block's
    table, no position embeddings; T5EncoderModel is the encoder alone, T5Model has no head."""
    notes: list[str] = []
    arch = _arch(d)
    probe = Tower("encoder", "input_ids", ())
    seq = _seq(d, probe, "encoder.embed_tokens", "n_positions", cap, default=512)
    layers = d.int("num_layers")
    towers = [_t5_stack(d, "encoder", seq, layers, notes)]
    if probe.failure:
        towers[0].fail(**probe.failure)
    if not arch.endswith("EncoderModel"):
        decoder = _t5_stack(d, "decoder", seq, d.int("num_decoder_layers", default=layers), notes)
        if arch.endswith("ForConditionalGeneration"):
            decoder.add("lm_head", "Linear", (seq, d.int("vocab_size")))
        elif arch and not arch.endswith("Model"):
            notes.append(f"the head of {arch} is not modelled: the graph is the base model's")
        towers.append(decoder)
    return towers, notes


BUILDERS: dict[str, Callable[[Dims, int], Built]] = {
    "t5": t5,
}
