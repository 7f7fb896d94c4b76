"""Counting a revision's weight manifest (tensor name -> (safetensors dtype, shape)) by tower and dtype."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .errors import EstimateError
from .ggml_types import GGML_TYPES_BY_NAME, QUANTIZED

FLOAT_DTYPES = {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4"}
INT_DTYPES = {"I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL", "C64"}

# Buffers that some checkpoints store beside the parameters; never part of a parameter count.
BUFFER_NAMES = re.compile(r"(^|\.)(position_ids|inv_freq|masked_bias|final_logits_bias|attn\.bias)$")
# Packed or quantized storage: element counts are not parameter counts.
QUANT_NAMES = re.compile(r"\.(qweight|qzeros|scales|g_idx|absmax|quant_map|nested_absmax|nested_quant_map|"
                         r"quant_state\.[\w]+|weight_scale|weight_scale_inv|input_scale|SCB|weight_format)$")

# 2-D weights that are lookup tables, not linear layers (LoRA on "every linear layer" skips them).
EMBEDDING_NAMES = re.compile(r"(embed|wte|wpe|(^|\.)shared\.|relative_attention_bias|position_embedding)")

TOWER_RULES = (
    ("projection", re.compile(r"(^|\.)(visual_projection|text_projection|multi_modal_projector|logit_scale|"
                              r"logit_bias|mm_projector|vision_proj|text_proj)(\.|$)")),
    ("vision", re.compile(r"(^|\.)(vision_model|vision_tower|visual|vision_encoder|vision)(\.|$)")),
    ("audio", re.compile(r"(^|\.)(audio_model|audio_tower|audio_encoder|encoder\.conv[12]|model\.encoder)(\.|$)")),
    ("head", re.compile(r"^(lm_head|proj_out|embed_out|cls|classifier|score|qa_outputs|pooler|"
                        r"discriminator_predictions|generator_lm_head|lm_predictions)(\.|$)")),
)

MAX_DIM = 10**12
DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
               "F6_E2M3": 0.75, "F6_E3M2": 0.75, "F4": 0.5, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8,
               "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "C64": 8}
# ggml's block-quantized types (a GGUF's tensors): bytes per element as a fraction whose denominator is a power of
# two, so n * size is exact in a float for any tensor ggml can hold (rows are whole blocks).
DTYPE_BYTES |= {name: GGML_TYPES_BY_NAME[name].type_size / GGML_TYPES_BY_NAME[name].block_size for name in QUANTIZED}
FRACTIONAL_BYTES = frozenset(d for d, size in DTYPE_BYTES.items() if not isinstance(size, int))

# A digit segment inside a name (".12."): classing a name with such segments read as ".0." gives the same answer
# for every rule here (none of them has a digit, and module_role only asks whether a segment is one), so the
# names of a stack's layers and experts are classed once.
INNER_INDEX = re.compile(r"\.\d+\.")


@dataclass
class ManifestCount:
    """What the checkpoint holds: parameters (floating tensors that are not buffers) and the rest."""

    parameters: int = 0
    by_dtype: dict[str, int] = field(default_factory=dict)
    by_tower: dict[str, int] = field(default_factory=dict)
    buffers: int = 0
    integer: int = 0
    quantized: bool = False
    stored_bytes: int = 0
    tensors: int = 0
    linear_dims: int = 0      # sum of (in + out) over 2-D block weights: what LoRA on every linear adapts
    linear_params: int = 0    # elements of those weights (4-bit under QLoRA)
    largest_linear: int = 0
    role_dims: dict[str, int] = field(default_factory=dict)  # module role -> the linear_dims of its weights


def count_manifest(manifest: object, *, audio_encoder: bool = False) -> ManifestCount:
    """Validate and count a manifest; a malformed entry raises EstimateError naming the tensor.

    Each entry is validated in order (the common shapes inline, anything else through ``_entry``, which raises
    the error for the first bad one); entries are then grouped by (name with its inner indices read as 0,
    dtype, shape), and each group is classed and counted once.
    """
    if not isinstance(manifest, dict):
        raise EstimateError("manifest", f"expected a mapping of tensor name to (dtype, shape), got "
                                        f"{type(manifest).__name__}")
    if not manifest:
        raise EstimateError("manifest", "holds no tensors")
    groups: dict[tuple[str, str, tuple[int, ...]], int] = {}
    template = INNER_INDEX.sub
    for name, entry in manifest.items():
        ok = False
        if (type(entry) is tuple or type(entry) is list) and len(entry) == 2 and type(name) is str and name:
            dtype, shape = entry
            if type(dtype) is str and dtype in DTYPE_BYTES and (type(shape) is tuple or type(shape) is list):
                ndim = len(shape)
                if ndim == 2:
                    a, b = shape
                    ok = type(a) is int is type(b) and 0 <= a <= MAX_DIM and 0 <= b <= MAX_DIM
                elif ndim == 1:
                    a = shape[0]
                    ok = type(a) is int and 0 <= a <= MAX_DIM
                elif ndim == 3:
                    a, b, c = shape
                    ok = (type(a) is int is type(b) is type(c) and 0 <= a <= MAX_DIM and 0 <= b <= MAX_DIM
                          and 0 <= c <= MAX_DIM)
                else:
                    ok = all(type(dim) is int and 0 <= dim <= MAX_DIM for dim in shape)
                if ok and type(shape) is list:
                    shape = tuple(shape)
        if not ok:
            dtype, shape = _entry(name, entry)
        key = (template(".0.", name), dtype, shape)
        groups[key] = groups.get(key, 0) + 1

    out = ManifestCount(tensors=len(manifest))
    by_dtype, by_tower, role_dims = out.by_dtype, out.by_tower, out.role_dims
    classes: dict[str, tuple[bool, bool, str, str | None]] = {}
    fractional_bytes = 0
    for (name, dtype, shape), count in groups.items():
        n = math.prod(shape)
        total = n * count
        by_dtype[dtype] = by_dtype.get(dtype, 0) + total
        if dtype in FRACTIONAL_BYTES:
            fractional_bytes += int(n * DTYPE_BYTES[dtype]) * count
            out.quantized = out.quantized or dtype in QUANTIZED
        cls = classes.get(name)
        if cls is None:
            cls = classes[name] = _classify(name, audio_encoder)
        quant, buffer, tower, role = cls
        if quant:
            out.quantized = True
            out.integer += total if dtype in INT_DTYPES else 0
            continue
        if buffer:
            out.buffers += total
            continue
        if dtype in INT_DTYPES:
            out.integer += total
            out.quantized = out.quantized or dtype in ("I32", "U8", "I8") and n > 1
            continue
        out.parameters += total
        by_tower[tower] = by_tower.get(tower, 0) + total
        if role is not None and len(shape) == 2:
            dims = shape[0] + shape[1]
            out.linear_dims += dims * count
            out.linear_params += total
            out.largest_linear = max(out.largest_linear, n)
            role_dims[role] = role_dims.get(role, 0) + dims * count
    out.stored_bytes = fractional_bytes + sum(elements * DTYPE_BYTES[dtype] for dtype, elements in by_dtype.items()
                                              if dtype not in FRACTIONAL_BYTES)
    return out


def _classify(name: str, audio_encoder: bool) -> tuple[bool, bool, str, str | None]:
    """(packed storage, buffer, tower, module role when a 2-D tensor of this name is a linear weight)."""
    tower = tower_of(name, audio_encoder=audio_encoder)
    linear = name.endswith(".weight") and tower != "head" and not EMBEDDING_NAMES.search(name)
    return (bool(QUANT_NAMES.search(name)), bool(BUFFER_NAMES.search(name)), tower,
            module_role(name) if linear else None)


def module_role(weight: str) -> str:
    """A weight's module path within its layer, as PEFT's target_modules names it: "model.layers.0.self_attn.
    q_proj.weight" -> "self_attn.q_proj"; a weight outside numbered layers keeps its whole module path."""
    parts = weight.removesuffix(".weight").split(".")
    numbered = [i for i, part in enumerate(parts) if part.isdigit()]
    return ".".join(parts[numbered[-1] + 1:] if numbered else parts)


def tower_of(name: str, *, audio_encoder: bool = False) -> str:
    for tower, rule in TOWER_RULES:
        if tower == "audio" and not audio_encoder:
            continue
        if rule.search(name):
            return tower
    return "text"


def _entry(name: object, entry: object) -> tuple[str, tuple[int, ...]]:
    if not isinstance(name, str) or not name:
        raise EstimateError("manifest", f"tensor name {name!r} is not a non-empty string")
    key = f"manifest[{name!r}]"
    if not isinstance(entry, (tuple, list)) or len(entry) != 2:
        raise EstimateError(key, f"expected (dtype, shape), got {entry!r}")
    dtype, shape = entry
    if not isinstance(dtype, str) or dtype.upper() not in DTYPE_BYTES:
        raise EstimateError(key, f"unknown safetensors dtype {dtype!r}")
    if not isinstance(shape, (tuple, list)):
        raise EstimateError(key, f"shape must be a list of sizes, got {shape!r}")
    for dim in shape:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 0:
            raise EstimateError(key, f"shape {list(shape)} holds {dim!r}, not a size")
        if dim > 10**12:
            raise EstimateError(key, f"dimension {dim} is beyond any real tensor")
    return dtype.upper(), tuple(shape)
