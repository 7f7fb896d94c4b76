"""Decoder-only language models: the Llama lineage (gated MLP, RMSNorm) and the GPT lineage."""

from __future__ import annotations

from .. import blocks
from ..errors import EstimateError
from ..reader import ConfigReader
from ..structure import Stack, Structure
from .common import architecture, causal_lm_head, plain_mlp_adapters, sequence_length, tie_flag

CAUSAL_SUFFIXES = ("ForCausalLM", "LMHeadModel")


def _head_kind(arch: str) -> str:
    """none (base model), causal (LM head), classify (sequence classification) or unknown."""
    if not arch or arch.endswith("Model") and not arch.endswith("LMHeadModel"):
        return "none"
    if arch.endswith(CAUSAL_SUFFIXES):
        return "causal"
    if arch.endswith("ForSequenceClassification"):
        return "classify"
    return "unknown"


def _finish_head(s: Structure, r: ConfigReader, vocab: int, hidden: int, *, tied: bool, bias: bool,
                 final_norm_saved: float) -> None:
    kind = _head_kind(s.architecture)
    if kind == "causal":
        causal_lm_head(s, r, vocab, hidden, tied=tied, bias=bias, final_norm_saved=final_norm_saved)
    elif kind == "classify":
        s.linear("head", "heads", hidden, r.num_labels(), False, lora=False)
        s.fixed_saved_per_sample += (final_norm_saved + blocks.BF16 * hidden) * s.inputs["sequence_length"]
    else:
        s.fixed_saved_per_sample += final_norm_saved * s.inputs["sequence_length"]
        if kind == "unknown":
            s.warnings.append(f"head of {s.architecture} is not modelled: the count covers the base model only")


def _llama_like(r: ConfigReader, cap: int, family: str, *, qkv_bias: bool | None = None, o_bias: bool | None = None,
                tie_default: bool = False, norms_per_layer: int = 2, qk_norm: bool = False, fused: bool = False,
                gemma: bool = False, moe: str = "") -> Structure:
    s = Structure(family, architecture(r))
    vocab = r.int("vocab_size", "vocab")
    h = r.int("hidden_size", "width")
    layers = r.int("num_hidden_layers", "layers")
    heads = r.int("num_attention_heads", "heads")
    d = r.head_dim(h, heads)
    kv = r.kv_heads(heads)
    inter = r.int("intermediate_size", "width")
    bias = r.bool("attention_bias", default=False)
    qkv_b = bias if qkv_bias is None else qkv_bias
    o_b = bias if o_bias is None else o_bias
    mlp_bias = r.bool("mlp_bias", default=False)
    tied = tie_flag(r, tie_default)
    seq = sequence_length(r, ["max_position_embeddings"], cap, s)
    qd, kvd = heads * d, kv * d

    s.add("text", "embeddings", vocab * h)
    if fused:
        s.linear("text", "blocks", h, qd + 2 * kvd, qkv_b, times=layers, module="self_attn.qkv_proj")
    else:
        s.linear("text", "blocks", h, qd, qkv_b, times=layers, module="self_attn.q_proj")
        s.linear("text", "blocks", h, kvd, qkv_b, times=layers, module="self_attn.k_proj")
        s.linear("text", "blocks", h, kvd, qkv_b, times=layers, module="self_attn.v_proj")
    s.linear("text", "blocks", qd, h, o_b, times=layers, module="self_attn.o_proj")
    s.add("text", "norms", (norms_per_layer * h + (2 * d if qk_norm else 0)) * layers + h)

    attn_saved = blocks.linear_inputs(h, 1 if fused else 3) + norms_per_layer * blocks.rms_norm(h)
    per_layer = blocks.FP32 * h * norms_per_layer if gemma else 0  # Gemma norms keep 1 + weight
    eager = family == "gemma2" and r.has("attn_logit_softcapping")
    masked = family == "gemma3_text"  # sliding-window layers hand SDPA an explicit mask
    if eager:  # soft-capped scores: bf16 scores, fp32 softmax, bf16 probabilities; k and v repeated per head
        attn_saved += blocks.BF16 * 4 * qd + blocks.eager_attention(heads, seq, fp32_scores=1, bf16_scores=2)
    elif masked:
        attn_saved += blocks.BF16 * (3 * qd + kvd) + blocks.FP32 * heads
        per_layer += blocks.BF16 * seq * seq
    else:
        attn_saved += blocks.sdpa(qd, kvd, heads)
    if fused:  # the fused qkv output is sliced, so o_proj gets its own contiguous input
        attn_saved += blocks.BF16 * qd
    if qk_norm and gemma:  # fp32 input and fp32 normalised copy of q and k, rsqrt per head
        attn_saved += 8 * (qd + kvd) + 4 * (heads + kv)
        per_layer += blocks.FP32 * 2 * d
    elif qk_norm:  # fp32 copy, normalised bf16 copy and rsqrt of q and of k
        attn_saved += 6 * (qd + kvd) + 4 * (heads + kv)
    # Trainable RMSNorm weights keep the normalised input (fp32; q/k norms: bf16, Gemma's fp32); LoRA freezes them.
    s.lora_frozen["text"] = (blocks.FP32 * h * (norms_per_layer * layers + 1)
                             + ((blocks.FP32 if gemma else blocks.BF16) * (qd + kvd) * layers if qk_norm else 0))
    mlp_saved = _mlp(s, r, h, inter, layers, moe=moe, fused=fused, bias=mlp_bias)
    s.stacks.append(Stack("text", "decoder", layers, seq, h, attn_saved + mlp_saved, saved_per_layer=per_layer, attn_width=qd,
                          kv_per_token=2 * blocks.BF16 * kvd))
    _finish_head(s, r, vocab, h, tied=tied, bias=False, final_norm_saved=blocks.rms_norm(h))
    return s


