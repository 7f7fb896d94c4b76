"""The estimator is pure: no torch, no transformers, nothing else of hubwatch, no I/O; inputs untouched."""

from __future__ import annotations

import ast
import copy
import subprocess
import sys
from pathlib import Path

from estimator_configs import load_config

from estimator import crossings, estimate

PACKAGE = Path(__file__).resolve().parents[2] / "estimator"


def test_importing_and_estimating_loads_no_heavy_library():
    """A fresh interpreter estimates Llama without importing torch, transformers or another hubwatch package."""
    fixture = PACKAGE.parent / "tests/fixtures/estimator/configs/llama/Llama-3.1-8B.json"
    code = ("import json, sys; from estimator import estimate\n"
            f"estimate(json.loads({fixture.read_text()!r}))\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'transformers', 'tracker', 'storage', 'feeds', 'numpy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_sources_import_only_the_standard_library_and_themselves():
    """Every module under estimator/ imports only a few standard modules and its own, and opens no file."""
    allowed = {"__future__", "collections", "dataclasses", "math", "re", "statistics", "typing", "packaging"}  # lints: versions
    sources = sorted(PACKAGE.rglob("*.py"))
    assert PACKAGE / "__init__.py" in sources and len(sources) >= 5, f"no estimator sources under {PACKAGE}"
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                assert {a.name.split(".")[0] for a in node.names} <= allowed, path
            elif isinstance(node, ast.ImportFrom) and not node.level:
                assert (node.module or "").split(".")[0] in allowed, path
            elif isinstance(node, ast.Call):
                assert getattr(node.func, "id", "") not in ("open", "print", "input"), path


def test_estimate_does_not_modify_its_input():
    """The caller's config and manifest come back as they went in."""
    config = load_config("llava/llava-1.5-7b-hf.json")
    manifest = {"lm_head.weight": ("BF16", (32064, 4096))}
    before = (copy.deepcopy(config), copy.deepcopy(manifest))
    estimate(config, manifest)
    assert (config, manifest) == before


def test_crossings_say_what_no_longer_fits():
    """Quadrupling Qwen2.5-0.5B's layers pushes fine-tuning off the T4, said in a sentence a person reads."""
    config = load_config("qwen2/Qwen2.5-0.5B.json")
    bigger = {**config, "num_hidden_layers": 96}
    changes = crossings(estimate(config), estimate(bigger))
    t4 = [c for c in changes if c.card == "T4 16GB" and c.mode == "full_finetune_gc"]
    assert t4 and (t4[0].before, t4[0].after) == (2, 0)
    assert t4[0].summary == "full fine-tune with gradient checkpointing no longer fits T4 16GB (was batch 2)"
    assert crossings(estimate(config), estimate(config)) == []
