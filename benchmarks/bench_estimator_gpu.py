"""The estimator against real training steps on a GPU: torch.cuda.max_memory_allocated per model, mode, batch.

Runs on any machine: it reads recorded figures. Run: python -m benchmarks run estimator_gpu
(or .venv/bin/python benchmarks/bench_estimator_gpu.py [results.json ...]; default
benchmarks/results/gpu_step_peaks_h200*.json, measured on an NVIDIA H200 by benchmarks/gpu_step_peaks.py:
two AdamW steps, bf16 autocast, sequence 512, full fine-tune / LoRA / QLoRA with and without gradient
checkpointing). The allocator's peak carries no CUDA context, so the estimator's allowance is taken off before
comparing. The "reserved" column is the caching allocator's peak: with the measured CUDA context it is what a card
must hold, so the card check counts, per card, the runs that would not fit it and what the estimator's verdict at
that batch says (a "fits" there is the one mistake an estimate must not make).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from estimator import at_batch, estimate
from estimator.memory import CARDS, CUDA_CONTEXT_BYTES, HEADROOM, Mode, Phase

RESULTS = sorted((ROOT / "benchmarks" / "results").glob("gpu_step_peaks_h200*.json"))
CONFIGS = ROOT / "tests" / "fixtures" / "estimator" / "configs"
GIB = 2**30
BENCHMARK = Benchmark(
    name="estimator_gpu",
    about="The estimator against training steps recorded on an NVIDIA H200 (benchmarks/results/gpu_step_peaks_h200*.json)",
    tags=("quick", "estimator"),
    figures=(
        Figure("runs that do not fit a card, said 'fits'", "(run, card) pairs", goal=0,
               note="the one mistake an estimate must not make"),
        Figure("runs that do not fit a card, flagged", "(run, card) pairs", direction="higher"),
        Figure("runs that fit, called does_not_fit", "(run, card) pairs"),
        Figure("decoder runs within 5%", "%", direction="higher"),
        Figure("decoder runs, median |error|", "%"),
        Figure("runs estimated low", "runs"),
        Figure("worst low estimate", "%"),
        Figure("caching allocator's reserved peak above allocated, median", "%"),
    ),
)


def compare(doc: dict) -> list[dict]:
    """One row per measured case: estimate (without the context allowance), measured peak, error."""
    out = []
    for row in doc["rows"]:
        if "peaks" not in row:
            continue
        config = json.loads((CONFIGS / row["config"]).read_text())
        result = estimate(config, seq_len_cap=row["seq"]).to_dict()
        answer = at_batch(result, row["mode"], row["batch"])
        stored = result["memory"][row["mode"]]["phases"]
        mode = Mode(row["mode"], {n: Phase(p["static_bytes"], p["per_sample_bytes"]) for n, p in stored.items()}, {})
        measured = max(row["peaks"].values())
        est = answer["peak_bytes"] - CUDA_CONTEXT_BYTES
        out.append({**row, "estimate": est, "measured": measured, "error": est / measured - 1,
                    "est_phase": answer["peak_phase"], "phase": max(row["peaks"], key=row["peaks"].get),
                    "card_use": row["max_reserved_bytes"] + doc["cuda_context_bytes"],
                    "verdicts": {card: mode.verdict(size, row["batch"]) for card, size in CARDS.items()}})
    return out


def card_check(rows: list[dict]) -> dict[str, int]:
    """Over every (run, card): runs that do not fit the card and how the verdict at their batch called them."""
    tally = dict.fromkeys(("pairs", "oom", "flagged", "missed", "fits_called_does_not_fit", "borderline"), 0)
    for r in rows:
        for card, size in CARDS.items():
            verdict = r["verdicts"][card]
            tally["pairs"] += 1
            tally["borderline"] += verdict == "borderline"
            if r["card_use"] > size:
                tally["oom"] += 1
                tally["flagged"] += verdict != "fits"
                tally["missed"] += verdict == "fits"
            elif verdict == "does_not_fit":
                tally["fits_called_does_not_fit"] += 1
    return tally


def measure(size: int | None = None, paths: list[str] | None = None) -> dict[str, float]:
    docs = [json.loads(Path(p).read_text()) for p in (paths or RESULTS)]
    doc = docs[0]
    rows = [row for d in docs for row in compare(d)]
    failed = [r for d in docs for r in d["rows"] if "peaks" not in r]
    detail(f"{doc['device']}, torch {doc['torch']}, transformers {doc['transformers']}, peft {doc.get('peft')}; "
          f"sequence {doc['seq']}; CUDA context measured {doc['cuda_context_bytes'] / 2**20:.0f} MiB "
          f"(estimator allows {CUDA_CONTEXT_BYTES / 2**20:.0f} MiB)")
    detail(f"{'config':<42}{'mode':<18}{'batch':>5}{'estimate':>10}{'measured':>10}{'reserved':>10}{'error':>8}  phase est/meas")
    errors: dict[str, list[float]] = {}
    for r in rows:
        errors.setdefault(f"{r['kind']} {r['mode']}", []).append(r["error"])
        detail(f"{r['config']:<42}{r['mode']:<18}{r['batch']:>5}{r['estimate'] / GIB:>8.2f}Gi{r['measured'] / GIB:>8.2f}Gi"
              f"{r['max_reserved_bytes'] / GIB:>8.2f}Gi{r['error']:>+8.1%}  {r['est_phase']}/{r['phase']}")
    detail("\nError by family kind and mode (estimate / measured allocator peak - 1)")
    for key, errs in sorted(errors.items()):
        detail(f"  {key:<28} median {statistics.median(errs):+6.1%}   max |error| {max(map(abs, errs)):6.1%}   ({len(errs)} runs)")
    decoders = [r["error"] for r in rows if r["kind"] == "decoder"]
    within = sum(abs(e) <= 0.05 for e in decoders)
    low = [r for r in rows if r["error"] < 0]
    detail(f"\nDecoder runs: {within} of {len(decoders)} within 5%, median |error| "
          f"{statistics.median(map(abs, decoders)):.1%}; {len(low)} of {len(rows)} runs estimated low "
          f"(worst {min((r['error'] for r in rows), default=0):+.1%})")
    reserve = [r["max_reserved_bytes"] / r["measured"] - 1 for r in rows]
    detail(f"Caching allocator: reserved peak above allocated peak by median {statistics.median(reserve):.1%}, "
          f"max {max(reserve):.1%} (the estimator keeps {HEADROOM:.0%} of each card for it)")
    for r in failed:
        detail(f"not measured: {r['config']} {r['mode']} batch {r['batch']}: {r['error'][:100]}")
    t = card_check(rows)
    detail(f"Cards: {t['pairs']} (run, card) pairs; {t['oom']} runs do not fit their card; {t['borderline']} verdicts borderline")
    return {"runs that do not fit a card, said 'fits'": t["missed"], "runs that do not fit a card, flagged": t["flagged"],
            "runs that fit, called does_not_fit": t["fits_called_does_not_fit"],
            "decoder runs within 5%": 100 * within / len(decoders),
            "decoder runs, median |error|": 100 * statistics.median(map(abs, decoders)), "runs estimated low": len(low),
            "worst low estimate": 100 * min((r["error"] for r in rows), default=0),
            "caching allocator's reserved peak above allocated, median": 100 * statistics.median(reserve)}


if __name__ == "__main__":
    if sys.argv[1:] and not sys.argv[1].startswith("-"):
        run_alone(BENCHMARK, lambda size: measure(size, sys.argv[1:]), [])
    else:
        run_alone(BENCHMARK, measure)
