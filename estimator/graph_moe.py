"""Graph builders for the mixture-of-experts decoders: Mixtral and Qwen2-MoE (Qwen1.5-MoE).

Llama's attention, then a sparse block on the tokens flattened into one axis (so its nodes' shapes have no token
axis): the router (``mlp.gate``, its logits per token over the experts), the experts as one module owning every
expert's stacked weights (``gate_up_proj``, ``down_proj``) and calling its activation once per expert that
receives tokens (listed once here: how many run depends on the routing), and for Qwen2-MoE a shared expert with
its sigmoid gate. Routing does not run on meta tensors, so the live check compares the module tree (names,
classes, stacked weights) and the forward up to the router; the shapes after it are checked by hand
(tests/estimator/test_estimator_graph.py)."""

from __future__ import annotations

from collections.abc import Callable

from .graph_families import Built, _arch, _is_base, _listed, _seq
from .graph_nodes import PARAMETER, Block, Dims, Tower, activation, mul

MOE = {"mixtral": "Mixtral", "qwen2_moe": "Qwen2Moe"}


def _sparse(d: Dims, family: str, i: int) -> bool:
    """Whether layer i's MLP is the sparse block (Qwen2-MoE can keep some layers dense)."""
    if family == "mixtral":
        return True
    only = d.raw("mlp_only_layers") or []
    step = d.int("decoder_sparse_step", default=1)
    return (d.int("num_experts") or 0) > 0 and i not in only and step is not None and (i + 1) % step == 0


def _moe(d: Dims, cap: int, family: str) -> Built:
    notes: list[str] = []
    cls = MOE[family]
    arch = _arch(d)
    causal = arch.endswith("ForCausalLM")
    if not causal and not _is_base(arch):
        notes.append(f"the head of {arch} is not modelled: the graph is the base model's")
    root = "" if _is_base(arch) else "model."
    h, vocab, inter = d.int("hidden_size"), d.int("vocab_size"), d.int("intermediate_size")
    heads, layers = d.int("num_attention_heads"), d.int("num_hidden_layers")
    kv = d.int("num_key_value_heads", default=heads)
    hd = d.int("head_dim") or (h // heads if h and heads else None)
    experts = d.int("num_local_experts" if family == "mixtral" else "num_experts")
    expert_inter = inter if family == "mixtral" else d.int("moe_intermediate_size")
    shared = d.int("shared_expert_intermediate_size")
    t = Tower("text", "input_ids", (), layers)
    seq = _seq(d, t, f"{root}embed_tokens", "max_position_embeddings", cap)
    t.input_shape = (seq,)
    d.require(t, f"{root}embed_tokens", "vocab_size", "hidden_size")
    t.add(f"{root}embed_tokens", "Embedding", (seq, h))
    d.require(t, f"{root}rotary_emb", "num_attention_heads")
    t.add(f"{root}rotary_emb", f"{cls}RotaryEmbedding", (seq, hd))
    d.require(t, f"{root}layers", "num_hidden_layers")
    norm, act = f"{cls}RMSNorm", activation(d.str("hidden_act", "silu"))
    dense, sparse = Block(f"{root}layers"), Block(f"{root}layers")
    for b in (dense, sparse):
        b.add("input_layernorm", norm, (seq, h))
        b.add("self_attn.q_proj", "Linear", (seq, mul(heads, hd)))
        b.add("self_attn.k_proj", "Linear", (seq, mul(kv, hd)))
        b.add("self_attn.v_proj", "Linear", (seq, mul(kv, hd)))
        b.add("self_attn.o_proj", "Linear", (seq, h))
        b.add("post_attention_layernorm", norm, (seq, h))
    if heads and kv and heads % kv:
        t.fail(dense.at("self_attn.k_proj"), f"num_key_value_heads={kv} does not divide num_attention_heads={heads}")
    for name, shape in (("gate_proj", inter), ("act_fn", inter), ("up_proj", inter), ("down_proj", h)):
        dense.add(f"mlp.{name}", act if name == "act_fn" else "Linear", (seq, shape))
    listed = _listed(t, layers, notes)
    first = next((i for i in listed if _sparse(d, family, i)), None)  # where the sparse block's keys are checked
    if family == "qwen2_moe":  # the shared expert runs first, on every token
        if first is not None:
            d.require(t, sparse.at("mlp.shared_expert.gate_proj", first), "shared_expert_intermediate_size")
        for name, shape in (("gate_proj", shared), ("act_fn", shared), ("up_proj", shared), ("down_proj", h)):
            sparse.add(f"mlp.shared_expert.{name}", act if name == "act_fn" else "Linear", (shape,))
    if first is not None:
        d.require(t, sparse.at("mlp.gate", first), "num_local_experts" if family == "mixtral" else "num_experts")
        d.require(t, sparse.at("mlp.experts", first),
                  "intermediate_size" if family == "mixtral" else "moe_intermediate_size")
    sparse.add("mlp.gate", f"{cls}TopKRouter", (experts,))
    sparse.add("mlp.experts.gate_up_proj", PARAMETER, (experts, mul(2, expert_inter), h))
    sparse.add("mlp.experts.down_proj", PARAMETER, (experts, h, expert_inter))
    sparse.add("mlp.experts.act_fn", act, (expert_inter,))  # once per expert that receives tokens
    if family == "qwen2_moe":
        sparse.add("mlp.shared_expert_gate", "Linear", (1,))
    for i in listed:
        (sparse if _sparse(d, family, i) else dense).stamp(t, range(i, i + 1))
    t.add(f"{root}norm", norm, (seq, h))
    if causal:
        t.add("lm_head", "Linear", (seq, vocab))
    return [t], notes


def _moe_family(family: str) -> Callable[[Dims, int], Built]:
    return lambda d, cap: _moe(d, cap, family)


BUILDERS: dict[str, Callable[[Dims, int], Built]] = {
    "mixtral": _moe_family("mixtral"),
    "qwen2_moe": _moe_family("qwen2_moe"),
}
