"""The training step's peak: the estimator against measured steps, per model, mode and batch.

Run: .venv/bin/python benchmarks/bench_estimator_step.py   (reads tests/fixtures/estimator/step_peaks.json,
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

from estimator import at_batch, estimate
from estimator.families.common import LOSS_TRANSIENT_PER_VOCAB, MLM_LOSS_TRANSIENT_PER_VOCAB
from estimator.memory import BORDERLINE, CARDS, CUDA_CONTEXT_BYTES, HEADROOM, LOSS_FORWARD_SHARE

TRUTH = ROOT / "tests" / "fixtures" / "estimator" / "step_peaks.json"
CONFIGS = ROOT / "tests" / "fixtures" / "estimator" / "configs"
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


def main() -> None:
    truth = json.loads(TRUTH.read_text())
    rows = truth["rows"]
    print(f"{'config':<58}{'mode':<18}{'batch':>5}{'estimate':>11}{'measured':>11}{'error':>8}  phase (est/measured)")
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
        print(f"{row['config']:<58}{row['mode']:<18}{row['batch']:>5}{est / 2**30:>9.2f}Gi{measured / 2**30:>9.2f}Gi"
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
    print("* masked-LM head: the estimate plus what the CPU harness's loss keeps beyond a card's (2 bytes a vocabulary"
          " entry a token);\n  the card verdicts below use the estimate itself")
    print("\nStep-peak error by family kind and mode (estimate / measured - 1)")
    for key, errs in sorted(errors.items()):
        print(f"  {key:<28} median {statistics.median(errs):+6.1%}   max |error| {max(map(abs, errs)):6.1%}"
              f"   ({len(errs)} runs)")
    runs = flagged + missed
    print("\nPer card: of the simulated runs that do not fit it, how many the estimate flags")
    for card, (over, caught, said_fits) in per_card.items():
        print(f"  {card:<12} {over:>4} runs do not fit; the estimate flags {caught} of {over}, says 'fits' on "
              f"{said_fits}")
    print(f"\nCards: {len(rows) * len(CARDS)} (run, card) pairs; {runs} runs do not fit their card: the estimate "
          f"flags {flagged} of {runs} (does_not_fit or borderline) and says 'fits' on {missed}; "
          f"{false_alarm} runs that fit were called does_not_fit; {borderline} verdicts borderline")
    for case, why in truth.get("not_measured", {}).items():
        print(f"Not measured: {case}: {why}")
    print(f"Time per estimate: median {statistics.median(times) * 1000:.2f} ms, max {max(times) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
