"""Memory per training mode at batch 1, and the largest batch each card holds.

Every figure is static bytes (weights, gradients, optimizer state, the CUDA context allowance) plus
per-sample bytes (saved activations, the loss's transient logits, KV cache) times the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from .structure import Structure

GIB = 1024**3
CUDA_CONTEXT_BYTES = 600 * 1024**2   # per-process allowance: CUDA context, cuBLAS workspace, allocator slack
HEADROOM = 0.10                      # share of each card kept free (fragmentation, caching allocator)
LORA_RANK = 16
NF4_BYTES = 0.5 + 1 / 64 + 4 / (64 * 256)  # 4-bit weights, 8-bit absmax per 64, fp32 per 256 absmax (double quant)

CARDS = {  # marketed memory; H200's 141 GB is decimal
    "T4 16GB": 16 * GIB,
    "L4 24GB": 24 * GIB,
    "A10G 24GB": 24 * GIB,
    "A100 40GB": 40 * GIB,
    "A100 80GB": 80 * GIB,
    "H100 80GB": 80 * GIB,
    "H200 141GB": 141 * 10**9,
}


@dataclass(frozen=True)
class Mode:
    """One way to run the model: bytes that do not depend on the batch, and bytes per sample."""

    name: str
    static_bytes: int
    per_sample_bytes: int | None   # None: activations could not be derived (structure unknown)
    parts: dict

    def at_batch(self, batch: int) -> int | None:
        if self.per_sample_bytes is None:
            return None
        return self.static_bytes + batch * self.per_sample_bytes

    def max_batch(self, card_bytes: int) -> int | None:
        usable = int(card_bytes * (1 - HEADROOM)) - self.static_bytes
        if self.per_sample_bytes is None:
            return None
        if usable < self.per_sample_bytes:
            return 0
        return usable // max(self.per_sample_bytes, 1)


def activations(s: Structure, checkpointing: bool) -> float:
    """Saved-for-backward bytes per sample, all stacks; with checkpointing, layer inputs plus one layer."""
    if not checkpointing:
        return s.fixed_saved_per_sample + sum(st.layers * st.saved_per_sample() for st in s.stacks)
    kept = sum(st.layers * 4 * st.hidden * st.tokens for st in s.stacks)
    recompute = max((st.saved_per_sample() for st in s.stacks), default=0)
    return s.fixed_saved_per_sample + kept + recompute


def constant_saved(s: Structure, checkpointing: bool = False) -> int:
    """Saved bytes that do not grow with the batch (per-layer constants, shared masks); with checkpointing
    only the layer being recomputed holds its constants."""
    if checkpointing:
        per_layer = max((st.saved_per_layer for st in s.stacks), default=0)
    else:
        per_layer = sum(st.layers * st.saved_per_layer for st in s.stacks)
    return int(per_layer + s.fixed_saved_const)


def kv_cache(s: Structure) -> int:
    """bf16 KV cache per sample at the input's sequence length (self- and cross-attention)."""
    return int(sum(st.layers * (st.kv_per_token * st.tokens + st.cross_kv_per_token * st.cross_kv_tokens)
                   for st in s.stacks))


def modes(s: Structure | None, params: int) -> list[Mode]:
    """Inference, full fine-tune, LoRA and QLoRA, each with and without gradient checkpointing."""
    ctx = CUDA_CONTEXT_BYTES
    out = []
    if s is None:
        out.append(Mode("inference", 2 * params + ctx, None, {"weights_bf16": 2 * params, "cuda_context": ctx}))
        full = 16 * params + ctx
        out.append(Mode("full_finetune", full, None, {"weights_grads_adamw": 16 * params, "cuda_context": ctx}))
        return out
    workspace = max((st.saved_per_sample() for st in s.stacks), default=0) // 2
    out.append(Mode("inference", 2 * params + ctx, kv_cache(s) + int(workspace),
                    {"weights_bf16": 2 * params, "kv_cache_per_sample": kv_cache(s),
                     "workspace_per_sample": int(workspace), "cuda_context": ctx}))
    lora_params = LORA_RANK * s.lora_linear_dims
    for gc in (False, True):
        suffix = "_gc" if gc else ""
        const = constant_saved(s, gc)
        act = int(activations(s, gc))
        loss = int(s.loss_transient_per_sample)
        full_static = 16 * params + 2 * s.matmul_params + const + ctx
        out.append(Mode("full_finetune" + suffix, full_static, act + loss,
                        {"weights_fp32": 4 * params, "grads_fp32": 4 * params, "adamw_moments": 8 * params,
                         "autocast_weight_copies": 2 * s.matmul_params, "activations_per_sample": act,
                         "logits_and_loss_per_sample": loss, "cuda_context": ctx}))
        lora_static = 2 * params + 18 * lora_params + const + ctx
        out.append(Mode("lora" + suffix, lora_static, act + loss,
                        {"base_bf16": 2 * params, "adapters_fp32_grads_adamw": 16 * lora_params,
                         "adapter_bf16_copies": 2 * lora_params, "lora_rank": LORA_RANK,
                         "activations_per_sample": act, "logits_and_loss_per_sample": loss, "cuda_context": ctx}))
        base4 = int(NF4_BYTES * s.quantizable + 2 * (params - s.quantizable))
        dequant = 2 * s.largest_linear
        out.append(Mode("qlora" + suffix, base4 + 18 * lora_params + dequant + const + ctx, act + loss,
                        {"base_nf4": base4, "adapters_fp32_grads_adamw": 16 * lora_params,
                         "adapter_bf16_copies": 2 * lora_params, "dequantized_layer": dequant,
                         "activations_per_sample": act, "logits_and_loss_per_sample": loss, "cuda_context": ctx}))
    return out


def optimizer_step_peak(params: int) -> int:
    """Foreach AdamW holds about 20 bytes a parameter at the step (activations already freed)."""
    return 20 * params + CUDA_CONTEXT_BYTES


def cards(mode_list: list[Mode], params: int) -> dict:
    """Largest batch per card and mode; 0 where batch 1 does not fit, None where it cannot be derived."""
    out = {}
    for card, size in CARDS.items():
        row = {}
        for m in mode_list:
            batch = m.max_batch(size)
            if batch and m.name.startswith("full_finetune") and optimizer_step_peak(params) > size * (1 - HEADROOM):
                batch = 0
            row[m.name] = batch
        out[card] = {"memory_bytes": size, "usable_bytes": int(size * (1 - HEADROOM)), "max_batch": row}
    return out
