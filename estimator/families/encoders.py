"""Bidirectional text encoders: BERT and its descendants (post-norm layers, masked-LM heads)."""

from __future__ import annotations

from .. import blocks
from ..errors import EstimateError
from ..reader import ConfigReader
from ..structure import Stack, Structure
from .common import MLM_LOSS_TRANSIENT_PER_VOCAB, architecture, sequence_length

BERT_MODULES = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
                "intermediate.dense", "output.dense")


def _encoder_layers(s: Structure, r: ConfigReader, h: int, inter: int, layers: int, heads: int, seq: int,
                    dropout_p: float, extra_per_token: float = 0.0, extra_per_sample: int = 0,
                    attention: float | None = None, per_layer: int = 0, bf16_stream: bool = False,
                    modules: tuple[str, ...] = BERT_MODULES) -> None:
    """Post-norm BERT layers: q, k, v, o with bias, LayerNorm after attention and after the MLP; ``modules``
    names q, k, v, o and the MLP's two linears as transformers does.

    After a projected embedding (ELECTRA-small) the residual stream is a matmul output, so bf16: the
    norms keep bf16 inputs and q, k, v share one saved input instead of three casts.
    """
    for name in modules[:4]:
        s.linear("text", "blocks", h, h, True, times=layers, module=name)
    s.linear("text", "blocks", h, inter, True, times=layers, module=modules[4])
    s.linear("text", "blocks", inter, h, True, times=layers, module=modules[5])
    s.add("text", "norms", 2 * 2 * h * layers)
    attention = blocks.sdpa(h, h, heads) if attention is None else attention
    if bf16_stream:
        stream = 2 * blocks.layer_norm(h, blocks.BF16) + 2 * blocks.BF16 * h
        # under LoRA q, k and v each keep their own dropped-out bf16 copy of the shared input: two more than the
        # one a full fine-tune counts
        s.lora_kept["text"] = s.lora_kept.get("text", 0) + 2 * blocks.BF16 * h * layers
    else:
        stream = 2 * blocks.layer_norm(h) + blocks.linear_inputs(h, 4)
    per_token = (stream + attention + 2 * blocks.BF16 * inter + 2 * blocks.dropout(h, dropout_p)
                 + extra_per_token)
    s.stacks.append(Stack("text", "encoder", layers, seq, h, per_token, saved_per_sample_extra=extra_per_sample,
                          saved_per_layer=per_layer))


def _embeddings(s: Structure, r: ConfigReader, vocab: int, width: int, h: int, positions: int, types: int,
                dropout_p: float, seq: int) -> None:
    s.add("text", "embeddings", (vocab + positions + types) * width)
    s.add("text", "norms", 2 * width)
    ids = 8 * (2 + (1 if types else 0))
    s.fixed_saved_per_sample += (ids + blocks.layer_norm(width) + blocks.dropout(width, dropout_p)) * seq
    if width != h:
        s.linear("text", "projections", width, h, True, lora=False)
        s.fixed_saved_per_sample += blocks.linear_inputs(width) * seq


def _mlm_head(s: Structure, h: int, width: int, vocab: int, seq: int) -> None:
    """dense + GELU + LayerNorm + decoder tied to the word embeddings (its bias counted)."""
    s.linear("head", "heads", h, width, True, lora=False)
    s.add("head", "norms", 2 * width)
    s.add("head", "heads", vocab)
    s.tied.append(f"masked-LM decoder shares the word embeddings ({vocab:,} x {width:,}, counted once)")
    s.matmul("head", vocab * width, seq)
    s.fixed_saved_per_sample += (blocks.BF16 * h + 2 * blocks.BF16 * width + blocks.layer_norm(width, blocks.BF16)
                                 + blocks.FP32 * vocab) * seq
    s.loss_transient_per_sample += MLM_LOSS_TRANSIENT_PER_VOCAB * vocab * seq


