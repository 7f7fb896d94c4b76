"""Graph builders for the decoder-only families whose blocks are not Llama's (graph_families.py has Llama's and
GPT-2's): GPT-NeoX, OPT, StarCoder2, Phi, GPT-J. Module paths, classes and call order are transformers' own
(checked against its models on the meta device, tests/estimator/test_estimator_graph.py)."""

from __future__ import annotations

from collections.abc import Callable

from . import graph_heads
from .graph_families import Built, _listed, _rotary_dim, _seq
from .graph_nodes import Block, Dims, Tower, activation, heads_divide, mul


def _start(d: Dims, family: str, prefix: str) -> tuple[str, str | None, list[str]]:
    """(module root, head, notes): a base model is the transformer itself; the causal LM's head or a task head from
    graph_heads' table; another head is named as not modelled."""
    return graph_heads.start(d, family, prefix, "ForCausalLM")


def _kv_divides(t: Tower, node: str, heads: int | None, kv: int | None) -> None:
    if heads and kv and heads % kv:
        t.fail(node, f"num_key_value_heads={kv} does not divide num_attention_heads={heads}: k and v cannot be "
                     "shared by the heads")


# ---- GPT-NeoX (Pythia) ---------------------------------------------------------------------------------------

def gpt_neox(d: Dims, cap: int) -> Built:
    root, head, notes = _start(d, "gpt_neox", "gpt_neox.")
    h, vocab, inter = d.int("hidden_size"), d.int("vocab_size"), d.int("intermediate_size")
    heads, layers = d.int("num_attention_heads"), d.int("num_hidden_layers")
    t = Tower("text", "input_ids", (), layers)
    seq = _seq(d, t, f"{root}embed_in", "max_position_embeddings", cap)
    t.input_shape = (seq,)
    d.require(t, f"{root}embed_in", "vocab_size", "hidden_size")
    t.add(f"{root}embed_in", "Embedding", (seq, h))
    t.add(f"{root}emb_dropout", "Dropout", (seq, h))
    d.require(t, f"{root}rotary_emb", "num_attention_heads")
    head_dim = h // heads if h and heads else None
    factor = d.raw("partial_rotary_factor", d.raw("rotary_pct", 0.25))
    t.add(f"{root}rotary_emb", "GPTNeoXRotaryEmbedding", (seq, _rotary_dim(Dims({"partial_rotary_factor": factor}),
                                                                          head_dim)))
    d.require(t, f"{root}layers", "num_hidden_layers")
    act = activation(d.str("hidden_act", "gelu"))
    b = Block(f"{root}layers")
    b.add("input_layernorm", "LayerNorm", (seq, h))
    b.add("attention.query_key_value", "Linear", (seq, mul(3, h)))
    b.add("attention.dense", "Linear", (seq, h))
    b.add("post_attention_dropout", "Dropout", (seq, h))
    b.add("post_attention_layernorm", "LayerNorm", (seq, h))  # on the block's input when parallel
    d.require(t, b.at("mlp.dense_h_to_4h"), "intermediate_size")
    b.add("mlp.dense_h_to_4h", "Linear", (seq, inter))
    b.add("mlp.act", act, (seq, inter))
    b.add("mlp.dense_4h_to_h", "Linear", (seq, h))
    b.add("post_mlp_dropout", "Dropout", (seq, h))
    b.stamp(t, _listed(t, layers, notes))
    t.add(f"{root}final_layer_norm", "LayerNorm", (seq, h))
    if head == "ForCausalLM":
        t.add("lm_head", "Linear", (seq, vocab))
    graph_heads.add(t, d, "gpt_neox", head, seq, h)
    return [t], notes


# ---- OPT -----------------------------------------------------------------------------------------------------

