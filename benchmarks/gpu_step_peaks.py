"""A data-recording tool, not a benchmark (the runner does not list it).

Measure real training steps on a CUDA card: torch.cuda.max_memory_allocated per phase of two AdamW steps.

Run on a machine with a GPU (python3 with torch, transformers and peft; bitsandbytes for the QLoRA cases):

    python3 benchmarks/gpu_step_peaks.py OUT.json [--set main|more] [--budget SECONDS] [--only NAME ...]

Each case builds the model from a committed fixture config (random weights: memory does not depend on
values) the way tests/estimator/step_truth.py does on the CPU: fp32 weights under bf16 autocast for a full
fine-tune, a bf16 base with PEFT's LoRA (r=16, all-linear, dropout 0.05) for LoRA, an NF4 double-quantized
base (bitsandbytes, bf16 compute) for QLoRA; ``_gc`` modes turn on transformers' non-reentrant gradient
checkpointing. Attention-probability dropout is set to 0, as in the CPU harness. Per phase (forward,
backward, optimizer) the allocator's peak is read after resetting it at the phase's start, so each figure
includes what was already live; the maximum over both steps is kept. The caching allocator's reserved peak
and the process's CUDA context (card memory in use beyond what the allocator reserved) are recorded too.
Results are written after every case, so a run cut short keeps what it measured.
benchmarks/bench_estimator_gpu.py compares them with the estimator (the recorded files), and
benchmarks/bench_estimator_gpu_live.py runs this on the card it finds and compares at once (tag gpu).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "estimator"))

import torch
import transformers
from estimator_shapes import inputs_for
from step_truth import LORA_DROPOUT, LORA_RANK, without_attention_dropout

CONFIGS = ROOT / "tests" / "fixtures" / "estimator" / "configs"
SEQ = 512
PHASES = ("forward", "backward", "optimizer")

# (config, kind, modes, batches): the most telling cases first, so a run cut short still answers for them.
CASES = [
    ("llama/Llama-3.2-1B.json", "decoder", ("full_finetune", "lora"), (1, 4)),
    ("qwen2/Qwen2.5-0.5B.json", "decoder", ("full_finetune", "lora"), (1, 4)),
    ("starcoder2/starcoder2-3b.json", "decoder", ("full_finetune", "lora"), (1, 4)),
    ("gpt2/gpt2.json", "decoder", ("full_finetune", "lora"), (1, 4)),
    ("qwen3/Qwen3-0.6B.json", "decoder", ("full_finetune", "lora"), (1, 4)),
    ("gemma3_text/gemma-3-1b-pt.json", "decoder", ("full_finetune", "lora"), (1, 4)),
    ("phi/phi-2.json", "decoder", ("full_finetune", "lora"), (1, 4)),
    ("gpt_neox/pythia-160m.json", "decoder", ("full_finetune", "lora"), (1, 4)),
    ("llama/Llama-3.2-1B.json", "decoder", ("full_finetune_gc", "lora_gc"), (1, 4)),
    ("qwen2/Qwen2.5-0.5B.json", "decoder", ("full_finetune_gc", "lora_gc"), (1, 4)),
    ("starcoder2/starcoder2-3b.json", "decoder", ("full_finetune_gc", "lora_gc"), (1, 4)),
    ("llama/Llama-3.2-1B.json", "decoder", ("qlora", "qlora_gc"), (1, 4)),
    ("qwen2/Qwen2.5-0.5B.json", "decoder", ("qlora", "qlora_gc"), (1, 4)),
    ("starcoder2/starcoder2-3b.json", "decoder", ("qlora",), (1, 4)),
    ("llama/Llama-3.1-8B.json", "decoder", ("lora", "lora_gc", "qlora"), (1, 4)),
    ("bert/bert-base-uncased.json", "encoder", ("full_finetune", "lora"), (1, 4)),
    ("t5/t5-small.json", "seq2seq", ("full_finetune", "lora"), (1, 4)),
    ("clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json", "vision", ("full_finetune", "lora"), (1, 4)),
]
# `--set more`: every other supported family the fixtures hold (full fine-tunes where they fit an H200).
MORE = [
    ("bloom/bloom-560m.json", "decoder", ("full_finetune", "lora"), (1, 4)),
    ("opt/opt-350m.json", "decoder", ("full_finetune", "lora"), (1, 4)),
    ("gemma/gemma-2b.json", "decoder", ("full_finetune", "lora"), (1, 4)),
    ("gemma2/gemma-2-2b.json", "decoder", ("full_finetune", "lora"), (1, 4)),
    ("mistral/Mistral-7B-v0.1.json", "decoder", ("lora", "qlora"), (1, 4)),
    ("qwen3/Qwen3-8B.json", "decoder", ("lora",), (1, 4)),
    ("falcon/falcon-7b.json", "decoder", ("lora",), (1, 4)),
    ("gptj/gpt-j-6b.json", "decoder", ("lora",), (1, 4)),
    ("phi3/phi-4.json", "decoder", ("lora",), (1, 4)),
    ("qwen2_moe/Qwen1.5-MoE-A2.7B.json", "decoder", ("lora",), (1, 4)),
    ("gemma/gemma-2b.json", "decoder", ("full_finetune_gc", "lora_gc"), (1, 4)),
    ("gpt2/gpt2.json", "decoder", ("full_finetune_gc", "lora_gc"), (1, 4)),
    ("roberta/roberta-base.json", "encoder", ("full_finetune", "lora"), (1, 4)),
    ("xlm-roberta/xlm-roberta-base.json", "encoder", ("full_finetune", "lora"), (1, 4)),
    ("distilbert/distilbert-base-uncased.json", "encoder", ("full_finetune", "lora"), (1, 4)),
    ("electra/electra-base-discriminator.json", "encoder", ("full_finetune", "lora"), (1, 4)),
    ("deberta-v2/deberta-v3-base.json", "encoder", ("full_finetune", "lora"), (1, 4)),
    ("bart/bart-base.json", "seq2seq", ("full_finetune", "lora"), (1, 4)),
    ("t5/flan-t5-base.json", "seq2seq", ("full_finetune", "lora"), (1, 4)),
    ("whisper/whisper-tiny.json", "seq2seq", ("full_finetune", "lora"), (1, 4)),
    ("vit/vit-base-patch16-224-in21k.json", "vision", ("full_finetune", "lora"), (1, 4)),
    ("dinov2/dinov2-base.json", "vision", ("full_finetune", "lora"), (1, 4)),
    ("siglip/siglip-base-patch16-224.json", "vision", ("full_finetune", "lora"), (1, 4)),
    ("clip/clip-vit-large-patch14.json", "vision", ("full_finetune", "lora"), (1, 4)),
    ("llava/llava-1.5-7b-hf.json", "vision", ("lora",), (1, 4)),
]
SETS = {"main": CASES, "more": MORE}


def _hf_config(config: dict):
    cfg = dict(config)
    return transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)


def _model_class(config: dict):
    archs = config.get("architectures") or []
    return getattr(transformers, archs[0]) if archs and hasattr(transformers, archs[0]) else transformers.AutoModel


def _lora(model):
    from peft import LoraConfig, get_peft_model

    return get_peft_model(model, LoraConfig(r=LORA_RANK, lora_alpha=32, lora_dropout=LORA_DROPOUT,
                                            target_modules="all-linear"))


def _build(config: dict, mode: str, scratch: Path):
    base = mode.removesuffix("_gc")
    config = without_attention_dropout(config)
    cls = _model_class(config)
    if base == "qlora":
        from transformers import BitsAndBytesConfig

        saved = scratch / "qlora-base"
        if not saved.exists():  # from_pretrained is the only way transformers quantizes: save a random bf16 copy
            with torch.device("cuda"):
                model = cls._from_config(_hf_config(config), dtype=torch.bfloat16)
            model.save_pretrained(saved)
            del model
            _clear()
        quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                   bnb_4bit_compute_dtype=torch.bfloat16)
        model = cls.from_pretrained(saved, quantization_config=quant, dtype=torch.bfloat16, device_map={"": 0})
    else:
        dtype = torch.float32 if base == "full_finetune" else torch.bfloat16
        with torch.device("cuda"):
            model = cls._from_config(_hf_config(config), dtype=dtype)
    if mode.endswith("_gc"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model if base == "full_finetune" else _lora(model)


def _loss(output) -> torch.Tensor:
    if getattr(output, "loss", None) is not None:
        return output.loss
    first = output[0] if isinstance(output, tuple) else next(iter(output.values()))
    return first.float().mean()


def _clear() -> None:
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def measure(config: dict, mode: str, batch: int, scratch: Path) -> dict:
    """Per-phase allocator peaks (bytes) of two AdamW steps, and the reserved peak."""
    _clear()
    before = torch.cuda.memory_allocated()
    model = _build(config, mode, scratch)
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-4, weight_decay=0.01, foreach=True)
    inputs = {k: v.to("cuda") if isinstance(v, torch.Tensor) else v for k, v in inputs_for(config, batch, SEQ).items()}
    torch.cuda.synchronize()
    resident = torch.cuda.memory_allocated() - before
    torch.cuda.reset_peak_memory_stats()
    peaks = dict.fromkeys(PHASES, 0)
    started = time.perf_counter()
    for _ in range(2):
        torch.cuda.reset_peak_memory_stats()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = _loss(model(**inputs))
        torch.cuda.synchronize()
        peaks["forward"] = max(peaks["forward"], torch.cuda.max_memory_allocated() - before)
        torch.cuda.reset_peak_memory_stats()
        loss.backward()
        del loss
        torch.cuda.synchronize()
        peaks["backward"] = max(peaks["backward"], torch.cuda.max_memory_allocated() - before)
        torch.cuda.reset_peak_memory_stats()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        peaks["optimizer"] = max(peaks["optimizer"], torch.cuda.max_memory_allocated() - before)
    seconds = time.perf_counter() - started
    reserved = torch.cuda.max_memory_reserved()
    del model, optimizer, trainable, inputs
    _clear()
    return {"peaks": peaks, "resident_bytes": resident, "max_reserved_bytes": reserved, "step_seconds": seconds / 2}


def context_bytes() -> int:
    """Card memory the process holds beyond the caching allocator: the CUDA context and library handles."""
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    (a @ a).sum().item()  # cuBLAS initialised, as in any training step
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    return total - free - torch.cuda.memory_reserved()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--budget", type=float, default=420.0, help="start no case after this many seconds")
    parser.add_argument("--only", nargs="*", default=None, help="config paths to run (default: all)")
    parser.add_argument("--set", choices=sorted(SETS), default="main", help="which list of cases")
    args = parser.parse_args()
    start = time.perf_counter()
    doc = {"how": __doc__.strip(), "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "transformers": transformers.__version__, "seq": SEQ, "steps": 2, "lora_rank": LORA_RANK,
           "lora_dropout": LORA_DROPOUT, "cuda_context_bytes": context_bytes(), "rows": [], "skipped": []}
    try:
        import peft

        doc["peft"] = peft.__version__
    except ImportError:
        pass
    for path, kind, modes, batches in SETS[args.set]:
        if args.only and path not in args.only:
            continue
        config = json.loads((CONFIGS / path).read_text())
        with tempfile.TemporaryDirectory() as tmp:
            for mode in modes:
                for batch in batches:
                    if time.perf_counter() - start > args.budget:
                        doc["skipped"].append({"config": path, "mode": mode, "batch": batch, "why": "time budget"})
                        continue
                    row = {"config": path, "kind": kind, "mode": mode, "batch": batch, "seq": SEQ}
                    t0 = time.perf_counter()
                    try:
                        row.update(measure(config, mode, batch, Path(tmp)))
                    except torch.cuda.OutOfMemoryError as exc:
                        row["error"] = f"out of memory: {exc}".splitlines()[0]
                    except Exception as exc:  # noqa: BLE001 - one case's failure is recorded, the others still run
                        row["error"] = f"{type(exc).__name__}: {exc}"
                        row["trace"] = traceback.format_exc(limit=6)
                    _clear()
                    row["seconds"] = round(time.perf_counter() - t0, 2)
                    doc["rows"].append(row)
                    peak = max(row["peaks"].values()) / 2**30 if "peaks" in row else None
                    print(path, mode, batch, f"{peak:.3f} GiB" if peak else row.get("error"), f"{row['seconds']}s",
                          flush=True)
                    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    args.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