def _heads(s: Structure, r: ConfigReader, h: int, width: int, vocab: int, seq: int, *, style: str) -> None:
    arch = s.architecture
    pooler = False
    if arch.endswith("ForMaskedLM"):
        _mlm_head(s, h, width, vocab, seq)
    elif arch.endswith("ForPreTraining") and style == "bert":
        _mlm_head(s, h, width, vocab, seq)
        pooler = True
        s.linear("head", "heads", h, 2, True, lora=False)
    elif arch.endswith("ForPreTraining") and style == "electra":
        s.linear("head", "heads", h, h, True, lora=False)
        s.linear("head", "heads", h, 1, True, lora=False)
        s.fixed_saved_per_sample += (blocks.BF16 * h * 3 + blocks.FP32 * 2) * seq
    elif arch.endswith("ForSequenceClassification"):
        labels = r.num_labels()
        if style in ("roberta", "electra"):
            s.linear("head", "heads", h, h, True, lora=False)
        else:
            pooler = style == "bert"
        s.linear("head", "heads", h, labels, True, lora=False)
    elif arch.endswith("Model") or not arch:
        pooler = style in ("bert", "roberta")
    else:
        s.warnings.append(f"head of {arch} is not modelled: the count covers the base model only")
    if pooler:
        s.linear("head", "heads", h, h, True, lora=False)


def _bert_like(r: ConfigReader, cap: int, family: str, style: str) -> Structure:
    s = Structure(family, architecture(r))
    vocab = r.int("vocab_size", "vocab")
    h = r.int("hidden_size", "width")
    width = r.int("embedding_size", "width", default=h) if style == "electra" else h
    layers = r.int("num_hidden_layers", "layers")
    heads = r.int("num_attention_heads", "heads")
    r.head_dim(h, heads, key="attention_head_size")
    inter = r.int("intermediate_size", "width")
    positions = r.int("max_position_embeddings", "positions")
    types = r.int("type_vocab_size", "vocab", default=2, minimum=0)
    seq = sequence_length(r, ["max_position_embeddings"], cap, s)
    if style == "roberta":  # two positions are reserved past the padding index
        seq = min(seq, positions - 2)
        s.inputs["sequence_length"] = seq
    p = r.number("hidden_dropout_prob", default=0.1)
    _embeddings(s, r, vocab, width, h, positions, types, p, seq)
    _encoder_layers(s, r, h, inter, layers, heads, seq, p, bf16_stream=width != h)
    _heads(s, r, h, width, vocab, seq, style=style)
    return s


def bert(r: ConfigReader, cap: int) -> Structure:
    return _bert_like(r, cap, "bert", "bert")


def roberta(r: ConfigReader, cap: int) -> Structure:
    return _bert_like(r, cap, "roberta", "roberta")


def xlm_roberta(r: ConfigReader, cap: int) -> Structure:
    return _bert_like(r, cap, "xlm-roberta", "roberta")


def electra(r: ConfigReader, cap: int) -> Structure:
    return _bert_like(r, cap, "electra", "electra")


def distilbert(r: ConfigReader, cap: int) -> Structure:
    s = Structure("distilbert", architecture(r))
    vocab = r.int("vocab_size", "vocab")
    dim = r.first_int(["dim", "hidden_size"], "width")
    layers = r.first_int(["n_layers", "num_hidden_layers"], "layers")
    heads = r.first_int(["n_heads", "num_attention_heads"], "heads")
    if dim % heads:
        raise EstimateError(r.name("n_heads"), f"{heads} heads do not divide dim {dim}")
    hidden = r.first_int(["hidden_dim", "intermediate_size"], "width")
    positions = r.int("max_position_embeddings", "positions")
    seq = sequence_length(r, ["max_position_embeddings"], cap, s)
    p = r.number("dropout", default=0.1)
    s.add("text", "embeddings", (vocab + positions) * dim)
    s.add("text", "norms", 2 * dim)
    s.fixed_saved_per_sample += (16 + blocks.layer_norm(dim) + blocks.dropout(dim, p)) * seq
    _encoder_layers(s, r, dim, hidden, layers, heads, seq, p,
                    modules=("attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin",
                             "ffn.lin1", "ffn.lin2"))
    if s.architecture.endswith("ForMaskedLM"):
        _mlm_head(s, dim, dim, vocab, seq)
    elif s.architecture.endswith("ForSequenceClassification"):
        s.linear("head", "heads", dim, dim, True, lora=False)
        s.linear("head", "heads", dim, r.num_labels(), True, lora=False)
    elif s.architecture and not s.architecture.endswith("Model"):
        s.warnings.append(f"head of {s.architecture} is not modelled: the count covers the base model only")
    return s


