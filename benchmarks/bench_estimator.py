"""Estimator figures: time per estimate, the ratio against accelerate's estimate-memory, parameter deltas.

Run: .venv/bin/python benchmarks/bench_estimator.py   (needs the `test` and `bench` extras: torch, transformers, accelerate)

`accelerate estimate-memory MODEL` fetches config.json from the Hub, which this offline script cannot do.
What it runs after the fetch is measured instead, on the same config dicts: transformers' AutoConfig from the
dict, `AutoModel.from_config(..., torch_dtype=float32)` under `init_empty_weights()`, then
`calculate_maximum_sizes` and `estimate_training_usage(..., "bfloat16")`, exactly as accelerate's
`gather_data` does. The parameter truth is transformers' own model for the config's `architectures` class,
built on the meta device.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "estimator" / "configs"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "estimator"))

from estimator import estimate

REPEAT = 200


def configs() -> list[tuple[str, dict]]:
    paths = sorted(p for p in FIXTURES.glob("*/*.json") if p.parent.name != "custom")
    return [(str(p.relative_to(FIXTURES)), json.loads(p.read_text())) for p in paths]


def time_ours(config: dict) -> float:
    times = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        estimate(config)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def accelerate_estimate(config: dict) -> tuple[int, int]:
    """What `accelerate estimate-memory` runs once it has the config: (parameters, peak training bytes)."""
    import torch
    import transformers
    from accelerate import init_empty_weights
    from accelerate.commands.estimate import estimate_training_usage
    from accelerate.utils import calculate_maximum_sizes

    cfg = dict(config)
    hf_config = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    with init_empty_weights():
        model = transformers.AutoModel.from_config(hf_config, torch_dtype=torch.float32)
    total_size, _largest = calculate_maximum_sizes(model)
    usage = estimate_training_usage(total_size, "bfloat16")
    return total_size // 4, max(usage.values())


def time_accelerate(config: dict, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        accelerate_estimate(config)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cold_start(code: str) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of a fresh interpreter running ``code``."""
    script = ("import resource, time; t = time.perf_counter()\n" + code +
              "\nprint(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT)
    seconds, rss = out.stdout.strip().splitlines()[-1].split()
    return float(seconds), float(rss)


def main() -> None:
    # fresh processes first: a child forked after torch is imported here inherits this process's peak RSS
    llama = (FIXTURES / "llama" / "Llama-3.1-8B.json").read_text()
    ours_cold = cold_start(f"import json; from estimator import estimate; estimate(json.loads({llama!r}))")
    acc_cold = cold_start(
        "import json, sys; sys.path.insert(0, 'benchmarks'); from bench_estimator import accelerate_estimate\n"
        f"accelerate_estimate(json.loads({llama!r}))")

    import estimator_truth  # test-only helper: transformers' own count on the meta device

    rows = []
    for path, config in configs():
        ours = estimate(config).parameters["derived"]
        truth = estimator_truth.count_parameters(config)
        acc_params, acc_peak = accelerate_estimate(config)
        rows.append((path, config, ours, truth, acc_params, acc_peak))

    print("Parameters: estimator (from config.json) against transformers (meta build of `architectures`)")
    print(f"{'config':<46}{'estimator':>16}{'transformers':>16}{'delta':>7}{'accelerate':>16}{'acc. delta':>12}")
    for path, _, ours, truth, acc, _peak in rows:
        print(f"{path:<46}{ours:>16,}{truth:>16,}{ours - truth:>7,}{acc:>16,}{acc - truth:>+12,}")
    exact = sum(1 for r in rows if r[2] == r[3])
    print(f"{exact} of {len(rows)} configs exact; {len({r[0].split('/')[0] for r in rows})} families\n")

    ours_times = [time_ours(config) for _, config, *_ in rows]
    acc_times = [time_accelerate(config) for _, config, *_ in rows]
    ours_ms = statistics.median(ours_times) * 1000
    acc_ms = statistics.median(acc_times) * 1000
    print("Time per estimate from a config dict (median over configs of the median of repeats)")
    print(f"  estimator:                            {ours_ms:8.3f} ms   (goal < 5 ms; slowest config "
          f"{max(ours_times) * 1000:.3f} ms)")
    print(f"  accelerate estimate-memory's work:    {acc_ms:8.1f} ms   (torch + transformers already imported)")
    print(f"  ratio:                                {acc_ms / ours_ms:8.0f} x\n")

    print("One estimate in a fresh process (Llama-3.1-8B), imports included")
    print(f"  estimator:                            {ours_cold[0] * 1000:8.1f} ms, peak RSS {ours_cold[1]:6.0f} MiB")
    print(f"  accelerate estimate-memory's work:    {acc_cold[0] * 1000:8.1f} ms, peak RSS {acc_cold[1]:6.0f} MiB\n")

    print("Full fine-tune at batch 1 (bf16 mixed precision, AdamW)")
    for path, config, *_rest, acc_peak in rows:
        if path.split("/")[0] in ("llama", "mistral", "qwen2", "gemma", "clip", "t5"):
            mem = estimate(config).memory["full_finetune"]["batch_1_bytes"]
            print(f"  {path:<44} estimator {mem / 2**30:8.2f} GiB   accelerate {acc_peak / 2**30:8.2f} GiB "
                  "(largest stage, no activations)")


if __name__ == "__main__":
    main()
