"""Record the ground truth the estimator's default tests compare with: transformers' parameter counts, towers and
linears, the tensors a checkpoint holds, the activations a forward saves, and PEFT LoRA steps in the harness.

Needs the `groundtruth` extra (torch, transformers, peft):

    .venv/bin/pip install -e '.[groundtruth]'
    .venv/bin/python tests/estimator/record_truth.py          # rewrites tests/fixtures/estimator/recorded_truth.json
    .venv/bin/python tests/estimator/record_truth.py manifests   # only those sections, the others kept

The live versions of the same tests (`pytest -m groundtruth`) recompute these figures; rerun this script when
transformers' models change, and review the diff of the fixture like code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

from estimator_compare import measure_saved  # noqa: E402 - after the path set-up above
from estimator_configs import RECORDED, load_config  # noqa: E402
from estimator_truth import count_parameters, linear_roles, saved_tensors, tower_counts  # noqa: E402
from step_truth import step_peaks  # noqa: E402
from test_estimator_activations import CASES as ACTIVATION_CASES  # noqa: E402
from test_estimator_activations import case_key  # noqa: E402
from test_estimator_lora_targets import CASES as STEP_CASES  # noqa: E402
from test_estimator_lora_targets import ROLE_PATHS, step_key  # noqa: E402
from test_estimator_manifest import MANIFEST_CONFIGS  # noqa: E402
from test_estimator_parameters import CONFIGS, TOWERS  # noqa: E402


def _stock(path: str) -> dict:
    """The config as transformers' own class reads it: a custom-code config without its auto_map."""
    return {k: v for k, v in load_config(path).items() if k != "auto_map"}


def _activations() -> dict:
    out = {}
    for path, batch, seq in ACTIVATION_CASES:
        layer, fixed = measure_saved(load_config(path), batch, seq)
        out[case_key(path, batch, seq)] = {"layer": layer, "fixed": fixed}
        print("activations", path, batch, seq, layer, fixed, flush=True)
    return out


def _lora_steps() -> dict:
    out = {}
    for path, rank, targets, batch in STEP_CASES:
        out[step_key(path, rank, targets, batch)] = step_peaks(load_config(path), "lora", batch, 512, lora_rank=rank, lora_targets=targets)
        print("lora step", path, rank, targets, batch, out[step_key(path, rank, targets, batch)], flush=True)
    return out


SECTIONS = {
    "parameters": lambda: {path: count_parameters(load_config(path)) for path in CONFIGS},
    "towers": lambda: {path: tower_counts(load_config(path), modules, loose) for path, modules, loose in TOWERS},
    "linear_roles": lambda: {path: linear_roles(load_config(path)) for path in ROLE_PATHS},
    "manifests": lambda: {path: saved_tensors(_stock(path)) for path in MANIFEST_CONFIGS},
    "activations": _activations,
    "lora_steps": _lora_steps,
}


def record(sections: list[str]) -> dict:
    figures = json.loads(RECORDED.read_text()) if sections and RECORDED.exists() else {}
    for name in sections or SECTIONS:
        figures[name] = SECTIONS[name]()
    return figures


if __name__ == "__main__":
    import torch
    import transformers

    figures = record(sys.argv[1:])
    figures["recorded_with"] = {"torch": torch.__version__, "transformers": transformers.__version__}
    RECORDED.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
    print(f"wrote {RECORDED}")