def opt(d: Dims, cap: int) -> Built:
    """OPT: learned positions (two reserved), an optional projection in and out when the word embedding is narrower
    than the model, pre-norm (125m and up) or post-norm (350m); the MLP runs on batch and tokens flattened into one
    dimension, so its nodes' shapes have no token axis."""
    root, head, notes = _start(d, "opt", "model.")
    root += "decoder."
    h, vocab, ffn = d.int("hidden_size"), d.int("vocab_size"), d.int("ffn_dim")
    heads, layers = d.int("num_attention_heads"), d.int("num_hidden_layers")
    word = d.int("word_embed_proj_dim", default=h)
    pre_norm = d.bool("do_layer_norm_before", True)
    t = Tower("text", "input_ids", (), layers)
    seq = _seq(d, t, f"{root}embed_tokens", "max_position_embeddings", cap)
    t.input_shape = (seq,)
    d.require(t, f"{root}embed_tokens", "vocab_size", "hidden_size")
    t.add(f"{root}embed_tokens", "Embedding", (seq, word))
    t.add(f"{root}embed_positions", "OPTLearnedPositionalEmbedding", (seq, h))
    if word != h:
        t.add(f"{root}project_in", "Linear", (seq, h))
    d.require(t, f"{root}layers", "num_hidden_layers")
    act = activation(d.str("activation_function", "relu"))
    b = Block(f"{root}layers")
    if pre_norm:
        b.add("self_attn_layer_norm", "LayerNorm", (seq, h))
    if d.require(t, b.at("self_attn.q_proj"), "num_attention_heads"):
        heads_divide(t, b.at("self_attn.q_proj"), h, heads)
    for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
        b.add(f"self_attn.{proj}", "Linear", (seq, h))
    if not pre_norm:
        b.add("self_attn_layer_norm", "LayerNorm", (seq, h))
    if pre_norm:
        b.add("final_layer_norm", "LayerNorm", (h,))
    d.require(t, b.at("fc1"), "ffn_dim")
    b.add("fc1", "Linear", (ffn,))
    b.add("activation_fn", act, (ffn,))
    b.add("fc2", "Linear", (h,))
    if not pre_norm:
        b.add("final_layer_norm", "LayerNorm", (seq, h))  # after the tokens are split out again
    b.stamp(t, _listed(t, layers, notes))
    if pre_norm and not d.bool("_remove_final_layer_norm", False):
        t.add(f"{root}final_layer_norm", "LayerNorm", (seq, h))
    if word != h:
        t.add(f"{root}project_out", "Linear", (seq, word))
    if head == "ForCausalLM":
        t.add("lm_head", "Linear", (seq, vocab))
    graph_heads.add(t, d, "opt", head, seq, word)
    return [t], notes


# ---- StarCoder2 and Phi: Llama's attention, a two-matrix MLP, LayerNorm -----------------------------------------

