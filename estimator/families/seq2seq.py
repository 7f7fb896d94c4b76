"""Encoder-decoder models: T5, BART, Whisper (cross-attention from decoder to encoder)."""

from __future__ import annotations

from .. import blocks
from ..reader import ConfigReader
from ..structure import Stack, Structure
from .common import LOSS_TRANSIENT_PER_VOCAB, architecture, plain_mlp_adapters, sequence_length


def _lm_loss(s: Structure, vocab: int, d: int, tokens: int, final_norm_saved: float) -> None:
    s.fixed_saved_per_sample += (final_norm_saved + blocks.BF16 * d + blocks.FP32 * vocab + 16) * tokens
    s.loss_transient_per_sample += LOSS_TRANSIENT_PER_VOCAB * vocab * tokens


def t5(r: ConfigReader, cap: int) -> Structure:
    s = Structure("t5", architecture(r))
    vocab = r.int("vocab_size", "vocab")
    d = r.int("d_model", "width")
    dkv = r.int("d_kv", "width")
    heads = r.int("num_heads", "heads")
    dff = r.int("d_ff", "width")
    enc_layers = r.int("num_layers", "layers")
    dec_layers = r.int("num_decoder_layers", "layers", default=enc_layers)
    buckets = r.int("relative_attention_num_buckets", "positions", default=32)
    proj = r.str("feed_forward_proj", default="relu")
    gated = proj.startswith("gated-")
    seq = sequence_length(r, ["n_positions"], cap, s, default=512)
    p = r.number("dropout_rate", default=0.1)
    inner = heads * dkv
    arch = s.architecture
    encoder_only = arch == "T5EncoderModel"

    s.add("text", "embeddings", vocab * d)
    drop = p > 0
    # T5 attention is eager and in fp32: q, k, v in fp32, scores, softmax (and dropout) matrices in fp32
    attn = (blocks.linear_inputs(d, 3) + blocks.BF16 * inner + 3 * blocks.FP32 * inner
            + blocks.dropout(d, p))
    scores = blocks.FP32 * heads * seq * seq * (3 if drop else 2)  # fp32 scores, softmax and dropped-out copy
    act = "gelu_new" if proj == "gated-gelu" else proj.split("-")[-1]
    if gated:  # activation's own tensors, wi_1's output, the activation output kept by the product, wo input
        inner_tensors = blocks.activation_saved(act) + 3
    else:      # the activation's output (or its input and intermediates), wo input
        inner_tensors = max(blocks.activation_saved(act), 1) + 1
    ff_saved = (blocks.linear_inputs(d, 2 if gated else 1) + blocks.BF16 * dff * inner_tensors + blocks.dropout(dff, p)
                + blocks.dropout(d, p))
    norm = blocks.rms_norm(d)
    stacks = [("encoder", enc_layers, False)] + ([] if encoder_only else [("decoder", dec_layers, True)])
    for name, layers, cross in stacks:
        _t5_attention(s, d, inner, layers, "SelfAttention")
        for wi in ("wi_0", "wi_1") if gated else ("wi",):
            s.linear("text", "blocks", d, dff, False, times=layers, module=f"DenseReluDense.{wi}")
        s.linear("text", "blocks", dff, d, False, times=layers, module="DenseReluDense.wo")
        s.add("text", "blocks", buckets * heads)
        n_norms = 3 if cross else 2
        s.add("text", "norms", d * n_norms * layers + d)
        # T5's RMS norm multiplies by a trainable weight, keeping the fp32 normalised input; LoRA freezes it
        s.lora_frozen["text"] = s.lora_frozen.get("text", 0) + blocks.FP32 * d * (n_norms * layers + 1)
        per_token = n_norms * norm + attn + ff_saved
        extra = scores
        per_layer = 0
        if cross:
            _t5_attention(s, d, inner, layers, "EncDecAttention")
            per_token += attn
            extra += scores
            per_layer = seq * seq  # the causal mask (bool), shared by the batch
        s.stacks.append(Stack("text", name, layers, seq, d, per_token, saved_per_sample_extra=int(extra),
                              saved_per_layer=per_layer,
                              kv_per_token=(2 * blocks.BF16 * inner if cross else 0),
                              cross_kv_tokens=(seq if cross else 0),
                              cross_kv_per_token=(2 * blocks.BF16 * inner if cross else 0)))
    # per stack: token ids, the embedding dropout, final norm and dropout (fp32); position buckets (int64)
    s.fixed_saved_per_sample += (8 + 2 * blocks.dropout(d, p) + norm) * seq * len(stacks)
    s.fixed_saved_const += 8 * seq * seq * len(stacks)
    if arch == "T5ForConditionalGeneration":
        if r.data.get("tie_word_embeddings") is False:
            s.add("head", "heads", vocab * d)
            s.notes.append("tie_word_embeddings is false: the checkpoint keeps lm_head apart from the shared "
                           "embeddings (transformers 5.x builds this config tied and undercounts it)")
        else:
            s.tied.append(f"lm_head shares the embeddings ({vocab:,} x {d:,}, counted once)")
        s.matmul("head", vocab * d, seq)
        _lm_loss(s, vocab, d, seq, 0)
    elif arch and arch not in ("T5Model", "T5EncoderModel"):
        s.warnings.append(f"head of {arch} is not modelled: the count covers the base model only")
    return s