def _mlp(s: Structure, r: ConfigReader, h: int, inter: int, layers: int, *, moe: str, fused: bool,
         bias: bool) -> float:
    """Parameters of every layer's MLP (dense or mixture of experts); saved bytes per token of one layer."""
    if moe == "mixtral":
        experts = r.int("num_local_experts", "experts")
        top_k = _top_k(r, experts)
        s.linear("text", "blocks", h, experts, False, times=layers, lora=False)
        s.add("text", "blocks", experts * 3 * h * inter * layers)
        s.flop_matmuls.append(("text", top_k * 3 * h * inter * layers, None))  # the experts each token is routed to
        s.notes.append(f"mixture of experts: {experts} experts, {top_k} active per token; "
                       "activations assume even routing; LoRA adapters skip the fused expert weights")
        _frozen_experts(s, h, inter, top_k, layers)
        return blocks.linear_inputs(h) + blocks.moe_router(experts) + blocks.grouped_experts(h, inter, top_k)
    if moe == "qwen2_moe":
        experts = r.int("num_experts", "experts")
        top_k = _top_k(r, experts)
        moe_inter = r.int("moe_intermediate_size", "width")
        shared = r.int("shared_expert_intermediate_size", "width", minimum=0, default=0)
        step = r.int("decoder_sparse_step", "layers", default=1)
        only = r.raw("mlp_only_layers", default=[])
        if not isinstance(only, list):
            raise EstimateError(r.name("mlp_only_layers"), f"expected a list of layer indices, got {only!r}")
        sparse = sum(1 for i in range(layers) if i not in only and (i + 1) % step == 0)
        dense = layers - sparse
        s.linear("text", "blocks", h, experts, False, times=sparse, lora=False)
        s.add("text", "blocks", experts * 3 * h * moe_inter * sparse)
        s.flop_matmuls.append(("text", top_k * 3 * h * moe_inter * sparse, None))  # the experts each token is routed to
        _frozen_experts(s, h, moe_inter, top_k, sparse)
        if shared:
            s.linear("text", "blocks", h, shared, False, times=sparse, module="mlp.shared_expert.gate_proj")
            s.linear("text", "blocks", h, shared, False, times=sparse, module="mlp.shared_expert.up_proj")
            s.linear("text", "blocks", shared, h, False, times=sparse, module="mlp.shared_expert.down_proj")
            s.linear("text", "blocks", h, 1, False, times=sparse, lora=False)
        if dense:
            _gated_linears(s, h, inter, dense, bias=False)
        s.notes.append(f"mixture of experts: {experts} experts, {top_k} active per token, {sparse} sparse layers; "
                       "activations assume even routing; LoRA adapters skip the fused expert weights")
        per_sparse = (blocks.linear_inputs(h, 2) + blocks.moe_router(experts) + blocks.grouped_experts(h, moe_inter, top_k)
                      + (blocks.gated_mlp(h, shared) if shared else 0))
        return (per_sparse * sparse + blocks.gated_mlp(h, inter) * dense) / layers
    if fused:
        s.linear("text", "blocks", h, 2 * inter, bias, times=layers, module="mlp.gate_up_proj")
        s.linear("text", "blocks", inter, h, bias, times=layers, module="mlp.down_proj")
    else:
        _gated_linears(s, h, inter, layers, bias=bias)
    return blocks.linear_inputs(h, 1 if fused else 2) + 4 * blocks.BF16 * inter


