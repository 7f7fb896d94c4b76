"""Memory per training mode at batch 1, and the largest batch each card holds.

Every figure is static bytes (weights, gradients, optimizer state, the CUDA context allowance) plus
per-sample bytes (saved activations, the loss's transient logits, KV cache) times the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .blocks import BF16
from .structure import Structure, targeted

GIB = 1024**3
CUDA_CONTEXT_BYTES = 700 * 1024**2   # per process: CUDA context + cuBLAS handles (685 MiB measured on an H200, CUDA 13)
HEADROOM = 0.10                      # share of each card kept free (fragmentation, caching allocator)
LORA_RANK = 16                       # PEFT's rank unless the caller chooses another
LORA_TARGETS = "all-linear"          # PEFT's every linear layer but the head, unless named modules are chosen
BORDERLINE = 0.10                    # a peak within 10% of a card's usable bytes: the estimate cannot call it
LORA_DROPOUT_INPUT_BYTES = 1         # an adapter's input: CUDA's 1-byte dropout mask (its bf16 cast replaces the base's)
LOSS_FORWARD_SHARE = 0.75            # the forward's share of the loss's transient: bf16 logits and their fp32
                                     # copy (6 bytes a vocab entry) against backward's two fp32 gradients (8)
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
class Phase:
    """One phase of a training step (or of a forward): bytes live at its peak, fixed plus per sample."""

    static_bytes: int
    per_sample_bytes: int | None   # None: activations could not be derived (structure unknown)

    def at_batch(self, batch: int) -> int | None:
        return None if self.per_sample_bytes is None else self.static_bytes + batch * self.per_sample_bytes


@dataclass(frozen=True)
class Mode:
    """One way to run the model: the peak of each phase; the step's peak is the largest of them.

    ``at_batch`` and ``max_batch`` read the same phases, so the largest batch a card holds is exactly the
    largest batch whose peak fits the card less its headroom.
    """

    name: str
    phases: dict[str, Phase]
    parts: dict

    @property
    def static_bytes(self) -> int:
        """The fixed bytes of the phase that binds as the batch grows (the largest per-sample phase)."""
        return self._binding().static_bytes

    @property
    def per_sample_bytes(self) -> int | None:
        return self._binding().per_sample_bytes

    def _binding(self) -> Phase:
        unknown = [p for p in self.phases.values() if p.per_sample_bytes is None]
        if unknown:
            return unknown[0]
        return max(self.phases.values(), key=lambda p: (p.per_sample_bytes or 0, p.static_bytes))

    def at_batch(self, batch: int) -> int | None:
        """The step's peak at ``batch``: the largest phase peak; None when activations are unknown."""
        peaks = [p.at_batch(batch) for p in self.phases.values()]
        return None if None in peaks else max(peaks)  # type: ignore[type-var]

    def peak_phase(self, batch: int) -> str | None:
        peaks = {name: p.at_batch(batch) for name, p in self.phases.items()}
        if None in peaks.values():
            return None
        return max(peaks, key=lambda name: peaks[name])  # type: ignore[arg-type, return-value]

    def phase_peaks(self, batch: int) -> dict[str, int | None]:
        """Peak per phase at ``batch`` as a step sees it: forward, backward (the larger of its start and its
        end), optimizer."""
        peaks = {name: p.at_batch(batch) for name, p in self.phases.items()}
        if "backward_end" in peaks:
            end, fwd = peaks.pop("backward_end"), peaks["forward"]
            start = peaks.pop("backward_start", fwd)
            peaks = {"forward": fwd, "backward": None if start is None else max(start, end),  # type: ignore[type-var]
                     "optimizer": peaks["optimizer"]}
        return peaks

    def floor_bytes(self) -> int:
        """What the step needs whatever the batch (weights, optimizer state): known even without activations."""
        return max(p.static_bytes for p in self.phases.values())

    def max_batch(self, card_bytes: int) -> int | None:
        """The largest batch whose peak fits ``card_bytes`` less the headroom; 0 when batch 1 does not, None
        when activations are unknown and the fixed bytes alone fit."""
        usable = int(card_bytes * (1 - HEADROOM))
        if self.floor_bytes() > usable:
            return 0
        limits = []
        for p in self.phases.values():
            if p.per_sample_bytes is None:
                return None
            if p.per_sample_bytes > 0:
                limits.append((usable - p.static_bytes) // p.per_sample_bytes)
        return max(0, min(limits)) if limits else None

    def verdict(self, card_bytes: int, batch: int = 1) -> str:
        """fits / borderline / does_not_fit at ``batch``; borderline within BORDERLINE of the usable bytes.

        Unknown activations: does_not_fit when the fixed bytes alone pass the borderline band, else
        activations_unknown.
        """
        usable = card_bytes * (1 - HEADROOM)
        peak = self.at_batch(batch)
        if peak is None:
            return "does_not_fit" if self.floor_bytes() > usable * (1 + BORDERLINE) else "activations_unknown"
        if peak > usable * (1 + BORDERLINE):
            return "does_not_fit"
        if peak >= usable * (1 - BORDERLINE):
            return "borderline"
        return "fits"


def activations(s: Structure, checkpointing: bool, stream_bytes: int = 4) -> float:
    """Saved-for-backward bytes per sample, all stacks, as the step's peak sees them beside the loss's transient.

    With checkpointing: every layer's input (``stream_bytes`` an element: fp32 for a full fine-tune, bf16 over a
    LoRA base), and the larger of the two moments backward passes through: the head, whose fixed saved bytes
    and the loss's transient are live together, and a recomputed layer, which comes once the head's backward
    has freed both. The figure is what remains once the loss's transient is added back."""
    if not checkpointing:
        return s.fixed_saved_per_sample + sum(st.layers * st.saved_per_sample() for st in s.stacks)
    kept = sum(st.layers * stream_bytes * st.hidden * st.tokens for st in s.stacks)
    recompute = max((st.saved_per_sample() for st in s.stacks), default=0)
    head = s.fixed_saved_per_sample + s.loss_transient_per_sample
    return kept + max(head, recompute) - s.loss_transient_per_sample


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


def lora_activations(s: Structure, roles: list[str] | None = None, rank: int = LORA_RANK) -> int:
    """Per sample, what PEFT's adapters of ``rank`` (on the linears of ``roles``; every one when None) change in
    full fine-tuning's activations: an adapted linear's input keeps a 1-byte dropout mask beside the bf16 copy A
    reads (which replaces the frozen base's own copy), and B keeps A's bf16 output (2 x rank bytes a token); a
    frozen linear left unadapted keeps no input at all; norms whose weights no longer train stop keeping their
    normalised input. Can be negative."""
    chosen = [s.lora_roles[role] for role in (s.lora_roles if roles is None else roles)]
    extra = 0
    for tower in {*s.lora_inputs, *s.lora_frozen, *s.lora_kept}:
        tokens = _tokens(s, tower)
        adapted = sum(lin.inputs.get(tower, 0) for lin in chosen)
        adapters = sum(lin.count.get(tower, 0) for lin in chosen)
        frozen = s.lora_inputs.get(tower, 0) - adapted
        extra += (LORA_DROPOUT_INPUT_BYTES * adapted + BF16 * rank * adapters - BF16 * frozen
                  - s.lora_frozen.get(tower, 0) + s.lora_kept.get(tower, 0)) * tokens
    return int(extra)


def qlora_activations(s: Structure) -> int:
    """Per sample, what QLoRA's 4-bit linears add to LoRA's activations: they return their input's dtype, so a
    LayerNorm's fp32 output makes the MLP's activation keep fp32 tensors."""
    return int(sum(per_token * _tokens(s, tower) for tower, per_token in s.qlora_extra.items()))


def _tokens(s: Structure, tower: str) -> int:
    return max((st.tokens for st in s.stacks if st.tower == tower), default=0)


def held_inputs(s: Structure | None) -> int:
    """Per sample, the fp32 image or audio features the batch holds from the forward to the optimizer step's end
    (token ids are negligible): what stays batch-dependent once the activations are freed."""
    if s is None:
        return 0
    held = 0
    vision = s.inputs.get("vision")
    if isinstance(vision, dict) and {"channels", "image_size"} <= vision.keys():
        held += 4 * vision["channels"] * vision["image_size"] ** 2
    if "mel_bins" in s.inputs and "audio_frames" in s.inputs:
        held += 4 * s.inputs["mel_bins"] * s.inputs["audio_frames"]
    return held


def _training(resident: int, copies: int, grads: int, grad_transient: int, const: int, act: int | None,
              loss: int, optimizer: int, kept_copies: int | None = None, held: int = 0) -> dict[str, Phase]:
    """forward: resident + weight copies + saved activations + the loss's bf16 logits and their fp32 copy;
    backward_start: the same but with the loss's two fp32 gradients in their place; backward_end: every
    gradient, plus the sum a tied head's two gradients make; optimizer: weights, gradients, moments and foreach
    AdamW's temporary.

    With checkpointing (``kept_copies`` given) autocast's weight copies die with the forward, except those saved
    outside the checkpointed layers (``kept_copies``: the head's), so backward starts without them.

    Every phase also holds the batch's image or audio input (``held`` per sample)."""
    fwd = None if act is None else act + int(LOSS_FORWARD_SHARE * loss) + held
    per = None if act is None else act + loss + held
    return {"forward": Phase(resident + copies + const, fwd),
            "backward_start": Phase(resident + (copies if kept_copies is None else kept_copies) + const, per),
            "backward_end": Phase(resident + grads + grad_transient, held),
            "optimizer": Phase(optimizer, held)}


def modes(s: Structure | None, params: int, counted_linear: tuple[int, int, int] | None = None, *,
          rank: int = LORA_RANK, targets: str | Sequence[str] = LORA_TARGETS) -> list[Mode]:
    """Inference, full fine-tune, LoRA and QLoRA, each with and without gradient checkpointing; LoRA of ``rank``
    on the linears PEFT's ``targets`` names (QLoRA quantizes every block linear whatever the targets).

    Without a structure (custom code, unknown architecture) every mode still gets its fixed bytes, with the
    LoRA targets read from the manifest's 2-D weights (``counted_linear``: the targeted weights' dims, every
    block weight's elements, the largest), and activations unknown.
    """
    ctx = CUDA_CONTEXT_BYTES
    roles = None
    if s is None:
        dims, linear_params, largest = counted_linear or (0, 0, 0)
        matmul, tied = linear_params, 0
    else:
        roles = targeted(s.lora_roles, targets)
        dims = sum(s.lora_roles[role].dims for role in roles)
        linear_params, largest = s.quantizable, s.largest_linear
        matmul, tied = s.matmul_params, s.tied_elements
    lora_params = rank * dims
    out = []
    if s is None:
        out.append(Mode("inference", {"forward": Phase(2 * params + ctx, None)},
                        {"weights_bf16": 2 * params, "cuda_context": ctx}))
    else:
        workspace = int(max((st.saved_per_sample() for st in s.stacks), default=0) // 2)
        out.append(Mode("inference", {"forward": Phase(2 * params + ctx, kv_cache(s) + workspace)},
                        {"weights_bf16": 2 * params, "kv_cache_per_sample": kv_cache(s),
                         "workspace_per_sample": workspace, "cuda_context": ctx}))
    for gc in (False, True):
        suffix = "_gc" if gc else ""
        const = constant_saved(s, gc) if s else 0
        act = int(activations(s, gc)) if s else None
        # a LoRA base is bf16, so a checkpointed layer's kept input is too
        lora_act = None if s is None else (int(activations(s, True, 2)) if gc
                                           else act + lora_activations(s, roles, rank))  # type: ignore[operator]
        qlora_act = None if s is None or lora_act is None else lora_act + (0 if gc else qlora_activations(s))
        loss = int(s.loss_transient_per_sample) if s else 0
        held = held_inputs(s)
        full_resident = 12 * params + ctx
        # with checkpointing, backward starts with the copies of weights used outside the checkpointed layers
        outside = 2 * (matmul - (s.quantizable if s else 0))
        out.append(Mode("full_finetune" + suffix, _training(
            full_resident, 2 * matmul, 4 * params, 8 * tied + 2 * largest, const, act, loss,
            20 * params + ctx, outside if gc else None, held),
            {"weights_fp32": 4 * params, "grads_fp32": 4 * params, "adamw_moments": 8 * params,
             "adamw_step_temporary": 4 * params, "autocast_weight_copies": 2 * matmul,
             "activations_per_sample": act, "logits_and_loss_per_sample": loss, "cuda_context": ctx}))
        adapters = 12 * lora_params  # fp32 adapters and their two moments
        out.append(Mode("lora" + suffix, _training(
            2 * params + adapters + ctx, 2 * lora_params, 4 * lora_params, 0, const, lora_act, loss,
            2 * params + 20 * lora_params + ctx, 0 if gc else None, held),
            {"base_bf16": 2 * params, "adapters_fp32_grads_adamw": 16 * lora_params,
             "adamw_step_temporary": 4 * lora_params, "adapter_bf16_copies": 2 * lora_params,
             "lora_rank": rank, "lora_targets": _targets_json(targets), "activations_per_sample": lora_act,
             "logits_and_loss_per_sample": loss, "cuda_context": ctx}))
        base4 = int(NF4_BYTES * linear_params + 2 * (params - linear_params))
        dequant = 2 * largest
        out.append(Mode("qlora" + suffix, _training(
            base4 + adapters + ctx, 2 * lora_params + dequant, 4 * lora_params, 0, const, qlora_act,
            loss, base4 + 20 * lora_params + ctx, dequant if gc else None, held),
            {"base_nf4": base4, "adapters_fp32_grads_adamw": 16 * lora_params,
             "adamw_step_temporary": 4 * lora_params, "adapter_bf16_copies": 2 * lora_params,
             "dequantized_layer": dequant, "lora_rank": rank, "lora_targets": _targets_json(targets),
             "activations_per_sample": qlora_act, "logits_and_loss_per_sample": loss, "cuda_context": ctx}))
    return out


def _targets_json(targets: str | Sequence[str]) -> str | list[str]:
    """Targets as stored: "all-linear" or the list of module names."""
    return targets if isinstance(targets, str) else list(targets)


def cards(mode_list: list[Mode]) -> dict:
    """Per card: the largest batch per mode (0 where batch 1 does not fit, None where it cannot be derived)
    and the verdict at batch 1 (fits / borderline / does_not_fit / activations_unknown)."""
    out = {}
    for card, size in CARDS.items():
        out[card] = {"memory_bytes": size, "usable_bytes": int(size * (1 - HEADROOM)),
                     "max_batch": {m.name: m.max_batch(size) for m in mode_list},
                     "verdict_batch_1": {m.name: m.verdict(size) for m in mode_list}}
    return out


def at_batch(result: dict, mode: str, batch: int) -> dict:
    """A stored estimate (``Estimate.to_dict()``) answered at any batch: the peak, its phase, and each phase.

    Reads the same phases the cards were sized from, so ``peak_bytes`` at a card's ``max_batch`` fits it.
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive integer, got {batch!r}")
    stored = result["memory"][mode]["phases"]
    m = Mode(mode, {name: Phase(p["static_bytes"], p["per_sample_bytes"]) for name, p in stored.items()}, {})
    return {"mode": mode, "batch": batch, "peak_bytes": m.at_batch(batch), "peak_phase": m.peak_phase(batch),
            "phase_peaks": m.phase_peaks(batch)}
