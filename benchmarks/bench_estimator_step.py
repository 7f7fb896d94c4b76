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
from estimator.memory import BORDERLINE, CARDS, CUDA_CONTEXT_BYTES, HEADROOM

TRUTH = ROOT / "tests" / "fixtures" / "estimator" / "step_peaks.json"
CONFIGS = ROOT / "tests" / "fixtures" / "estimator" / "configs"


def main() -> None:
    rows = json.loads(TRUTH.read_text())["rows"]
    print(f"{'config':<44}{'mode':<15}{'batch':>5}{'estimate':>11}{'measured':>11}{'error':>8}  phase (est/measured)")
    errors: dict[str, list[float]] = {}
    flagged = missed = false_alarm = borderline = 0
    times = []
    for row in rows:
        config = json.loads((CONFIGS / row["config"]).read_text())
        start = time.perf_counter()
        doc = estimate(config, seq_len_cap=row["seq"]).to_dict()
        times.append(time.perf_counter() - start)
        answer = at_batch(doc, row["mode"], row["batch"])
        est = answer["peak_bytes"] - CUDA_CONTEXT_BYTES
        measured = max(row["peaks"].values())
        phase = max(row["peaks"], key=row["peaks"].get)
        err = est / measured - 1
        errors.setdefault(f"{row['kind']} {row['mode']}", []).append(err)
        print(f"{row['config']:<44}{row['mode']:<15}{row['batch']:>5}{est / 2**30:>9.2f}Gi{measured / 2**30:>9.2f}Gi"
              f"{err:>+8.1%}  {answer['peak_phase']}/{phase}")
        for size in CARDS.values():
            usable = size * (1 - HEADROOM)
            fits = measured + CUDA_CONTEXT_BYTES <= usable
            peak = answer["peak_bytes"]
            verdict = ("does_not_fit" if peak > usable * (1 + BORDERLINE)
                       else "borderline" if peak >= usable * (1 - BORDERLINE) else "fits")
            borderline += verdict == "borderline"
            if not fits:
                flagged += verdict != "fits"
                missed += verdict == "fits"
            elif verdict == "does_not_fit":
                false_alarm += 1
    print("\nStep-peak error by family kind and mode (estimate / measured - 1)")
    for key, errs in sorted(errors.items()):
        print(f"  {key:<28} median {statistics.median(errs):+6.1%}   max |error| {max(map(abs, errs)):6.1%}"
              f"   ({len(errs)} runs)")
    runs = flagged + missed
    print(f"\nCards: {len(rows) * len(CARDS)} (run, card) pairs; {runs} runs do not fit their card: the estimate "
          f"flags {flagged} of {runs} (does_not_fit or borderline) and says 'fits' on {missed}; "
          f"{false_alarm} runs that fit were called does_not_fit; {borderline} verdicts borderline")
    print(f"Time per estimate: median {statistics.median(times) * 1000:.2f} ms, max {max(times) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