def _frozen_experts(s: Structure, h: int, inter: int, top_k: int, layers: int) -> None:
    """What LoRA's frozen router and experts stop saving in ``layers`` sparse layers (``lora_frozen``): the
    router's bf16 input, and the experts' fp32 tensors (``blocks.grouped_experts``) for bf16 ones without the
    gathered input and the down projection's input, which only the experts' weight gradients read.

    The fused expert weights are no autocast matmul's (not in ``matmul_params``): transformers' grouped-mm
    experts cast their input to the weights' dtype instead."""
    lora = blocks.BF16 * top_k * (h + 3 * inter)
    frozen = blocks.linear_inputs(h) + blocks.grouped_experts(h, inter, top_k) - lora
    s.lora_frozen["text"] = s.lora_frozen.get("text", 0) + frozen * layers


def _gated_linears(s: Structure, h: int, inter: int, layers: int, *, bias: bool) -> None:
    """A gated MLP's gate, up and down projections in ``layers`` layers."""
    s.linear("text", "blocks", h, inter, bias, times=layers, module="mlp.gate_proj")
    s.linear("text", "blocks", h, inter, bias, times=layers, module="mlp.up_proj")
    s.linear("text", "blocks", inter, h, bias, times=layers, module="mlp.down_proj")


def _top_k(r: ConfigReader, experts: int) -> int:
    top_k = r.int("num_experts_per_tok", "experts")
    if top_k > experts:
        raise EstimateError(r.name("num_experts_per_tok"), f"{top_k} active experts exceed the {experts} experts")
    return top_k


def llama(r: ConfigReader, cap: int) -> Structure:
    return _llama_like(r, cap, "llama")


def mistral(r: ConfigReader, cap: int) -> Structure:
    return _llama_like(r, cap, "mistral", qkv_bias=False, o_bias=False)


def mixtral(r: ConfigReader, cap: int) -> Structure:
    return _llama_like(r, cap, "mixtral", qkv_bias=False, o_bias=False, moe="mixtral")


def qwen2(r: ConfigReader, cap: int) -> Structure:
    return _llama_like(r, cap, "qwen2", qkv_bias=True, o_bias=False)


def qwen2_moe(r: ConfigReader, cap: int) -> Structure:
    return _llama_like(r, cap, "qwen2_moe", qkv_bias=r.bool("qkv_bias", default=True), o_bias=False,
                       moe="qwen2_moe")


def qwen3(r: ConfigReader, cap: int) -> Structure:
    return _llama_like(r, cap, "qwen3", qk_norm=True)


def gemma(r: ConfigReader, cap: int) -> Structure:
    return _llama_like(r, cap, "gemma", tie_default=True, gemma=True)


