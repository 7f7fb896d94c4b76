"""estimate(config, manifest) -> Estimate: the one entry point."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from . import cost as costing
from . import memory, serving
from .cards import Card
from .errors import EstimateError
from .families import BUILDERS
from .from_weights import structure_from_weights
from .manifest import ManifestCount, count_manifest
from .reader import ConfigReader
from .result import Estimate
from .split import SPLIT_TEXT, two_card_splits
from .structure import Structure, targeted

DTYPE_NAMES = {"bfloat16": "BF16", "float16": "F16", "float32": "F32", "float64": "F64", "half": "F16",
               "float": "F32"}
MAX_PARAMETERS = 10**14
MAX_LORA_RANK = 4096


def estimate(config: dict, manifest: dict | None = None, *, seq_len_cap: int = 2048, lora_rank: int = memory.LORA_RANK,
             lora_targets: str | Sequence[str] = memory.LORA_TARGETS, serve_contexts: Sequence[int] = (),
             kv_dtype: str | None = None, gpu_memory_utilization: float = serving.GPU_MEMORY_UTILIZATION,
             weights_from: str = "safetensors headers", cost: costing.Workload | None = None,
             cards: Mapping[str, Card] | None = None) -> Estimate:
    """Parameters, input shape, memory per mode and batches per card for one revision; LoRA and QLoRA with
    adapters of ``lora_rank`` on ``lora_targets`` ("all-linear", or module names as PEFT's target_modules).

    Bad input raises EstimateError naming the key; custom code without a manifest returns an estimate
    whose note says the structure cannot be derived, with no figures rather than guessed ones.

    ``serving`` holds serving memory per card (serving.py) at 8k, 32k, the model's full context and
    ``serve_contexts``, with the KV cache at ``kv_dtype`` (the model's dtype by default); ``weights_from`` names
    the headers the manifest was read from (a GGUF's: gguf_inputs.py).

    With a ``cost`` workload, ``cost`` holds training hours and USD per card and serving tokens/s and USD per
    million tokens (cost.py), on ``cards`` (cards.py's table by default).
    """
    if isinstance(seq_len_cap, bool) or not isinstance(seq_len_cap, int) or not 1 <= seq_len_cap <= 10**7:
        raise EstimateError("seq_len_cap", f"expected a positive integer, got {seq_len_cap!r}")
    lora = (_lora_rank(lora_rank), _lora_targets(lora_targets))
    reader = ConfigReader(config, "")
    counted = count_manifest(manifest, audio_encoder=config.get("model_type") == "whisper") \
        if manifest is not None else None
    notes: list[str] = []
    structure = _derive(reader, seq_len_cap, counted, notes, manifest)
    result = _assemble(reader, structure, counted, notes, seq_len_cap, lora)
    from_weights = structure is not None and structure.inputs.get("structure_source") == "weights"
    linear = structure.quantizable if structure is not None and not from_weights else \
        (counted.linear_params if counted else None)
    result.serving = serving.serving(config, parameters=result.total, linear=linear,
                                     stored_bytes=counted.stored_bytes if counted else None,
                                     contexts=serve_contexts, kv_dtype=kv_dtype,
                                     gpu_memory_utilization=gpu_memory_utilization, stored_from=weights_from)
    if cost is not None:
        roles = targeted(structure.lora_roles, lora[1]) if structure is not None else None
        result.cost = costing.cost(config, structure, result.total, result.memory, result.cards, result.serving,
                                   workload=cost, table=cards, rank=lora[0], roles=roles)
    return result


def _lora_rank(rank: object) -> int:
    if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= MAX_LORA_RANK:
        raise EstimateError("lora_rank", f"expected an integer from 1 to {MAX_LORA_RANK}, got {rank!r}")
    return rank


def _lora_targets(targets: object) -> str | tuple[str, ...]:
    """"all-linear", or a non-empty list of module names (a tuple, so that the estimate cannot change it)."""
    if targets == "all-linear":
        return "all-linear"
    if (not isinstance(targets, (list, tuple)) or not targets
            or not all(isinstance(t, str) and t.strip() for t in targets)):
        raise EstimateError("lora_targets", f'expected "all-linear" or a non-empty list of module names, '
                                            f"got {targets!r}")
    return tuple(t.strip() for t in targets)


def _derive(r: ConfigReader, cap: int, counted: ManifestCount | None, notes: list[str],
            manifest: dict | None = None) -> Structure | None:
    """The family builder's structure; for custom code or an unmodelled architecture, the one the weight
    manifest implies (or None, with the reason in the notes)."""
    auto_map = r.data.get("auto_map")
    if auto_map is not None:
        classes = ", ".join(sorted(str(v) for v in auto_map.values())) if isinstance(auto_map, dict) else auto_map
        source = ("counted from the weight manifest" if counted
                  else "no weight manifest was given, so nothing is counted")
        notes.append(f"custom code (auto_map: {classes}): the repo builds its own model, so the structure cannot "
                     f"be derived from config.json; {source}")
        return _from_weights(r, cap, counted, notes, manifest)
    model_type = r.data.get("model_type")
    if model_type is None:
        if counted is None:
            raise EstimateError("model_type", "missing: the architecture cannot be identified")
        notes.append("model_type is missing: the structure cannot be derived; counted from the weight manifest")
        return _from_weights(r, cap, counted, notes, manifest)
    if not isinstance(model_type, str):
        raise EstimateError("model_type", f"expected a string, got {model_type!r}")
    builder = BUILDERS.get(model_type)
    if builder is None:
        if counted is None:
            raise EstimateError("model_type", f"{model_type!r} is not a modelled architecture "
                                              f"(modelled: {', '.join(sorted(BUILDERS))})")
        notes.append(f"model_type {model_type!r} is not modelled: the structure cannot be derived; "
                     "counted from the weight manifest")
        return _from_weights(r, cap, counted, notes, manifest)
    structure = builder(r, cap)
    if structure.total > MAX_PARAMETERS:
        raise EstimateError("config", f"derives {structure.total:,} parameters, beyond any real model")
    return structure


def _from_weights(r: ConfigReader, cap: int, counted: ManifestCount | None, notes: list[str],
                  manifest: dict | None) -> Structure | None:
    if counted is None or manifest is None:
        return None
    structure, reason = structure_from_weights(r.data, manifest, counted, cap)
    if structure is None:
        notes.append(f"activations unknown: {reason}; only weight and optimizer memory is given (LoRA targets "
                     "read from the manifest's 2-D weights); a card is ruled out only when those alone do not fit")
    return structure


def _assemble(r: ConfigReader, s: Structure | None, counted: ManifestCount | None, notes: list[str],
              cap: int, lora: tuple[int, str | tuple[str, ...]] = (memory.LORA_RANK, memory.LORA_TARGETS)) -> Estimate:
    warnings: list[str] = []
    from_weights = s is not None and s.inputs.get("structure_source") == "weights"
    derived = s.total if s and not from_weights else None
    checkpoint = counted.parameters if counted else None
    used = "checkpoint" if from_weights else _choose(s, counted, warnings, notes)
    total = derived if used == "derived" else checkpoint
    params = {
        "total": total,
        "derived": derived,
        "checkpoint": checkpoint,
        "by_tower": (s.by_tower() if used == "derived" or from_weights  # type: ignore[union-attr]
                     else dict(sorted(counted.by_tower.items()))) if used else {},
        "by_component": s.by_component() if s else {},
        "by_dtype": _by_dtype(r, counted, total, notes),
        "delta": _delta(derived, checkpoint),
        "used": used,
    }
    if counted:
        params["checkpoint_detail"] = {"tensors": counted.tensors, "stored_bytes": counted.stored_bytes,
                                       "buffers": counted.buffers, "integer_elements": counted.integer,
                                       "quantized": counted.quantized}
    if s:
        notes.extend(s.tied)
        notes.extend(s.notes)
        warnings.extend(s.warnings)
        notes.extend(f"default applied: {d}" for d in r.defaulted)
    inputs = {"batch": 1, "seq_len_cap": cap, **(s.inputs if s else {})}
    if total is None:
        return Estimate(params, inputs, {}, {}, notes, warnings)
    rank, targets = lora
    linear = (_counted_lora_dims(counted, targets), counted.linear_params, counted.largest_linear) \
        if counted and not s else None
    modes = memory.modes(s, total, linear, rank=rank, targets=targets)
    mem = {m.name: _mode_dict(m) for m in modes}
    mem["assumptions"] = {
        "cuda_context_bytes": memory.CUDA_CONTEXT_BYTES,
        "headroom_fraction": memory.HEADROOM,
        "borderline_fraction": memory.BORDERLINE,
        "lora_rank": rank,
        "lora_targets": targets if isinstance(targets, str) else list(targets),
        "text": "bf16 autocast, AdamW (fp32 master weights, fp32 grads, two fp32 moments), SDPA without a "
                "stored score matrix, " + _lora_text(rank, targets) + " with a frozen bf16 base, "
                "QLoRA on an NF4 base with double quantization; the step's peak is the largest of its phases (forward "
                "with the saved activations and the loss's logits, the start of backward with the logits' gradients, the "
                "end of backward with every gradient, with checkpointing the recomputed layer once the head's backward "
                "is done, the "
                "foreach AdamW step with a temporary the size of the moments); a per-process allowance for the CUDA context; "
                "inference: bf16 weights, bf16 KV cache at the input length and a transient workspace of half "
                "one layer's training activations; activations as measured on transformers' modules under "
                "bf16 autocast with CUDA's rules (1-byte dropout masks, CUDA autocast's fp32 ops; tests/estimator, "
                "checked against steps measured on an H200); LoRA as PEFT builds it (dropout on the "
                "adapter input, fp32 adapters): full fine-tuning's activations plus a 1-byte mask per adapter input, "
                "less the inputs of frozen linears left unadapted and the normalised "
                "inputs that frozen norm weights no longer keep; checkpointed LoRA layers keep bf16 inputs; "
                "a verdict is borderline when the peak is within the borderline fraction of the usable bytes",
    }
    if s is None and not any(note.startswith("activations unknown") for note in notes):
        notes.append("activations unknown: they need the structure, so only weight and optimizer memory is given "
                     "(LoRA targets read from the manifest's 2-D weights); a card is ruled out only when those "
                     "alone do not fit")
    result = Estimate(params, inputs, mem, memory.cards(modes), notes, warnings)
    splits = two_card_splits(None if from_weights else s, modes, result.cards)
    if splits:
        result.split = {"text": SPLIT_TEXT, "cards": splits}
    return result


def _lora_text(rank: int, targets: str | tuple[str, ...]) -> str:
    """The LoRA assumed, in words."""
    where = "every linear layer but the head" if targets == "all-linear" else "the " + ", ".join(targets) + " linears"
    return f"LoRA r={rank} on {where}"


def _counted_lora_dims(counted: ManifestCount, targets: str | tuple[str, ...]) -> int:
    """Sum of (in + out) over the manifest's 2-D block weights that ``targets`` adapts."""
    if targets == "all-linear":
        return counted.linear_dims
    return sum(counted.role_dims[role] for role in targeted(counted.role_dims, targets))


def _mode_dict(m: memory.Mode) -> dict:
    """One mode as stored: batch-1 peak, the binding phase's fixed and per-sample bytes, every phase."""
    return {"batch_1_bytes": m.at_batch(1), "static_bytes": m.static_bytes, "per_sample_bytes": m.per_sample_bytes,
            "parts": m.parts, "floor_bytes": m.floor_bytes(), "peak_phase_batch_1": m.peak_phase(1),
            "phases": {name: {"static_bytes": p.static_bytes, "per_sample_bytes": p.per_sample_bytes}
                       for name, p in m.phases.items()},
            "phase_peaks_batch_1": m.phase_peaks(1)}


def _choose(s: Structure | None, counted: ManifestCount | None, warnings: list[str], notes: list[str]) -> str | None:
    if s is None:
        return "checkpoint" if counted else None
    if counted is None:
        return "derived"
    if counted.quantized:
        notes.append("the checkpoint is quantized or packed: its element count is not a parameter count, "
                     "so the memory figures use the derived count")
        return "derived"
    if counted.parameters != s.total:
        delta = counted.parameters - s.total
        warnings.append(f"config does not match the checkpoint: derived {s.total:,}, checkpoint "
                        f"{counted.parameters:,} ({delta:+,}, {100 * delta / s.total:+.2f}%); "
                        "the memory figures use the checkpoint")
        return "checkpoint"
    return "derived"


def _delta(derived: int | None, checkpoint: int | None) -> dict | None:
    if derived is None or checkpoint is None:
        return None
    diff = checkpoint - derived
    return {"parameters": diff, "percent": round(100 * diff / derived, 4) if derived else None}


def _by_dtype(r: ConfigReader, counted: ManifestCount | None, total: int | None, notes: list[str]) -> dict:
    if counted:
        return dict(sorted(counted.by_dtype.items()))
    if total is None:
        return {}
    declared = r.data.get("torch_dtype") or r.data.get("dtype")
    if declared is None:
        notes.append("by_dtype: no manifest and no torch_dtype in config.json, so the dtype is unknown")
        return {}
    name = DTYPE_NAMES.get(str(declared))
    if name is None:
        raise EstimateError("torch_dtype", f"unknown dtype {declared!r}")
    notes.append(f"by_dtype: from the declared torch_dtype {declared} (no manifest)")
    return {name: total}