def _t5_attention(s: Structure, d: int, inner: int, layers: int, name: str) -> None:
    """T5's q, k, v and o projections (no bias) in ``layers`` layers."""
    for proj in ("q", "k", "v"):
        s.linear("text", "blocks", d, inner, False, times=layers, module=f"{name}.{proj}")
    s.linear("text", "blocks", inner, d, False, times=layers, module=f"{name}.o")


def _seq2seq_layers(s: Structure, tower: str, name: str, d: int, ffn: int, heads: int, layers: int, tokens: int,
                    *, cross_tokens: int, k_bias: bool, p: float, activation: str, act_p: float = 0.0) -> None:
    """Whisper/BART layers: q, k, v, o (+ cross-attention), LayerNorms with bias, a plain MLP."""
    n_attn = 2 if cross_tokens else 1
    for attention in ("self_attn", "encoder_attn")[:n_attn]:
        kv_tokens = cross_tokens if attention == "encoder_attn" else None  # cross-attention's k and v read the encoder
        for proj in ("q_proj", "v_proj", "out_proj"):
            s.linear(tower, "blocks", d, d, True, times=layers, module=f"{attention}.{proj}",
                     tokens=kv_tokens if proj == "v_proj" else None)
        s.linear(tower, "blocks", d, d, k_bias, times=layers, module=f"{attention}.k_proj", tokens=kv_tokens)
    s.linear(tower, "blocks", d, ffn, True, times=layers, module="fc1")
    s.linear(tower, "blocks", ffn, d, True, times=layers, module="fc2")
    s.add(tower, "norms", 2 * d * (n_attn + 1) * layers)
    per_token = ((n_attn + 1) * blocks.layer_norm(d) + blocks.linear_inputs(d, 3) + blocks.sdpa(d, d, heads)
                 + blocks.BF16 * d + blocks.plain_mlp(d, ffn, activation) + 2 * blocks.dropout(d, p)
                 + blocks.dropout(ffn, act_p))
    extra = 0
    cross_kv = 2 * blocks.BF16 * d if cross_tokens else 0
    if cross_tokens:  # q cast, q and output of the cross SDPA; k and v casts and values over encoder tokens
        per_token += blocks.linear_inputs(d) + blocks.BF16 * 2 * d + blocks.FP32 * heads + blocks.BF16 * d
        extra = int((blocks.linear_inputs(d, 2) + 2 * blocks.BF16 * d) * cross_tokens)
    plain_mlp_adapters(s, tower, ffn, layers, activation, act_p)
    s.stacks.append(Stack(tower, name, layers, tokens, d, per_token, saved_per_sample_extra=extra,
                          kv_per_token=cross_kv, cross_kv_tokens=cross_tokens, cross_kv_per_token=cross_kv))