def gemma2(r: ConfigReader, cap: int) -> Structure:
    return _llama_like(r, cap, "gemma2", tie_default=True, gemma=True, norms_per_layer=4)


def gemma3_text(r: ConfigReader, cap: int) -> Structure:
    return _llama_like(r, cap, "gemma3_text", tie_default=True, gemma=True, norms_per_layer=4, qk_norm=True)


def phi3(r: ConfigReader, cap: int) -> Structure:
    return _llama_like(r, cap, "phi3", qkv_bias=False, o_bias=False, fused=True)


# ---- the GPT lineage: LayerNorm with bias, plain MLP ------------------------------------------------------

def _classic(r: ConfigReader, cap: int, family: str, *, vocab: int, h: int, layers: int, heads: int, inter: int,
             kv_dim: int | None = None, pos_key: str, tie_default: bool, head_bias: bool = False,
             positions: int = 0, qkv_fused: bool, qkv_bias: bool, o_bias: bool, mlp_bias: bool,
             norms_per_layer: int, activation: str, dropouts: float = 0.0, emb_norm: bool = False,
             modules: tuple[str, ...], pos_default: int | None = None, o_copy: bool = False,
             parallel: bool = False, attn_extra: float = 0.0, bloom_alibi: bool = False) -> Structure:
    """The GPT lineage; ``modules`` names the layer's linears: the fused qkv (or q, k and v), the attention
    output, the MLP's input and output projections."""
    s = Structure(family, architecture(r))
    kvd = h if kv_dim is None else kv_dim
    seq = sequence_length(r, [pos_key], cap, s, default=pos_default)
    tied = tie_flag(r, tie_default)
    s.add("text", "embeddings", vocab * h + positions * h)
    if emb_norm:
        s.add("text", "norms", 2 * h)
    *attn, o_name, in_name, out_name = modules
    if qkv_fused:
        s.linear("text", "blocks", h, h + 2 * kvd, qkv_bias, times=layers, module=attn[0])
    else:
        s.linear("text", "blocks", h, h, qkv_bias, times=layers, module=attn[0])
        s.linear("text", "blocks", h, kvd, qkv_bias, times=layers, module=attn[1])
        s.linear("text", "blocks", h, kvd, qkv_bias, times=layers, module=attn[2])
    s.linear("text", "blocks", h, h, o_bias, times=layers, module=o_name)
    s.linear("text", "blocks", h, inter, mlp_bias, times=layers, module=in_name)
    s.linear("text", "blocks", inter, h, mlp_bias, times=layers, module=out_name)
    s.add("text", "norms", 2 * h * norms_per_layer * layers + 2 * h)
    # parallel residual: both norms read the same fp32 input, saved once
    norms_saved = norms_per_layer * blocks.layer_norm(h) - (blocks.FP32 * h if parallel and norms_per_layer == 2 else 0)
    if bloom_alibi:  # eager ALiBi attention: q, k, v, o inputs plus fp32 and bf16 score matrices
        attention = blocks.BF16 * 5 * h + blocks.eager_attention(heads, seq, fp32_scores=1, bf16_scores=1)
    else:
        attention = blocks.sdpa(h, kvd, heads)
    per_token = (norms_saved + blocks.linear_inputs(h, 1 if qkv_fused else 3) + attention
                 + (blocks.BF16 * h if o_copy else 0) + attn_extra
                 + blocks.plain_mlp(h, inter, activation) + 2 * blocks.dropout(h, dropouts))
    s.stacks.append(Stack("text", "decoder", layers, seq, h, per_token, kv_per_token=2 * blocks.BF16 * kvd))
    plain_mlp_adapters(s, "text", inter, layers, activation)
    _finish_head(s, r, vocab, h, tied=tied, bias=head_bias, final_norm_saved=blocks.layer_norm(h))
    return s


