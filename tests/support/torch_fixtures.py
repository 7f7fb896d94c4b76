"""The benign checkpoints `torch.save` writes, declared once: what each holds and how to write it again.

The files under tests/fixtures/pickles/ were written by `write_all` with torch 2.13 (CPU); the default
tests scan them against the declarations here, the `groundtruth` tests write them again with live torch
and compare with `torch.load(..., weights_only=True)`. torch is imported only inside the writers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pickles"

# name -> (safetensors dtype, torch dtype name, shape)
STATE_DICT: dict[str, tuple[str, str, tuple[int, ...]]] = {
    "embed.weight": ("BF16", "bfloat16", (8, 4)),
    "layers.0.attn.q_proj.weight": ("F16", "float16", (4, 4)),
    "layers.0.mlp.up_proj.weight": ("F32", "float32", (6, 4)),
    "layers.0.mlp.up_proj.bias": ("F64", "float64", (6,)),
    "position_ids": ("I64", "int64", (1, 5)),
    "mask": ("BOOL", "bool", (5,)),
    "quant.scale": ("I8", "int8", (3,)),
    "quant.zero": ("U8", "uint8", (3,)),
    "fp8.weight": ("F8_E4M3", "float8_e4m3fn", (2, 2)),
    "scalar": ("F32", "float32", ()),
}
# the files and the dict their manifest comes from ("" for the top level)
FILES = {"state_dict.pt": "", "training_checkpoint.ckpt": "model", "legacy.bin": ""}
# what transformers' Trainer saves beside a checkpoint: no tensors (write_training_args, transformers 5.24)
TRAINING_ARGS = "training_args.bin"


def state_dict() -> dict[str, Any]:
    """The state dict of STATE_DICT, with a view sharing its storage (torch saves the storage once)."""
    import torch

    out: dict[str, Any] = {}
    for index, (name, (_, dtype, shape)) in enumerate(STATE_DICT.items()):
        values = torch.arange(max(1, len(shape) and int(torch.tensor(shape).prod())), dtype=torch.float32) + index
        out[name] = values.reshape(shape).to(getattr(torch, dtype))
    return out


def write_all(folder: Path) -> dict[str, Path]:
    """Write every fixture into `folder`; returns name -> path."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    paths = {name: folder / name for name in FILES}
    torch.save(state_dict(), paths["state_dict.pt"])
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.ones(2, 4)).sum().backward()
    optimizer.step()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3, "global_step": 120,
                "hyper_parameters": {"lr": 1e-3, "betas": (0.9, 0.999), "name": "tiny"}},
               paths["training_checkpoint.ckpt"])  # fmt: skip
    legacy = {k: v for k, v in state_dict().items() if STATE_DICT[k][0] not in ("F8_E4M3",)}
    torch.save(legacy, paths["legacy.bin"], _use_new_zipfile_serialization=False)
    return paths


def write_training_args(folder: Path) -> Path:
    """`training_args.bin` as transformers' Trainer writes it: torch.save of a TrainingArguments (accelerate's
    state, the strategy enums and an AcceleratorConfig inside)."""
    import torch
    from transformers import TrainingArguments

    path = folder / TRAINING_ARGS
    args = TrainingArguments(output_dir="out", report_to="none", learning_rate=2e-5, num_train_epochs=3,
                             eval_strategy="steps", save_strategy="epoch", lr_scheduler_type="cosine")  # fmt: skip
    torch.save(args, path)
    return path


def expected_manifest(name: str) -> list[tuple[str, str, tuple[int, ...]]]:
    """(tensor name, safetensors dtype, shape) the manifest of fixture `name` must list, in order."""
    if name == "training_checkpoint.ckpt":
        return [("0.weight", "F32", (3, 4)), ("0.bias", "F32", (3,)), ("1.weight", "F32", (3,)), ("1.bias", "F32", (3,))]
    legacy = name == "legacy.bin"
    return [(k, dtype, shape) for k, (dtype, _, shape) in STATE_DICT.items() if not (legacy and dtype == "F8_E4M3")]


if __name__ == "__main__":  # regenerate the committed files: .venv/bin/python -m tests.support.torch_fixtures
    for path in write_all(FIXTURES).values():
        print(path, path.stat().st_size)
