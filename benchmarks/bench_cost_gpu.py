"""The cost roofline's utilisations measured on this machine's CUDA card: real bf16 training steps and decode steps
of small-to-mid models (random weights from the committed fixture configs), each step's model FLOPs utilisation
(MFU) and decode bandwidth utilisation (MBU) written next to the utilisation the estimator declares.

What a session with a lent GPU runs (tag gpu; "not run" without CUDA):

    python -m benchmarks run cost_gpu          (or: python benchmarks/bench_cost_gpu.py --size 300)

Besides the figures it writes benchmarks/results/cost_gpu.json: one row per model and step kind in the shape of
estimator/utilisation.py's Measurement (kind train / bandwidth, card, model, tokens, value, source, read_on,
hubwatch=true) with the seconds, FLOPs and bytes it came from. Committed and added to utilisation.MEASURED, those
rows replace the published ones of their kind: the declared utilisation then comes from these measurements.

Training step: AdamW on bf16 autocast over fp32 weights, batch TRAIN_BATCH x TRAIN_SEQ tokens; MFU = the
estimator's training FLOPs of that batch (3 x forward: cost.Flops.train) / (seconds x the card's dense bf16 peak).
Decode step: bf16 weights, DECODE_BATCH sequences with a KV cache of DECODE_CONTEXT tokens, one token each;
MBU = (weights + every sequence's KV cache) bytes / (seconds x the card's bandwidth). Each is the median of
REPEAT timed steps after WARMUP untimed ones, synchronised around.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.declare import Benchmark, Figure, detail, run_alone

CONFIGS = ROOT / "tests" / "fixtures" / "estimator" / "configs"
OUT = ROOT / "benchmarks" / "results" / "cost_gpu.json"
MODELS = ("gpt2/gpt2.json", "gpt_neox/pythia-160m.json", "qwen2/Qwen2.5-0.5B.json", "qwen3/Qwen3-0.6B.json",
          "llama/Llama-3.2-1B.json", "gemma3_text/gemma-3-1b-pt.json", "phi/phi-2.json",
          "starcoder2/starcoder2-3b.json")
TRAIN_BATCH, TRAIN_SEQ = 4, 1024
DECODE_BATCH, DECODE_CONTEXT = 8, 1024
WARMUP, REPEAT = 2, 5
# card name as torch reports it -> the card table's name (estimator/cards.py)
CARD_NAMES = (("H200", "H200 141GB"), ("H100", "H100 80GB"), ("A100-SXM4-40GB", "A100 40GB"),
              ("A100", "A100 80GB"), ("A10G", "A10G 24GB"), ("L4", "L4 24GB"), ("T4", "T4 16GB"))

BENCHMARK = Benchmark(
    name="cost_gpu",
    about="Training MFU and decode bandwidth utilisation measured on this CUDA card, beside the declared ones",
    tags=("gpu", "estimator"),
    size="seconds of measuring before no further model starts (default 420)",
    small=60,
    requires=("cuda",),
    timeout_s=1200,
    figures=(
        Figure("training MFU, median over models", "%", note="the estimator declares cost.TRAIN_UTILISATION"),
        Figure("decode bandwidth utilisation, median over models", "%",
               note="the estimator declares cost.BANDWIDTH_UTILISATION"),
        Figure("models timed", "models", goal=6, direction="higher"),
    ),
)


def card_name(device_name: str) -> str | None:
    """The card table's name for torch's device name ("NVIDIA H100 80GB HBM3" -> "H100 80GB"); None: not in it."""
    for marker, name in CARD_NAMES:
        if marker in device_name:
            return name
    return None


def train_flops(config: Mapping, batch: int, seq: int) -> int:
    """The estimator's FLOPs of one full fine-tune step over ``batch`` samples of ``seq`` tokens."""
    from estimator import estimate
    from estimator.cost import Workload

    result = estimate(dict(config), seq_len_cap=seq, cost=Workload()).to_dict()
    if result["input"].get("sequence_length") != seq or result["cost"]["train"]["flops_per_sample"] is None:
        raise ValueError(f"the estimate is not at {seq} tokens: {result['input']}")
    return batch * result["cost"]["train"]["flops_per_sample"]


def decode_bytes(config: Mapping, parameters: int, batch: int, context: int) -> int:
    """Bytes one decode step reads: the bf16 weights once and every sequence's KV cache at ``context`` tokens."""
    from estimator.kv_cache import layout
    from estimator.serving import per_sequence

    return 2 * parameters + batch * per_sequence(layout(dict(config)), context, 2)