def gpt2(r: ConfigReader, cap: int) -> Structure:
    h = r.first_int(["n_embd", "hidden_size"], "width")
    inner = r.int("n_inner", "width", default=4 * h)
    n_pos = r.first_int(["n_positions", "max_position_embeddings"], "positions")
    heads = r.first_int(["n_head", "num_attention_heads"], "heads")
    if h % heads:
        raise EstimateError(r.name("n_head"), f"{heads} heads do not divide n_embd {h}")
    return _classic(r, cap, "gpt2", vocab=r.int("vocab_size", "vocab"), h=h,
                    layers=r.first_int(["n_layer", "num_hidden_layers"], "layers"), heads=heads, inter=inner,
                    pos_key="n_positions", positions=n_pos, tie_default=True, qkv_fused=True, qkv_bias=True,
                    o_bias=True, mlp_bias=True, norms_per_layer=2,
                    modules=("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"),
                    activation=r.str("activation_function", default="gelu_new"),
                    dropouts=r.number("resid_pdrop", default=0.1), attn_extra=blocks.BF16 * 2 * h)


def gpt_neox(r: ConfigReader, cap: int) -> Structure:
    h = r.int("hidden_size", "width")
    heads = r.int("num_attention_heads", "heads")
    r.head_dim(h, heads)
    return _classic(r, cap, "gpt_neox", vocab=r.int("vocab_size", "vocab"), h=h,
                    layers=r.int("num_hidden_layers", "layers"), heads=heads,
                    inter=r.int("intermediate_size", "width"), pos_key="max_position_embeddings",
                    tie_default=False, qkv_fused=True, qkv_bias=r.bool("attention_bias", default=True),
                    o_bias=r.bool("attention_bias", default=True), mlp_bias=True, norms_per_layer=2,
                    modules=("attention.query_key_value", "attention.dense", "mlp.dense_h_to_4h", "mlp.dense_4h_to_h"),
                    activation=r.str("hidden_act", default="gelu"), o_copy=True,
                    parallel=r.bool("use_parallel_residual", default=True),
                    dropouts=r.number("hidden_dropout", default=0.0))


def gptj(r: ConfigReader, cap: int) -> Structure:
    h = r.first_int(["n_embd", "hidden_size"], "width")
    heads = r.first_int(["n_head", "num_attention_heads"], "heads")
    if h % heads:
        raise EstimateError(r.name("n_head"), f"{heads} heads do not divide n_embd {h}")
    return _classic(r, cap, "gptj", vocab=r.int("vocab_size", "vocab"), h=h,
                    layers=r.first_int(["n_layer", "num_hidden_layers"], "layers"), heads=heads,
                    inter=r.int("n_inner", "width", default=4 * h), pos_key="n_positions", tie_default=False,
                    head_bias=True, qkv_fused=False, qkv_bias=False, o_bias=False, mlp_bias=True,
                    modules=("attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.out_proj", "mlp.fc_in", "mlp.fc_out"),
                    norms_per_layer=1, activation=r.str("activation_function", default="gelu_new"), o_copy=True,
                    dropouts=r.number("resid_pdrop", default=0.0))


def bloom(r: ConfigReader, cap: int) -> Structure:
    h = r.first_int(["hidden_size", "n_embed"], "width")
    heads = r.first_int(["n_head", "num_attention_heads"], "heads")
    if h % heads:
        raise EstimateError(r.name("n_head"), f"{heads} heads do not divide hidden_size {h}")
    return _classic(r, cap, "bloom", vocab=r.int("vocab_size", "vocab"), h=h,
                    layers=r.first_int(["n_layer", "num_hidden_layers"], "layers"), heads=heads, inter=4 * h,
                    pos_key="seq_length", pos_default=2048, tie_default=True, qkv_fused=True, qkv_bias=True,
                    o_bias=True, mlp_bias=True, norms_per_layer=2, activation="gelu", emb_norm=True,
                    modules=("self_attention.query_key_value", "self_attention.dense", "mlp.dense_h_to_4h",
                             "mlp.dense_4h_to_h"),
                    bloom_alibi=True)


