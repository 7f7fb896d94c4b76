"""The module graph per revision (estimator/graph.py): the time to build every tower's graph from config.json, as the
pipeline does for each estimated revision and `hubwatch estimate --structure` for one.

Configs: every fixture config with a graph builder (every family estimator/graph.py models, LLaVA's three towers
among them), the largest being DINOv2-giant (40 layers, 566 nodes). Median and p90 ms over
repeats per config; the figure is the slowest config's median, against the issue's 5 ms goal per revision.
Run: python -m benchmarks run structure
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from estimator.graph import BUILDERS, structure_graph

FIXTURES = ROOT / "tests" / "fixtures" / "estimator" / "configs"
GOAL_MS = 5.0
REPEAT = 50
BENCHMARK = Benchmark(
    name="structure",
    about="Every tower's module graph from config.json per revision (estimator/graph.py), against the 5 ms goal",
    tags=("quick", "estimator"),
    size="repeats per config",
    small=5,
    figures=(
        Figure("graph per revision, median over configs", "ms", goal=GOAL_MS, margin=0.5),
        Figure("graph per revision, slowest config (median of repeats)", "ms", goal=GOAL_MS, margin=0.5),
        Figure("graph per revision, slowest config (p90 of repeats)", "ms"),
        Figure("nodes in the largest graph", "nodes"),
        Figure("configs measured", "configs"),
    ),
)


def _configs() -> list[tuple[str, dict]]:
    import json

    out = []
    for path in sorted(FIXTURES.glob("*/*.json")):
        config = json.loads(path.read_text())
        if config.get("model_type") in BUILDERS and path.parent.name != "custom":
            out.append((str(path.relative_to(FIXTURES)), config))
    return out


def measure(size: int | None) -> dict[str, float]:
    repeat = size or REPEAT
    medians, p90s, nodes = {}, {}, 0
    for name, config in _configs():
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            graph = structure_graph(config)
            times.append((time.perf_counter() - start) * 1000)
        times.sort()
        medians[name] = statistics.median(times)
        p90s[name] = times[int(0.9 * (len(times) - 1))]
        nodes = max(nodes, graph["node_count"])
        detail(f"{name}: {graph['node_count']} nodes, median {medians[name]:.3f} ms, p90 {p90s[name]:.3f} ms")
    slowest = max(medians, key=medians.__getitem__)
    return {"graph per revision, median over configs": statistics.median(medians.values()),
            "graph per revision, slowest config (median of repeats)": medians[slowest],
            "graph per revision, slowest config (p90 of repeats)": p90s[slowest],
            "nodes in the largest graph": nodes, "configs measured": len(medians)}


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
