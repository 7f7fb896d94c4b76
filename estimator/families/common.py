"""Pieces shared by the family builders: sequence length, heads, causal-LM loss, tying."""

from __future__ import annotations

from collections.abc import Sequence

from .. import blocks
from ..errors import EstimateError
from ..reader import ConfigReader
from ..structure import Structure

LOSS_TRANSIENT_PER_VOCAB = 8  # beside the kept fp32 log-softmax: its gradient and the logits' fp32 gradient
# A masked-LM head hands its bf16 logits to cross-entropy, which CUDA's autocast runs in fp32: measured on an H200
# (benchmarks/results) that loss's peak is 6 bytes a vocabulary entry beside the kept log-softmax, 2 fewer than the
# causal-LM loss's explicit fp32 upcast (the CPU harness keeps those 2 as well).
MLM_LOSS_TRANSIENT_PER_VOCAB = 6


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
    """The LM head (counted once when tied to the embeddings) and what its loss keeps per token."""
    softcap = r.has("final_logit_softcapping")  # tanh soft-capping keeps one more logits-sized tensor
    if tied:
        s.tied_elements = max(s.tied_elements, vocab * hidden)
        s.tied.append(f"{name} shares the input embeddings ({vocab:,} x {hidden:,}, counted once)")
        if bias:
            s.add("head", "heads", vocab)
    else:
        s.add("head", "heads", vocab * hidden + (vocab if bias else 0))
    tokens = s.inputs["sequence_length"]
    s.matmul("head", vocab * hidden, tokens)
    # final norm, the head's bf16 input, fp32 logits kept by log-softmax, token ids and labels (int64)
    per_token = final_norm_saved + blocks.BF16 * hidden + (blocks.FP32 + (blocks.BF16 if softcap else 0)) * vocab + 16
    s.fixed_saved_per_sample += per_token * tokens
    masked = s.architecture.endswith(("ForMaskedLM", "ForPreTraining"))  # a head read off weights may be one
    s.loss_transient_per_sample += (MLM_LOSS_TRANSIENT_PER_VOCAB if masked else LOSS_TRANSIENT_PER_VOCAB) * vocab * tokens


def plain_mlp_adapters(s: Structure, tower: str, inner: int, layers: int, activation: str,
                       act_dropout: float = 0.0) -> None:
    """What LoRA and QLoRA change in ``layers`` plain MLPs behind a LayerNorm (whose output is fp32): a ReLU's
    output, fc2's input in a full fine-tune, stays kept by the ReLU (unless a dropout sits between them); a 4-bit
    fc1 hands back its fp32 input's dtype, so the activation keeps an fp32 tensor where LoRA's keeps bf16."""
    if not act_dropout:
        kept = blocks.BF16 * inner * blocks.kept_by_activation(activation) * layers
        s.lora_kept[tower] = s.lora_kept.get(tower, 0) + kept
    s.qlora_extra[tower] = s.qlora_extra.get(tower, 0) + blocks.BF16 * inner * layers


def architecture(r: ConfigReader) -> str:
    archs = r.data.get("architectures")
    if archs is None:
        return ""
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise EstimateError(r.name("architectures"), f"expected a list of class names, got {archs!r}")
    return archs[0]
