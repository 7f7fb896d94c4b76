"""What a weight file declares, read from its header (safetensors) or its pickle (torch), never its weights."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a safetensors header."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def parameters(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class WeightManifest:
    """The tensors one weight file declares, read from its header without downloading weights."""

    tensors: tuple[TensorInfo, ...] = ()
    metadata: dict[str, str] = field(default_factory=dict)
    error: str | None = None

    @property
    def parameters(self) -> int:
        return sum(t.parameters for t in self.tensors)

    def parameters_by_dtype(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.dtype] = out.get(t.dtype, 0) + t.parameters
        return out