def _rotary_decoder(d: Dims, cap: int, family: str) -> Built:
    cls = {"starcoder2": "Starcoder2", "phi": "Phi"}[family]
    root, head, notes = _start(d, family, "model.")
    h, vocab, inter = d.int("hidden_size"), d.int("vocab_size"), d.int("intermediate_size")
    heads, layers = d.int("num_attention_heads"), d.int("num_hidden_layers")
    kv = d.int("num_key_value_heads", default=heads)
    hd = d.int("head_dim") or (h // heads if h and heads else None)
    phi = family == "phi"
    t = Tower("text", "input_ids", (), layers)
    seq = _seq(d, t, f"{root}embed_tokens", "max_position_embeddings", cap)
    t.input_shape = (seq,)
    d.require(t, f"{root}embed_tokens", "vocab_size", "hidden_size")
    t.add(f"{root}embed_tokens", "Embedding", (seq, h))
    if phi:
        t.add(f"{root}embed_dropout", "Dropout", (seq, h))
    d.require(t, f"{root}rotary_emb", "num_attention_heads")
    t.add(f"{root}rotary_emb", f"{cls}RotaryEmbedding", (seq, _rotary_dim(d, hd)))
    d.require(t, f"{root}layers", "num_hidden_layers")
    act = activation(d.str("hidden_act", "gelu_new" if phi else "gelu_pytorch_tanh"))
    fc_in, fc_out, act_name = ("fc1", "fc2", "activation_fn") if phi else ("c_fc", "c_proj", "act")
    b = Block(f"{root}layers")
    b.add("input_layernorm", "LayerNorm", (seq, h))
    b.add("self_attn.q_proj", "Linear", (seq, mul(heads, hd)))
    if d.require(t, b.at("self_attn.k_proj"), "num_key_value_heads", defaults={"num_key_value_heads": heads}):
        _kv_divides(t, b.at("self_attn.k_proj"), heads, kv)
    b.add("self_attn.k_proj", "Linear", (seq, mul(kv, hd)))
    b.add("self_attn.v_proj", "Linear", (seq, mul(kv, hd)))
    if phi and d.bool("qk_layernorm", False):  # per head, after the heads are split out
        b.add("self_attn.q_layernorm", "LayerNorm", (heads, seq, hd))
        b.add("self_attn.k_layernorm", "LayerNorm", (kv, seq, hd))
    b.add("self_attn.dense" if phi else "self_attn.o_proj", "Linear", (seq, h))
    if phi:  # parallel: the MLP reads the same normed input as the attention
        b.add("resid_dropout", "Dropout", (seq, h))
    else:
        b.add("post_attention_layernorm", "LayerNorm", (seq, h))
    d.require(t, b.at(f"mlp.{fc_in}"), "intermediate_size")
    b.add(f"mlp.{fc_in}", "Linear", (seq, inter))
    b.add(f"mlp.{act_name}", act, (seq, inter))
    b.add(f"mlp.{fc_out}", "Linear", (seq, h))
    if phi:
        b.add("resid_dropout", "Dropout", (seq, h))
    b.stamp(t, _listed(t, layers, notes))
    t.add(f"{root}{'final_layernorm' if phi else 'norm'}", "LayerNorm", (seq, h))
    if head == "ForCausalLM":
        t.add("lm_head", "Linear", (seq, vocab))
    graph_heads.add(t, d, family, head, seq, h)
    return [t], notes


# ---- GPT-J ---------------------------------------------------------------------------------------------------

def gptj(d: Dims, cap: int) -> Built:
    """GPT-J: GPT-2's names, separate q/k/v, rotary on the first rotary_dim of each head (the rotary module returns
    sin and cos of half that each), attention and MLP in parallel on one norm."""
    root, head, notes = _start(d, "gptj", "transformer.")
    h, vocab = d.int("n_embd", "hidden_size"), d.int("vocab_size")
    heads, layers = d.int("n_head", "num_attention_heads"), d.int("n_layer", "num_hidden_layers")
    inner = d.int("n_inner", default=mul(4, h))
    t = Tower("text", "input_ids", (), layers)
    seq = _seq(d, t, f"{root}wte", "n_positions", cap)
    t.input_shape = (seq,)
    d.require(t, f"{root}wte", "vocab_size", "n_embd")
    t.add(f"{root}wte", "Embedding", (seq, h))
    t.add(f"{root}drop", "Dropout", (seq, h))
    rotary = d.int("rotary_dim", default=h)
    t.add(f"{root}rotary_emb", "GPTJRotaryEmbedding", (seq, rotary // 2 if rotary else None))
    d.require(t, f"{root}h", "n_layer")
    act = activation(d.str("activation_function", "gelu_new"))
    b = Block(f"{root}h")
    b.add("ln_1", "LayerNorm", (seq, h))
    if d.require(t, b.at("attn.q_proj"), "n_head"):
        heads_divide(t, b.at("attn.q_proj"), h, heads, "n_embd")
    for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
        b.add(f"attn.{proj}", "Linear", (seq, h))
    b.add("attn.resid_dropout", "Dropout", (seq, h))
    b.add("mlp.fc_in", "Linear", (seq, inner))
    b.add("mlp.act", act, (seq, inner))
    b.add("mlp.fc_out", "Linear", (seq, h))
    b.add("mlp.dropout", "Dropout", (seq, h))
    b.stamp(t, _listed(t, layers, notes))
    t.add(f"{root}ln_f", "LayerNorm", (seq, h))
    if head == "ForCausalLM":
        t.add("lm_head", "Linear", (seq, vocab))
    graph_heads.add(t, d, "gptj", head, seq, h)
    return [t], notes


# ---- BLOOM and Falcon: fused qkv under `transformer.self_attention` --------------------------------------------

def _no_positions(d: Dims, cap: int) -> int | None:
    """BLOOM and Falcon have no position limit in the config (ALiBi, or rotary without one): the memory estimate's
    default length, capped."""
    positions = d.int("max_position_embeddings", "seq_length", default=2048)
    return min(positions, cap) if positions else None


def bloom(d: Dims, cap: int) -> Built:
    """BLOOM: ALiBi (no position module), a LayerNorm on the embeddings, the attention dropout module run on the
    probabilities (heads x tokens x tokens), a 4x MLP with BLOOM's own GELU."""
    root, head, notes = _start(d, "bloom", "transformer.")
    h, vocab = d.int("hidden_size", "n_embed"), d.int("vocab_size")
    heads, layers = d.int("n_head", "num_attention_heads"), d.int("n_layer", "num_hidden_layers")
    t = Tower("text", "input_ids", (), layers)
    seq = _no_positions(d, cap)
    t.input_shape = (seq,)
    d.require(t, f"{root}word_embeddings", "vocab_size", "hidden_size")
    t.add(f"{root}word_embeddings", "Embedding", (seq, h))
    t.add(f"{root}word_embeddings_layernorm", "LayerNorm", (seq, h))
    d.require(t, f"{root}h", "n_layer")
    b = Block(f"{root}h")
    b.add("input_layernorm", "LayerNorm", (seq, h))
    if d.require(t, b.at("self_attention.query_key_value"), "n_head"):
        heads_divide(t, b.at("self_attention.query_key_value"), h, heads)
    b.add("self_attention.query_key_value", "Linear", (seq, mul(3, h)))
    b.add("self_attention.attention_dropout", "Dropout", (heads, seq, seq))
    b.add("self_attention.dense", "Linear", (seq, h))
    b.add("post_attention_layernorm", "LayerNorm", (seq, h))
    b.add("mlp.dense_h_to_4h", "Linear", (seq, mul(4, h)))
    b.add("mlp.gelu_impl", "BloomGelu", (seq, mul(4, h)))
    b.add("mlp.dense_4h_to_h", "Linear", (seq, h))
    b.stamp(t, _listed(t, layers, notes))
    t.add(f"{root}ln_f", "LayerNorm", (seq, h))
    if head == "ForCausalLM":
        t.add("lm_head", "Linear", (seq, vocab))
    graph_heads.add(t, d, "bloom", head, seq, h)
    return [t], notes


def falcon(d: Dims, cap: int) -> Built:
    """Falcon: rotary (called even with ALiBi), one query-key-value projection sized by the layout (the new
    decoder's grouped k/v, multi-query's one k/v head, or full), one or two norms in front of a parallel block."""
    root, head, notes = _start(d, "falcon", "transformer.")
    h, vocab = d.int("hidden_size"), d.int("vocab_size")
    heads, layers = d.int("num_attention_heads", "n_head"), d.int("num_hidden_layers", "n_layer")
    hd = h // heads if h and heads else None
    new, parallel = d.bool("new_decoder_architecture", False), d.bool("parallel_attn", True)
    ffn = d.int("ffn_hidden_size", default=mul(4, h))
    if new:
        kv = d.int("num_kv_heads", default=heads)
        qkv = mul(hd, heads + 2 * kv) if heads and kv else None
    elif d.bool("multi_query", True):
        qkv = h + 2 * hd if h and hd else None
    else:
        qkv = mul(3, h)
    norms = d.int("num_ln_in_parallel_attn", default=2 if new else 1)
    t = Tower("text", "input_ids", (), layers)
    seq = _no_positions(d, cap)
    t.input_shape = (seq,)
    d.require(t, f"{root}word_embeddings", "vocab_size", "hidden_size")
    t.add(f"{root}word_embeddings", "Embedding", (seq, h))
    d.require(t, f"{root}rotary_emb", "num_attention_heads")
    t.add(f"{root}rotary_emb", "FalconRotaryEmbedding", (seq, hd))
    d.require(t, f"{root}h", "num_hidden_layers")
    act = activation(d.str("activation", "gelu"))
    b = Block(f"{root}h")
    if new and norms == 2:
        b.add("ln_attn", "LayerNorm", (seq, h))
        b.add("ln_mlp", "LayerNorm", (seq, h))
    else:
        b.add("input_layernorm", "LayerNorm", (seq, h))
    heads_divide(t, b.at("self_attention.query_key_value"), h, heads)
    # with ALiBi too: SDPA (the default attention) applies the dropout itself, so its module is not called
    b.add("self_attention.query_key_value", "FalconLinear", (seq, qkv))
    b.add("self_attention.dense", "FalconLinear", (seq, h))
    if not parallel:
        b.add("post_attention_layernorm", "LayerNorm", (seq, h))
    b.add("mlp.dense_h_to_4h", "FalconLinear", (seq, ffn))
    b.add("mlp.act", act, (seq, ffn))
    b.add("mlp.dense_4h_to_h", "FalconLinear", (seq, h))
    b.stamp(t, _listed(t, layers, notes))
    t.add(f"{root}ln_f", "LayerNorm", (seq, h))
    if head == "ForCausalLM":
        t.add("lm_head", "Linear", (seq, vocab))
    graph_heads.add(t, d, "falcon", head, seq, h)
    return [t], notes


BUILDERS: dict[str, Callable[[Dims, int], Built]] = {
    "gpt_neox": gpt_neox,
    "falcon": falcon,
    "bloom": bloom,
    "gptj": gptj,
    "phi": lambda d, cap: _rotary_decoder(d, cap, "phi"),
    "starcoder2": lambda d, cap: _rotary_decoder(d, cap, "starcoder2"),
    "opt": opt,
}