def deberta_v2(r: ConfigReader, cap: int) -> Structure:
    s = Structure("deberta-v2", architecture(r))
    vocab = r.int("vocab_size", "vocab")
    h = r.int("hidden_size", "width")
    width = r.int("embedding_size", "width", default=h)
    layers = r.int("num_hidden_layers", "layers")
    heads = r.int("num_attention_heads", "heads")
    r.head_dim(h, heads, key="attention_head_size")
    inter = r.int("intermediate_size", "width")
    positions = r.int("max_position_embeddings", "positions")
    types = r.int("type_vocab_size", "vocab", default=0, minimum=0)
    seq = sequence_length(r, ["max_position_embeddings"], cap, s)
    p = r.number("hidden_dropout_prob", default=0.1)
    biased = r.bool("position_biased_input", default=True)
    s.add("text", "embeddings", vocab * width + (positions * width if biased else 0) + types * width)
    if width != h:
        s.linear("text", "projections", width, h, False, lora=False)
    s.add("text", "norms", 2 * h)
    s.fixed_saved_per_sample += (16 + blocks.layer_norm(h) + blocks.dropout(h, p)) * seq
    relative = r.bool("relative_attention", default=False)
    extra_per_sample = per_layer = 0
    attention = None
    if relative:
        buckets = r.int("position_buckets", "positions", default=-1, minimum=-1)
        max_rel = r.int("max_relative_positions", "positions", default=-1, minimum=-1)
        if max_rel < 1:
            max_rel = positions
        span = buckets if buckets > 0 else max_rel
        s.add("text", "embeddings", 2 * span * h)
        norm_rel = r.str("norm_rel_ebd", default="none")
        if "layer_norm" in norm_rel:
            s.add("text", "norms", 2 * h)
        att_type = r.raw("pos_att_type", default=[])
        if isinstance(att_type, str):
            att_type = [x.strip() for x in att_type.lower().split("|")]
        if not r.bool("share_att_key", default=False):
            if "c2p" in att_type:
                s.linear("text", "blocks", h, h, True, times=layers, module="attention.self.pos_key_proj")
            if "p2c" in att_type:
                s.linear("text", "blocks", h, h, True, times=layers, module="attention.self.pos_query_proj")
        # disentangled attention runs eagerly: q, k, v and the projected relative positions (bf16 and
        # fp32), the gathered c2p and p2c scores and the probabilities (bf16); int64 gather indices and the
        # bool mask are shared by the batch
        attention = blocks.BF16 * 7 * h + blocks.FP32 * h
        extra_per_sample = blocks.BF16 * 3 * heads * seq * seq
        per_layer = 17 * seq * seq
    if r.int("conv_kernel_size", "width", default=0, minimum=0):
        raise EstimateError(r.name("conv_kernel_size"), "DeBERTa-v2 convolution layers are not modelled")
    _encoder_layers(s, r, h, inter, layers, heads, seq, p, extra_per_sample=extra_per_sample,
                    attention=attention, per_layer=per_layer,
                    modules=("attention.self.query_proj", "attention.self.key_proj", "attention.self.value_proj",
                             *BERT_MODULES[3:]))
    _heads(s, r, h, width, vocab, seq, style="deberta")
    return s


BUILDERS = {"bert": bert, "roberta": roberta, "xlm-roberta": xlm_roberta, "electra": electra,
            "distilbert": distilbert, "deberta-v2": deberta_v2}