def phi(r: ConfigReader, cap: int) -> Structure:
    h = r.int("hidden_size", "width")
    heads = r.int("num_attention_heads", "heads")
    kv = r.kv_heads(heads)
    d = r.head_dim(h, heads)
    s = _classic(r, cap, "phi", vocab=r.int("vocab_size", "vocab"), h=h, layers=r.int("num_hidden_layers", "layers"),
                 heads=heads, inter=r.int("intermediate_size", "width"), kv_dim=kv * d,
                 pos_key="max_position_embeddings", tie_default=False, head_bias=True, qkv_fused=False,
                 qkv_bias=True, o_bias=True, mlp_bias=True, norms_per_layer=1,
                 modules=("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.dense", "mlp.fc1",
                          "mlp.fc2"),
                 activation=r.str("hidden_act", default="gelu_new"), o_copy=True,
                 dropouts=r.number("resid_pdrop", default=0.0))
    if r.bool("qk_layernorm", default=False):
        s.add("text", "norms", 2 * 2 * d * r.int("num_hidden_layers", "layers"))
    return s


def starcoder2(r: ConfigReader, cap: int) -> Structure:
    h = r.int("hidden_size", "width")
    heads = r.int("num_attention_heads", "heads")
    kv = r.kv_heads(heads)
    d = r.head_dim(h, heads)
    bias = r.bool("use_bias", default=True)
    s = _classic(r, cap, "starcoder2", vocab=r.int("vocab_size", "vocab"), h=h,
                    layers=r.int("num_hidden_layers", "layers"), heads=heads, inter=r.int("intermediate_size", "width"),
                    kv_dim=kv * d, pos_key="max_position_embeddings", tie_default=True, qkv_fused=False,
                    qkv_bias=bias, o_bias=bias, mlp_bias=bias, norms_per_layer=2,
                    modules=("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.c_fc",
                             "mlp.c_proj"),
                    activation=r.str("hidden_act", default="gelu_pytorch_tanh"),
                    dropouts=r.number("residual_dropout", default=0.0))
    p = r.number("embedding_dropout", default=0.0)
    s.fixed_saved_per_sample += blocks.dropout(h, p) * s.inputs["sequence_length"]
    return s


def falcon(r: ConfigReader, cap: int) -> Structure:
    s = Structure("falcon", architecture(r))
    vocab = r.int("vocab_size", "vocab")
    h = r.first_int(["hidden_size", "n_embed"], "width")
    layers = r.first_int(["num_hidden_layers", "n_layer"], "layers")
    heads = r.first_int(["num_attention_heads", "n_head"], "heads")
    d = r.head_dim(h, heads)
    new_arch = r.bool("new_decoder_architecture", default=False)
    if new_arch:
        kv = r.kv_heads(heads, "num_kv_heads")
    else:
        kv = 1 if r.bool("multi_query", default=True) else heads
    bias = r.bool("bias", default=False)
    parallel = r.bool("parallel_attn", default=True)
    ffn = r.int("ffn_hidden_size", "width", default=4 * h)
    seq = sequence_length(r, ["max_position_embeddings"], cap, s, default=2048)
    if r.bool("alibi", default=False):
        s.notes.append("ALiBi attention: SDPA takes an explicit bias, which the fused kernels still do not store")
    s.add("text", "embeddings", vocab * h)
    s.linear("text", "blocks", h, (heads + 2 * kv) * d, bias, times=layers, module="self_attention.query_key_value")
    s.linear("text", "blocks", h, h, bias, times=layers, module="self_attention.dense")
    s.linear("text", "blocks", h, ffn, bias, times=layers, module="mlp.dense_h_to_4h")
    s.linear("text", "blocks", ffn, h, bias, times=layers, module="mlp.dense_4h_to_h")
    if new_arch:
        n_ln = r.int("num_ln_in_parallel_attn", "layers", default=2)
    else:
        n_ln = 1 if parallel else 2
    s.add("text", "norms", 2 * h * n_ln * layers + 2 * h)
    # eager attention in fp32: q, k, v after rotary, the fp32 probabilities; parallel norms share their input
    attention = blocks.FP32 * (heads * d + 2 * kv * d) + blocks.eager_attention(heads, seq, fp32_scores=1,
                                                                                   bf16_scores=0)
    per_token = (n_ln * blocks.layer_norm(h) - (blocks.FP32 * h if parallel and n_ln == 2 else 0)
                 + blocks.linear_inputs(h, 2) + attention + blocks.BF16 * h + 2 * blocks.BF16 * ffn)
    # with more than one sample the shared k and v heads are copied out to every head (fp32): exact for
    # any batch as that copy per sample less one copy, which a batch of one keeps as a view
    expand = blocks.FP32 * 2 * (heads - kv) * d if kv < heads else 0
    s.stacks.append(Stack("text", "decoder", layers, seq, h, per_token + expand, saved_per_layer=-expand * seq,
                          kv_per_token=2 * blocks.BF16 * kv * d))
    _finish_head(s, r, vocab, h, tied=tie_flag(r, True), bias=False, final_norm_saved=blocks.layer_norm(h))
    return s


