"""Pieces shared by the family builders: sequence length, heads, causal-LM loss, tying."""

from __future__ import annotations

from collections.abc import Sequence

from .. import blocks
from ..errors import EstimateError
from ..reader import ConfigReader
from ..structure import Structure

LOSS_TRANSIENT_PER_VOCAB = 10  # bf16 logits kept as output (2) + fp32 logits gradient (4) + softmax temp (4)


def sequence_length(r: ConfigReader, keys: Sequence[str], cap: int, s: Structure, default: int | None = None) -> int:
    """``max_position_embeddings`` (or the family's key) capped at ``cap``; recorded in the inputs."""
    for key in keys:
        if r.has(key):
            n = r.int(key, "positions")
            s.inputs["sequence_length"] = min(n, cap)
            s.inputs["sequence_source"] = f"{r.name(key)}={n} capped at {cap}" if n > cap else r.name(key)
            return min(n, cap)
    if default is not None:
        s.inputs["sequence_length"] = min(default, cap)
        s.inputs["sequence_source"] = f"transformers default {default} capped at {cap}"
        return min(default, cap)
    raise EstimateError(r.name(keys[0]), "missing (needed to derive the structure)")


def tie_flag(r: ConfigReader, default: bool) -> bool:
    """``tie_word_embeddings`` as the raw JSON says, else the family's transformers default."""
    return r.bool("tie_word_embeddings", default=default)


def causal_lm_head(s: Structure, r: ConfigReader, vocab: int, hidden: int, *, tied: bool, bias: bool = False,
                   final_norm_saved: float, name: str = "lm_head") -> None:
    softcap = r.has("final_logit_softcapping")  # tanh soft-capping keeps one more logits-sized tensor
    """The LM head (counted once when tied to the embeddings) and what its loss keeps per token."""
    if tied:
        s.tied_elements = max(s.tied_elements, vocab * hidden)
        s.tied.append(f"{name} shares the input embeddings ({vocab:,} x {hidden:,}, counted once)")
        if bias:
            s.add("head", "heads", vocab)
    else:
        s.add("head", "heads", vocab * hidden + (vocab if bias else 0))
    s.matmul_params += vocab * hidden
    tokens = s.inputs["sequence_length"]
    # final norm, the head's bf16 input, fp32 logits kept by log-softmax, token ids and labels (int64)
    per_token = final_norm_saved + blocks.BF16 * hidden + (blocks.FP32 + (blocks.BF16 if softcap else 0)) * vocab + 16
    s.fixed_saved_per_sample += per_token * tokens
    s.loss_transient_per_sample += LOSS_TRANSIENT_PER_VOCAB * vocab * tokens


def architecture(r: ConfigReader) -> str:
    archs = r.data.get("architectures")
    if archs is None:
        return ""
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise EstimateError(r.name("architectures"), f"expected a list of class names, got {archs!r}")
    return archs[0]
