"""Bytes saved for backward per token by each block kind, under bf16 autocast with SDPA.

The residual stream stays fp32 (embeddings and norms are not autocast); every matmul casts its input to
bf16 and saves that copy; SDPA saves q, k, v, its output and an fp32 log-sum-exp per head, never the score
matrix. Figures were read off transformers' own modules with ``saved_tensors_hooks`` (tests/estimator).
"""

from __future__ import annotations

BF16 = 2
FP32 = 4


def rms_norm(h: int) -> float:
    """RMSNorm in fp32: its input, the normalised input and one fp32 rsqrt per token."""
    return 2 * FP32 * h + FP32


def layer_norm(h: int, input_bytes: int = FP32) -> float:
    """LayerNorm: its input plus mean and rstd per token (in the input's precision)."""
    return input_bytes * h + 2 * input_bytes


def linear_inputs(d_in: int, count: int = 1) -> float:
    """``count`` linears reading one fp32 tensor: each saves its own bf16 cast of it."""
    return BF16 * d_in * count


def sdpa(q_dim: int, kv_dim: int, heads: int) -> float:
    """Fused attention: q, k, v and output in bf16 plus an fp32 log-sum-exp per head."""
    return BF16 * (2 * q_dim + 2 * kv_dim) + FP32 * heads


def gated_mlp(h: int, inner: int) -> float:
    """Gate and up read the same input (two casts); activation, product and down input are saved."""
    return linear_inputs(h, 2) + 4 * BF16 * inner


def plain_mlp(h: int, inner: int, activation: str) -> float:
    """fc1 input cast, the activation's saved tensors, fc2's input."""
    return linear_inputs(h) + activation_saved(activation) * BF16 * inner + BF16 * inner


def activation_saved(name: str) -> int:
    """Inner-width bf16 tensors an activation saves beyond fc2's input: ReLU none (its output is fc2's
    input), native GELU its input, the tanh and sigmoid composites their intermediates. GELU-new calls
    ``pow``, which CUDA's autocast runs in fp32: an fp32 copy of its input, fp32 tanh and 1 + tanh, and the
    bf16 half-input (14 bytes, 7 bf16 widths)."""
    if name == "gelu_new":
        return 7
    if name == "gelu_fast":
        return 4
    if name in ("quick_gelu",):
        return 2
    if name == "relu":
        return 0
    return 1


def kept_by_activation(name: str) -> int:
    """Inner-width bf16 tensors that ``plain_mlp`` counts once as fc2's input and that the activation keeps for
    itself too (ReLU's output): under LoRA fc2 no longer keeps it, but the activation still does."""
    return 1 if name == "relu" else 0


def eager_attention(heads: int, tokens: int, *, fp32_scores: int, bf16_scores: int) -> float:
    """Per-token share of eager attention's stored score matrices (``heads x tokens`` per token each)."""
    return heads * tokens * (FP32 * fp32_scores + BF16 * bf16_scores)


def dropout(width: int, p: float) -> float:
    """A training-mode dropout keeps a mask as wide as its input: one byte an element in CUDA's fused kernel."""
    return width if p > 0 else 0


def moe_router(experts: int) -> float:
    """Router logits and their fp32 softmax, per token."""
    return BF16 * experts + FP32 * experts * 2


def grouped_experts(h: int, inter: int, top_k: int, dtype_bytes: int = FP32) -> float:
    """Per token, what transformers' grouped-mm experts save over fp32 weights (a full fine-tune; grouped_mm is
    not autocast, so each gathered row runs in the weights' dtype): per active expert the gathered input, the
    fused gate-up output, the activation, the product (the down projection's input) and the down output that
    the routing weight multiplies."""
    return dtype_bytes * top_k * (2 * h + 4 * inter)
