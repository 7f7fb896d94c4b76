"""Record the module graphs transformers builds for tests/estimator/graph_cases.py (the `groundtruth` extra):

    .venv/bin/python tests/estimator/record_graph.py    # rewrites tests/fixtures/estimator/recorded_graph.json

The live tests (`pytest -m groundtruth tests/estimator/test_estimator_graph.py`) recompute the same; review the
fixture's diff like code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

from estimator_configs import case_config  # noqa: E402 - after the path set-up above
from graph_cases import (  # noqa: E402
    BROKEN,
    CASES,
    HEADS,
    MOE_CASES,
    RECORDED_GRAPH,
    VARIANTS,
    broken_config,
    broken_id,
    head_config,
    head_id,
    variant_config,
)
from graph_truth import real_failure, real_graph, real_moe  # noqa: E402

if __name__ == "__main__":
    import torch
    import transformers

    figures = {"graphs": {case: real_graph(case_config(case)) for case in CASES},
               "moe": {case: real_moe(case_config(case)) for case in MOE_CASES},
               "heads": {head_id(c, a): real_graph(head_config(c, a, x)) for c, a, x in HEADS},
               "variants": {broken_id(c, k, v): real_graph(variant_config(c, k, v)) for c, k, v in VARIANTS},
               "broken": {broken_id(c, k, v): real_failure(broken_config(c, k, v)) for c, k, v, _ in BROKEN},
               "recorded_with": {"torch": torch.__version__, "transformers": transformers.__version__}}
    RECORDED_GRAPH.write_text(json.dumps(figures, indent=None, separators=(",", ":")).replace('],["', '],\n["')
                              + "\n")