def bart(r: ConfigReader, cap: int) -> Structure:
    s = Structure("bart", architecture(r))
    vocab = r.int("vocab_size", "vocab")
    d = r.int("d_model", "width")
    positions = r.int("max_position_embeddings", "positions")
    seq = sequence_length(r, ["max_position_embeddings"], cap, s)
    p = r.number("dropout", default=0.1)
    act = r.str("activation_function", default="gelu")
    s.add("text", "embeddings", vocab * d + 2 * (positions + 2) * d)
    s.add("text", "norms", 2 * 2 * d)
    for name, prefix, cross in (("encoder", "encoder", 0), ("decoder", "decoder", seq)):
        heads = r.int(f"{prefix}_attention_heads", "heads")
        r.head_dim(d, heads, key=f"{prefix}_head_dim")
        _seq2seq_layers(s, "text", name, d, r.int(f"{prefix}_ffn_dim", "width"), heads,
                        r.int(f"{prefix}_layers", "layers"), seq, cross_tokens=cross, k_bias=True, p=p,
                        activation=act, act_p=r.number("activation_dropout", default=0.0))
    if r.bool("add_final_layer_norm", default=False):
        s.add("text", "norms", 2 * 2 * d)
    s.fixed_saved_per_sample += 2 * (16 + blocks.layer_norm(d) + blocks.dropout(d, p)) * seq
    arch = s.architecture
    if arch == "BartForConditionalGeneration":
        s.tied.append(f"lm_head shares the embeddings ({vocab:,} x {d:,}, counted once)")
        s.matmul("head", vocab * d, seq)
        _lm_loss(s, vocab, d, seq, 0)
    elif arch and arch != "BartModel":
        s.warnings.append(f"head of {arch} is not modelled: the count covers the base model only")
    return s


def whisper(r: ConfigReader, cap: int) -> Structure:
    s = Structure("whisper", architecture(r))
    vocab = r.int("vocab_size", "vocab")
    d = r.int("d_model", "width")
    mels = r.int("num_mel_bins", "channels")
    source = r.int("max_source_positions", "positions")
    target = r.int("max_target_positions", "positions")
    seq = min(target, cap)
    s.inputs.update(sequence_length=seq, sequence_source=f"max_target_positions={target}",
                    audio_frames=2 * source, audio_positions=source, mel_bins=mels)
    p = r.number("dropout", default=0.0)
    act = r.str("activation_function", default="gelu")
    # front end: two 3-wide convolutions (the second halves the frames) and learned positions
    s.add("audio", "embeddings", mels * d * 3 + d + d * d * 3 + d + source * d)
    s.matmul("audio", mels * d * 3, 2 * source)  # conv1 over every frame, conv2 (stride 2) over half
    s.matmul("audio", d * d * 3, source)
    s.fixed_saved_per_sample += (blocks.BF16 * mels * 2 + blocks.BF16 * d * 2 * 3 + blocks.BF16 * d) * source
    enc_heads = r.int("encoder_attention_heads", "heads")
    dec_heads = r.int("decoder_attention_heads", "heads")
    r.head_dim(d, enc_heads, key="encoder_head_dim")
    _seq2seq_layers(s, "audio", "encoder", d, r.int("encoder_ffn_dim", "width"), enc_heads,
                    r.int("encoder_layers", "layers"), source, cross_tokens=0, k_bias=False, p=p, activation=act)
    s.add("audio", "norms", 2 * d)
    s.add("text", "embeddings", vocab * d + target * d)
    _seq2seq_layers(s, "text", "decoder", d, r.int("decoder_ffn_dim", "width"), dec_heads,
                    r.int("decoder_layers", "layers"), seq, cross_tokens=source, k_bias=False, p=p, activation=act)
    s.add("text", "norms", 2 * d)
    arch = s.architecture
    if arch == "WhisperForConditionalGeneration":
        s.tied.append(f"proj_out shares the decoder embeddings ({vocab:,} x {d:,}, counted once)")
        s.matmul("head", vocab * d, seq)
        _lm_loss(s, vocab, d, seq, blocks.layer_norm(d))
    elif arch and arch != "WhisperModel":
        s.warnings.append(f"head of {arch} is not modelled: the count covers the base model only")
    return s


BUILDERS = {"t5": t5, "bart": bart, "whisper": whisper}