def opt(r: ConfigReader, cap: int) -> Structure:
    s = Structure("opt", architecture(r))
    vocab = r.int("vocab_size", "vocab")
    h = r.int("hidden_size", "width")
    layers = r.int("num_hidden_layers", "layers")
    heads = r.int("num_attention_heads", "heads")
    r.head_dim(h, heads)
    ffn = r.int("ffn_dim", "width")
    proj = r.int("word_embed_proj_dim", "width", default=h)
    positions = r.int("max_position_embeddings", "positions")
    seq = sequence_length(r, ["max_position_embeddings"], cap, s)
    bias = r.bool("enable_bias", default=True)
    s.add("text", "embeddings", vocab * proj + (positions + 2) * h)
    if proj != h:
        s.linear("text", "projections", proj, h, False, lora=False)
        s.linear("text", "projections", h, proj, False, lora=False)
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        s.linear("text", "blocks", h, h, bias, times=layers, module=f"self_attn.{name}")
    s.linear("text", "blocks", h, ffn, bias, times=layers, module="fc1")
    s.linear("text", "blocks", ffn, h, bias, times=layers, module="fc2")
    ln_bias = r.bool("layer_norm_elementwise_affine", default=True)
    s.add("text", "norms", (2 * h * 2 * layers) if ln_bias else 0)
    final = r.bool("do_layer_norm_before", default=True) and not r.bool("_remove_final_layer_norm", default=False)
    if final and ln_bias:
        s.add("text", "norms", 2 * h)
    activation = r.str("activation_function", default="relu")
    per_token = (2 * blocks.layer_norm(h) + blocks.linear_inputs(h, 3) + blocks.sdpa(h, h, heads)
                 + blocks.plain_mlp(h, ffn, activation) + 2 * blocks.dropout(h, r.number("dropout", default=0.1)))
    s.stacks.append(Stack("text", "decoder", layers, seq, h, per_token, kv_per_token=2 * blocks.BF16 * h))
    plain_mlp_adapters(s, "text", ffn, layers, activation, r.number("activation_dropout", default=0.0))
    _finish_head(s, r, vocab, proj, tied=tie_flag(r, True), bias=False, final_norm_saved=blocks.layer_norm(h))
    return s


BUILDERS = {
    "llama": llama, "mistral": mistral, "mixtral": mixtral, "qwen2": qwen2, "qwen2_moe": qwen2_moe,
    "qwen3": qwen3, "gemma": gemma, "gemma2": gemma2, "gemma3_text": gemma3_text, "phi3": phi3,
    "gpt2": gpt2, "gpt_neox": gpt_neox, "gptj": gptj, "bloom": bloom, "phi": phi, "starcoder2": starcoder2,
    "falcon": falcon, "opt": opt,
}
