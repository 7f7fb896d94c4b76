"""Counting a revision's weight manifest (tensor name -> (safetensors dtype, shape)) by tower and dtype."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .errors import EstimateError

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

DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
               "F6_E2M3": 0.75, "F6_E3M2": 0.75, "F4": 0.5, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8,
               "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "C64": 8}


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
    """Validate and count a manifest; a malformed entry raises EstimateError naming the tensor."""
    if not isinstance(manifest, dict):
        raise EstimateError("manifest", f"expected a mapping of tensor name to (dtype, shape), got "
                                        f"{type(manifest).__name__}")
    if not manifest:
        raise EstimateError("manifest", "holds no tensors")
    out = ManifestCount()
    for name, entry in manifest.items():
        dtype, shape = _entry(name, entry)
        n = math.prod(shape)
        out.tensors += 1
        out.stored_bytes += int(n * DTYPE_BYTES[dtype])
        out.by_dtype[dtype] = out.by_dtype.get(dtype, 0) + n
        if QUANT_NAMES.search(name):
            out.quantized = True
            out.integer += n if dtype in INT_DTYPES else 0
            continue
        if BUFFER_NAMES.search(name):
            out.buffers += n
            continue
        if dtype in INT_DTYPES:
            out.integer += n
            out.quantized = out.quantized or dtype in ("I32", "U8", "I8") and n > 1
            continue
        out.parameters += n
        tower = tower_of(name, audio_encoder=audio_encoder)
        out.by_tower[tower] = out.by_tower.get(tower, 0) + n
        if len(shape) == 2 and name.endswith(".weight") and tower != "head" and not EMBEDDING_NAMES.search(name):
            out.linear_dims += shape[0] + shape[1]
            out.linear_params += n
            out.largest_linear = max(out.largest_linear, n)
            role = module_role(name)
            out.role_dims[role] = out.role_dims.get(role, 0) + shape[0] + shape[1]
    return out


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