def utilisation(work: float, seconds: float, peak: float) -> float:
    """The fraction of ``peak`` (FLOP/s or bytes/s) that ``work`` done in ``seconds`` reached."""
    if seconds <= 0 or peak <= 0 or work < 0:
        raise ValueError(f"utilisation of {work} in {seconds} s at a peak of {peak}")
    return work / seconds / peak


def measurement(kind: str, card: str, model: str, tokens: int, value: float, extra: Mapping) -> dict:
    """One row in estimator/utilisation.py's Measurement shape (hubwatch=True), with what it was computed from."""
    return {"kind": kind, "card": card, "model": model, "tokens": tokens, "value": round(value, 4),
            "source": "benchmarks/results/cost_gpu.json (benchmarks/bench_cost_gpu.py)",
            "read_on": datetime.now(UTC).date().isoformat(), "hubwatch": True, **extra}


def summarise(rows: list[dict]) -> dict[str, float]:
    """The benchmark's figures from the rows: median MFU and MBU in %, and how many models were timed."""
    train = [r["value"] for r in rows if r["kind"] == "train"]
    decode = [r["value"] for r in rows if r["kind"] == "bandwidth"]
    out: dict[str, float] = {"models timed": float(len({r["model"] for r in rows}))}
    if train:
        out["training MFU, median over models"] = 100 * statistics.median(train)
    if decode:
        out["decode bandwidth utilisation, median over models"] = 100 * statistics.median(decode)
    return out


def _timed(step, torch) -> float:
    for _ in range(WARMUP):
        step()
    times = []
    for _ in range(REPEAT):
        torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _measure_model(path: str, card, torch, transformers) -> list[dict]:
    config = json.loads((CONFIGS / path).read_text())
    hf_config = transformers.AutoConfig.for_model(**{k: v for k, v in config.items() if k != "architectures"})
    model = transformers.AutoModelForCausalLM.from_config(hf_config, torch_dtype=torch.float32).cuda()
    parameters = sum(p.numel() for p in model.parameters())
    vocab = hf_config.vocab_size
    ids = torch.randint(0, vocab, (TRAIN_BATCH, TRAIN_SEQ), device="cuda")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)

    def train_step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    seconds = _timed(train_step, torch)
    peak = card.peak_flops("bf16")[0]
    work = train_flops(config, TRAIN_BATCH, TRAIN_SEQ)
    rows = [measurement("train", card.name, path, TRAIN_SEQ, utilisation(work, seconds, peak),
                        {"seconds": seconds, "flops": work, "peak_flops": peak, "batch": TRAIN_BATCH})]
    optimizer.state.clear()
    model.to(torch.bfloat16).eval()
    prompt = torch.randint(0, vocab, (DECODE_BATCH, DECODE_CONTEXT - 1), device="cuda")
    with torch.no_grad():
        cache = model(input_ids=prompt, use_cache=True).past_key_values
        token = torch.randint(0, vocab, (DECODE_BATCH, 1), device="cuda")

        def decode_step() -> None:
            model(input_ids=token, past_key_values=cache, use_cache=True)
            if hasattr(cache, "crop"):  # keep the context at DECODE_CONTEXT tokens step after step
                cache.crop(DECODE_CONTEXT - 1)

        seconds = _timed(decode_step, torch)
    bandwidth = card.bandwidth_gb_s * 1e9
    moved = decode_bytes(config, parameters, DECODE_BATCH, DECODE_CONTEXT)
    rows.append(measurement("bandwidth", card.name, path, DECODE_CONTEXT, utilisation(moved, seconds, bandwidth),
                            {"seconds": seconds, "bytes": moved, "bandwidth": bandwidth, "batch": DECODE_BATCH}))
    return rows


def measure(size: int | None = None) -> dict[str, float]:
    import torch
    import transformers

    from estimator.cards import PRICED_CARDS

    device = torch.cuda.get_device_name(0)
    name = card_name(device)
    if name is None:
        raise SystemExit(f"{device} is not in the card table (estimator/cards.py): no peak to divide by")
    card = PRICED_CARDS[name]
    deadline = time.monotonic() + (size or 420)
    rows: list[dict] = []
    for path in MODELS:
        if time.monotonic() > deadline:
            detail(f"budget spent before {path}")
            break
        try:
            rows.extend(_measure_model(path, card, torch, transformers))
            torch.cuda.empty_cache()
        except Exception as err:  # noqa: BLE001 (one model failing leaves the others' rows)
            detail(f"{path}: {type(err).__name__}: {err}")
            torch.cuda.empty_cache()
        OUT.write_text(json.dumps({"device": device, "card": name, "rows": rows}, indent=1) + "\n")
        for r in rows[-2:]:
            detail(f"{r['model']} {r['kind']}: {r['value']:.1%} ({r['seconds'] * 1000:.1f} ms)")
    return summarise(rows)


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
