"""Write tests/fixtures/estimator/step_peaks.json: measured peak bytes per phase of two AdamW steps.

Run: .venv/bin/python tests/estimator/generate_step_truth.py [--jobs 2] [--only CASE ...] [--log FILE]
(needs the `test` extra: torch, transformers, peft). Every family the estimator models (estimator.families.BUILDERS)
has one real config here (its smallest), full fine-tune and LoRA at batch 1 and 4: about 25 minutes with
``--jobs 2`` on two busy CPU cores, most cases under a minute a row (BLOOM's full fine-tune about 3 minutes).

Every case is the whole model at its real widths and depth (FakeTensorMode: no memory or compute is spent),
on the CPU's bf16 autocast, SDPA, sequence 512 (or the model's own input size for vision towers; SEQ_FOR holds
the two that need another, with the reason, written into their rows); the decoders in CHECKPOINTED also with
gradient checkpointing. A case named ``config.json#text_config`` is the sub-config of a real config, standing
alone (step_truth.case_config). ``--only`` reruns the named cases and keeps every other committed row as it is;
``--log`` appends each finished row to a JSON-lines file and skips the rows it already holds (to resume).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import step_truth  # noqa: E402 - the harness sits beside this script

OUT = HERE.parents[0] / "fixtures" / "estimator" / "step_peaks.json"
SEQ = 512
CLIP = "clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json"
CASES = {  # config -> family kind ("vision": a vision or text tower, or both; "multimodal": towers + an LM)
    "gpt2/gpt2.json": "decoder", "llama/Llama-3.2-1B.json": "decoder", "qwen2/Qwen2.5-0.5B.json": "decoder",
    "bert/bert-base-uncased.json": "encoder", "roberta/roberta-base.json": "encoder",
    "t5/t5-small.json": "seq2seq", "bart/bart-base.json": "seq2seq",
    CLIP: "vision", "vit/vit-base-patch16-224-in21k.json": "vision",
    # every other family, its smallest real config
    "bloom/bloom-560m.json": "decoder", "falcon/falcon-7b.json": "decoder", "gemma/gemma-2b.json": "decoder",
    "gemma2/gemma-2-2b.json": "decoder", "gemma3_text/gemma-3-1b-pt.json": "decoder",
    "gpt_neox/pythia-160m.json": "decoder", "gptj/gpt-j-6b.json": "decoder", "mistral/Mistral-7B-v0.1.json": "decoder",
    "mixtral/Mixtral-8x7B-v0.1.json": "decoder", "opt/opt-125m.json": "decoder", "phi/phi-2.json": "decoder",
    "phi3/phi-4.json": "decoder", "qwen2_moe/Qwen1.5-MoE-A2.7B.json": "decoder", "qwen3/Qwen3-0.6B.json": "decoder",
    "starcoder2/starcoder2-3b.json": "decoder",
    "deberta-v2/deberta-v3-base.json": "encoder", "distilbert/distilbert-base-uncased.json": "encoder",
    "electra/electra-small-discriminator.json": "encoder", "xlm-roberta/xlm-roberta-base.json": "encoder",
    "whisper/whisper-tiny.json": "seq2seq",
    "dinov2/dinov2-base.json": "vision", "siglip/siglip-base-patch16-224.json": "vision",
    f"{CLIP}#text_config": "vision", f"{CLIP}#vision_config": "vision",
    "llava/llava-1.5-7b-hf.json": "multimodal",
}
SEQ_FOR = {  # cases whose sequence is not SEQ, and why
    "whisper/whisper-tiny.json": (448, "Whisper's decoder takes at most max_target_positions=448 label tokens"),
    "llava/llava-1.5-7b-hf.json": (1024, "the prompt holds the image's 576 <image> tokens (one per patch "
                                          "feature) and 448 text tokens"),
}
NOT_MEASURED: dict[str, str] = {}  # case -> why the harness cannot run it (none at present)

MODES = ("full_finetune", "lora")
CHECKPOINTED = ("gpt2/gpt2.json", "llama/Llama-3.2-1B.json", "qwen2/Qwen2.5-0.5B.json")  # also with "_gc" modes


def tasks(cases) -> list[tuple[str, str, int]]:
    """(case, mode, batch) in the order the rows are written."""
    out = []
    for path in cases:
        for mode in MODES + (tuple(m + "_gc" for m in MODES) if path in CHECKPOINTED else ()):
            out.extend((path, mode, batch) for batch in (1, 4))
    return out


def run(task: tuple[str, str, int]) -> dict:
    path, mode, batch = task
    seq, note = SEQ_FOR.get(path, (SEQ, None))
    start = time.perf_counter()
    peaks = step_truth.step_peaks(step_truth.case_config(path), mode, batch, seq)
    row = {"config": path, "kind": CASES[path], "mode": mode, "batch": batch, "seq": seq,
           "widths": "real (whole model)", "peaks": peaks}
    if note:
        row["note"] = note
    print(path, mode, batch, peaks, f"{time.perf_counter() - start:.1f}s", flush=True)
    return row


def _key(row: dict) -> tuple[str, str, int]:
    return row["config"], row["mode"], row["batch"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (each case is single-threaded)")
    parser.add_argument("--only", nargs="+", choices=sorted(CASES), metavar="CASE", help="rerun these cases only")
    parser.add_argument("--log", type=Path, help="JSON-lines file of finished rows, read back to resume")
    args = parser.parse_args()
    wanted = [c for c in CASES if c not in NOT_MEASURED]
    todo = tasks(args.only or wanted)
    done: dict[tuple[str, str, int], dict] = {}
    if args.only:
        done = {_key(r): r for r in json.loads(OUT.read_text())["rows"] if r["config"] not in args.only}
    if args.log and args.log.exists():
        done.update({_key(r): r for r in map(json.loads, args.log.read_text().splitlines()) if r})
    todo = [t for t in todo if t not in done]
    with ProcessPoolExecutor(max(1, args.jobs)) as pool:
        futures = {pool.submit(run, t): t for t in todo}
        for future in as_completed(futures):
            try:
                row = future.result()
            except Exception as error:  # noqa: BLE001 - reported and left out: rerun with --only once fixed
                print("FAILED", *futures[future], repr(error), flush=True)
                continue
            done[_key(row)] = row
            if args.log:
                with args.log.open("a") as log:
                    log.write(json.dumps(row) + "\n")
    rows = [done[t] for t in tasks(wanted) if t in done]
    doc = {"how": step_truth.__doc__.strip(), "steps": 2, "lora_rank": step_truth.LORA_RANK,
           "lora_dropout": step_truth.LORA_DROPOUT, "not_measured": NOT_MEASURED, "rows": rows}
    OUT.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
