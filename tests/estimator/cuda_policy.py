"""CUDA's rules where the CPU harness would otherwise follow the CPU's (test-only).

The harness runs on the CPU, the figures are for a card. Measured on an H200 (benchmarks/saved_by_op.py,
benchmarks/results/saved_by_op_*.json) the two differ in two ways that matter:
- dropout: CUDA's fused kernel keeps a 1-byte mask; the CPU's composite keeps a noise tensor in the input's dtype
  (4 bytes for PEFT's fp32 adapter input);
- autocast: CUDA runs ``pow``, ``rsqrt`` and the other ops of its float32 list in fp32, the CPU keeps them in bf16.
``CudaRules`` (a TorchFunctionMode) makes a CPU forward follow CUDA in both.
"""

from __future__ import annotations

import torch
from torch.nn import functional
from torch.overrides import TorchFunctionMode

# CUDA autocast's float32 list (torch.amp docs) for the ops transformers' modules call.
_FP32 = {
    torch.pow, torch.Tensor.pow, torch.Tensor.__pow__, torch.Tensor.__rpow__,
    torch.rsqrt, torch.Tensor.rsqrt, torch.exp, torch.Tensor.exp, torch.log, torch.Tensor.log,
    torch.reciprocal, torch.Tensor.reciprocal, torch.sum, torch.Tensor.sum, torch.prod, torch.Tensor.prod,
    torch.cumsum, torch.Tensor.cumsum, torch.norm, torch.Tensor.norm, functional.softplus, functional.normalize,
}


def _fp32(value):
    if isinstance(value, torch.Tensor) and value.dtype in (torch.bfloat16, torch.float16):
        return value.float()
    return value


class CudaRules(TorchFunctionMode):
    """Dropout through ``native_dropout`` (bool mask) and CUDA autocast's fp32 ops, inside a CPU autocast."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is functional.dropout:
            return self._dropout(*args, **kwargs)
        if func in _FP32 and torch.is_autocast_enabled("cpu"):
            args = tuple(_fp32(a) for a in args)
        return func(*args, **kwargs)

    @staticmethod
    def _dropout(tensor, p=0.5, training=True, inplace=False):
        if not training or p == 0:
            return tensor
        return torch.native_dropout(tensor, p, True)[0]
