"""The training step's peak: the estimator against measured steps, per model, mode and batch.

Run: python -m benchmarks run estimator_step   (reads tests/fixtures/estimator/step_peaks.json,
written by tests/estimator/generate_step_truth.py: two AdamW steps under bf16 autocast on the CPU, whole models
at real widths under FakeTensorMode, LoRA by PEFT). Measured peaks carry no CUDA context, so the estimator's
allowance is taken off before comparing; the card verdicts add it back to both.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from estimator import at_batch, estimate
from estimator.families.common import LOSS_TRANSIENT_PER_VOCAB, MLM_LOSS_TRANSIENT_PER_VOCAB
from estimator.memory import BORDERLINE, CARDS, CUDA_CONTEXT_BYTES, HEADROOM, LOSS_FORWARD_SHARE

TRUTH = ROOT / "tests" / "fixtures" / "estimator" / "step_peaks.json"
CONFIGS = ROOT / "tests" / "fixtures" / "estimator" / "configs"
MUST_NOT = "the one mistake an estimate must not make (bench_estimator_gpu)"
BENCHMARK = Benchmark(
    name="estimator_step",
    about="The training step's peak: the estimator against measured CPU steps (tests/fixtures/estimator/step_peaks.json)",
    tags=("quick", "estimator"),
    figures=(
        Figure("runs that do not fit a card, said 'fits'", "(run, card) pairs", goal=0, note=MUST_NOT),
        Figure("runs that do not fit a card, flagged", "(run, card) pairs", direction="higher"),
        Figure("runs that fit, called does_not_fit", "(run, card) pairs"),
        Figure("step-peak error, median |error| over runs", "%"),
        Figure("step-peak error, max |error|", "%"),
        Figure("time per estimate, median", "ms"),
        Figure("time per estimate, max", "ms"),
    ),
)
STANDALONE = {"text_config": ("clip_text_model", "CLIPTextModel"),  # as tests/estimator/step_truth.case_config
              "vision_config": ("clip_vision_model", "CLIPVisionModel")}


def case_config(case: str) -> dict:
    """A fixture config by path; ``path#text_config`` is that CLIP sub-config standing alone."""
    path, _, sub = case.partition("#")
    config = json.loads((CONFIGS / path).read_text())
    if not sub:
        return config
    model_type, arch = STANDALONE[sub]
    return {**config[sub], "model_type": model_type, "architectures": [arch]}


def cpu_mlm_loss_extra(config: dict, parts: dict) -> int:
    """Per sample, what the CPU harness's masked-LM loss keeps beyond a card's (2 bytes a vocabulary entry: see
    tests/estimator/test_estimator_step_peaks.py); added to the estimate's forward (its share) and backward."""
    if not (config.get("architectures") or [""])[0].endswith(("ForMaskedLM", "ForPreTraining")):
        return 0
    loss = parts["logits_and_loss_per_sample"]
    return loss * (LOSS_TRANSIENT_PER_VOCAB - MLM_LOSS_TRANSIENT_PER_VOCAB) // MLM_LOSS_TRANSIENT_PER_VOCAB


def measure(size: int | None = None) -> dict[str, float]:
    truth = json.loads(TRUTH.read_text())
    rows = truth["rows"]
    detail(f"{'config':<58}{'mode':<18}{'batch':>5}{'estimate':>11}{'measured':>11}{'error':>8}  phase (est/measured)")
    errors: dict[str, list[float]] = {}
    flagged = missed = false_alarm = borderline = 0
    per_card = {card: [0, 0, 0] for card in CARDS}  # runs that do not fit it, of them flagged, said 'fits'
    times = []
    for row in rows:
        config = case_config(row["config"])
        start = time.perf_counter()
        doc = estimate(config, seq_len_cap=row["seq"]).to_dict()
        times.append(time.perf_counter() - start)
        answer = at_batch(doc, row["mode"], row["batch"])
        extra = cpu_mlm_loss_extra(config, doc["memory"][row["mode"]]["parts"]) * row["batch"]
        phases = {name: value - CUDA_CONTEXT_BYTES + int({"forward": LOSS_FORWARD_SHARE, "backward": 1}.get(name, 0)
                                                         * extra)
                  for name, value in answer["phase_peaks"].items()}
        est = max(phases.values())
        measured = max(row["peaks"].values())
        phase = max(row["peaks"], key=row["peaks"].get)
        err = est / measured - 1
        errors.setdefault(f"{row['kind']} {row['mode']}", []).append(err)
        detail(f"{row['config']:<58}{row['mode']:<18}{row['batch']:>5}{est / 2**30:>9.2f}Gi{measured / 2**30:>9.2f}Gi"
              f"{err:>+8.1%}  {max(phases, key=phases.get)}/{phase}{' *' if extra else ''}")
        for card, size in CARDS.items():
            usable = size * (1 - HEADROOM)
            fits = measured + CUDA_CONTEXT_BYTES <= usable
            peak = answer["peak_bytes"]
            verdict = ("does_not_fit" if peak > usable * (1 + BORDERLINE)
                       else "borderline" if peak >= usable * (1 - BORDERLINE) else "fits")
            borderline += verdict == "borderline"
            if not fits:
                flagged += verdict != "fits"
                missed += verdict == "fits"
                per_card[card][0] += 1
                per_card[card][1] += verdict != "fits"
                per_card[card][2] += verdict == "fits"
            elif verdict == "does_not_fit":
                false_alarm += 1
    for key, errs in sorted(errors.items()):
        detail(f"  {key:<28} median {statistics.median(errs):+6.1%}   max |error| {max(map(abs, errs)):6.1%}   ({len(errs)} runs)")
    for case, why in truth.get("not_measured", {}).items():
        detail(f"Not measured: {case}: {why}")
    every = [e for errs in errors.values() for e in errs]
    return {"runs that do not fit a card, said 'fits'": missed, "runs that do not fit a card, flagged": flagged,
            "runs that fit, called does_not_fit": false_alarm,
            "step-peak error, median |error| over runs": 100 * statistics.median(map(abs, every)),
            "step-peak error, max |error|": 100 * max(map(abs, every)),
            "time per estimate, median": statistics.median(times) * 1000, "time per estimate, max": max(times) * 1000}


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
