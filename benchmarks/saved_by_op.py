"""A diagnostic data-recording tool, not a benchmark (the runner does not list it).

What one forward pass saves for backward, grouped by the op that made each saved tensor: CPU against CUDA.

Run: python3 benchmarks/saved_by_op.py [cpu|cuda] [OUT.json]   (torch, transformers and peft; a GPU for cuda)

The estimator's activation terms were fitted to a CPU harness (tests/estimator); where a real card's step differs
from it (benchmarks/bench_estimator_gpu.py), this shows which ops' saved tensors differ. Each model is cut to two
layers at its real widths, sequence 128, batch 1, bf16 autocast, full fine-tune (fp32 weights) and LoRA (bf16 base,
PEFT r=16 all-linear, dropout 0.05).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "estimator"))

import torch
import transformers
from estimator_shapes import inputs_for, with_layers
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

CONFIGS = ROOT / "tests" / "fixtures" / "estimator" / "configs"
MODELS = ("llama/Llama-3.2-1B.json", "gpt2/gpt2.json", "phi/phi-2.json", "qwen2/Qwen2.5-0.5B.json")
SEQ = 128


class Origins(TorchDispatchMode):
    """The op that made each storage."""

    def __init__(self) -> None:
        super().__init__()
        self.made: dict[int, str] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for leaf in tree_flatten(out)[0]:
            if isinstance(leaf, torch.Tensor):
                self.made.setdefault(leaf.untyped_storage().data_ptr(), str(func.overloadpacket.__name__))
        return out


def saved(config: dict, mode: str, device: str) -> dict:
    from peft import LoraConfig, get_peft_model

    config = with_layers(config, 2)
    cfg = dict(config)
    hf = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    archs = config.get("architectures") or []
    cls = getattr(transformers, archs[0]) if archs and hasattr(transformers, archs[0]) else transformers.AutoModel
    with torch.device(device):
        model = cls._from_config(hf, dtype=torch.float32 if mode == "full" else torch.bfloat16)
    if mode == "lora":
        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules="all-linear"))
    model.train()
    inputs = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs_for(config, 1, SEQ).items()}
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept: dict[int, tuple] = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params:
            kept[ptr] = (str(t.dtype).removeprefix("torch."), t.untyped_storage().nbytes())
        return t

    origins = Origins()
    with origins, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), torch.autocast(device, dtype=torch.bfloat16):
        model(**inputs)
    by_op: Counter = Counter()
    for ptr, (dtype, nbytes) in kept.items():
        by_op[f"{origins.made.get(ptr, 'input')}:{dtype}"] += nbytes
    return {"total": sum(n for _, n in kept.values()), "by_op": dict(by_op.most_common())}


def main() -> None:
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    out = {}
    for path in MODELS:
        config = json.loads((CONFIGS / path).read_text())
        for mode in ("full", "lora"):
            try:
                out[f"{path} {mode}"] = saved(config, mode, device)
            except Exception as exc:  # noqa: BLE001 - a diagnostic: report and go on
                out[f"{path} {mode}"] = {"error": f"{type(exc).__name__}: {exc}"}
            print(path, mode, out[f"{path} {mode}"].get("total"), flush=True)
    text = json.dumps({"device": device, "torch": torch.__version__, "seq": SEQ, "layers": 2, "rows": out}, indent=1)
    if len(sys.argv) > 2:
        Path(sys.argv[2]).write_text(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
