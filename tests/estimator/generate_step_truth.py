"""Write tests/fixtures/estimator/step_peaks.json: measured peak bytes per phase of two AdamW steps.

Run: .venv/bin/python tests/estimator/generate_step_truth.py   (needs the `test` extra: torch, transformers, peft)

Every case is the whole model at its real widths and depth (FakeTensorMode: no memory or compute is spent),
on the CPU's bf16 autocast, SDPA, sequence 512 (or the model's own input size for vision towers); the decoders
in CHECKPOINTED also with gradient checkpointing.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import step_truth  # noqa: E402 - the harness sits beside this script
from estimator_truth import load_config  # noqa: E402

OUT = HERE.parents[0] / "fixtures" / "estimator" / "step_peaks.json"
SEQ = 512
CASES = {  # config -> family kind
    "gpt2/gpt2.json": "decoder", "llama/Llama-3.2-1B.json": "decoder", "qwen2/Qwen2.5-0.5B.json": "decoder",
    "bert/bert-base-uncased.json": "encoder", "roberta/roberta-base.json": "encoder",
    "t5/t5-small.json": "seq2seq", "bart/bart-base.json": "seq2seq",
    "clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json": "vision", "vit/vit-base-patch16-224-in21k.json": "vision",
}


MODES = ("full_finetune", "lora")
CHECKPOINTED = ("gpt2/gpt2.json", "llama/Llama-3.2-1B.json", "qwen2/Qwen2.5-0.5B.json")  # also with "_gc" modes


def main() -> None:
    rows = []
    for path, kind in CASES.items():
        config = load_config(path)
        for mode in MODES + (tuple(m + "_gc" for m in MODES) if path in CHECKPOINTED else ()):
            for batch in (1, 4):
                start = time.perf_counter()
                peaks = step_truth.step_peaks(config, mode, batch, SEQ)
                rows.append({"config": path, "kind": kind, "mode": mode, "batch": batch, "seq": SEQ,
                             "widths": "real (whole model)", "peaks": peaks})
                print(path, mode, batch, peaks, f"{time.perf_counter() - start:.1f}s", flush=True)
    doc = {"how": step_truth.__doc__.strip(), "steps": 2, "lora_rank": step_truth.LORA_RANK,
           "lora_dropout": step_truth.LORA_DROPOUT, "rows": rows}
    OUT.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
