"""What pricing a revision costs hubwatch: the cost section (estimator/cost.py: FLOPs from the structure, the
roofline per card for training and serving) and the cost change against the parent's (tracker/pipeline/cost_change.py),
per revision, over every fixture config and jina-clip-v2's weight manifest (custom code: structure from weights).

Goal (issue 39): cost per revision under 5 ms. Figures: the median and slowest config of the cost section alone
(what `--cost` adds to an estimate), of the comparison with the parent's, and the median of a whole estimate with
costs (parameters, memory, serving and cost together), for context.
Run: python -m benchmarks run cost   or   python benchmarks/bench_cost.py
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
from estimator import estimate
from estimator.api import _derive
from estimator.cost import Workload, cost
from estimator.errors import EstimateError
from estimator.reader import ConfigReader
from tracker.pipeline.cost_change import cost_change

FIXTURES = ROOT / "tests" / "fixtures" / "estimator"
JINA = ROOT / "tracker/standins/replay/histories/jinaai/jina-clip-v2/commits/0002-upload-jinaclipmodel/files/config.json"
REPEAT = 50
GOAL_MS = 5.0
MARGIN = 0.5  # medians of repeats on a shared 2-core machine
BENCHMARK = Benchmark(
    name="cost",
    about="Cost per revision: the cost section (FLOPs, training and serving roofline per card) and the cost change",
    tags=("quick", "estimator"),
    size="repeats per config",
    small=5,
    timeout_s=600,
    figures=(
        Figure("cost section, median over configs", "ms", goal=GOAL_MS, margin=MARGIN),
        Figure("cost section, slowest config", "ms", goal=GOAL_MS, margin=MARGIN),
        Figure("cost change against the parent's, median", "ms", goal=GOAL_MS, margin=MARGIN),
        Figure("whole estimate with costs, median over configs", "ms", note="parameters, memory, serving and cost"),
        Figure("configs priced", "configs"),
    ),
)


def cases() -> list[tuple[str, dict, dict | None]]:
    """(name, config, manifest) for every fixture config, and jina-clip-v2 with its real weight header."""
    out: list[tuple[str, dict, dict | None]] = [
        (str(p.relative_to(FIXTURES / "configs")), json.loads(p.read_text()), None)
        for p in sorted((FIXTURES / "configs").glob("*/*.json")) if p.parent.name != "custom"]
    header = json.loads((FIXTURES / "manifests" / "jina-clip-v2.json").read_text())  # name -> [dtype, shape]
    manifest = {name: (dtype, tuple(shape)) for name, (dtype, shape) in header.items()}
    out.append(("jina-clip-v2 (custom code, from weights)", json.loads(JINA.read_text()), manifest))
    return out


def _median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure(size: int | None = None) -> dict[str, float]:
    repeat = size or REPEAT
    workload = Workload()
    section, change, whole = {}, {}, {}
    refused = []
    for name, config, manifest in cases():
        try:
            result = estimate(config, manifest, cost=workload)
        except EstimateError as err:  # a config the estimate refuses by design (DINOv2's SwiGLU): nothing to price
            refused.append(f"{name} ({err})")
            continue
        if result.total is None:
            continue
        structure = _structure(config, manifest, result)
        args = (config, structure, result.total, result.memory, result.cards, result.serving)
        section[name] = _median_ms(lambda a=args: cost(*a, workload=workload), repeat)
        doubled = cost(*args, workload=Workload(epochs=20))
        change[name] = _median_ms(lambda c=result.cost, d=doubled: cost_change(c, d, 0.1), repeat)
        whole[name] = _median_ms(lambda c=config, m=manifest: estimate(c, m, cost=workload), max(1, repeat // 5))
        detail(f"{name:<52} cost {section[name]:6.3f} ms  change {change[name]:6.3f} ms  whole {whole[name]:7.3f} ms")
    slowest = max(section, key=lambda k: section[k])
    detail(f"slowest: {slowest}; refused, not priced: {', '.join(refused) or 'none'}")
    return {"cost section, median over configs": statistics.median(section.values()),
            "cost section, slowest config": section[slowest],
            "cost change against the parent's, median": statistics.median(change.values()),
            "whole estimate with costs, median over configs": statistics.median(whole.values()),
            "configs priced": len(section)}


def _structure(config: dict, manifest: dict | None, result) -> object:
    """The structure the estimate priced (derived again: the estimate does not keep it)."""
    from estimator.manifest import count_manifest

    counted = count_manifest(manifest) if manifest is not None else None
    return _derive(ConfigReader(config, ""), result.input.get("seq_len_cap", 2048), counted, [], manifest)


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
