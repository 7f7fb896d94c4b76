"""hubwatch's KV cache per sequence beside hf-mem's (0.5.6) on the same configs, with the reason for every difference.

hf-mem needs the Hub to run (it fetches config.json and safetensors headers itself), so its published formula is
used instead: ``compute_safetensors_kv_cache_size`` (hf_mem/safetensors/kv_cache.py), installed from PyPI into a
temporary directory when pip can reach a registry; a copy of its rule below when it cannot (said in the output).
Figures: over the configs and contexts, how often and how far hf-mem's figure departs from hubwatch's (vLLM's);
each config's bytes and the reason for every difference go to the benchmark's log.
Run: python -m benchmarks run serving_kv
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from estimator.kv_cache import layout

FIXTURES = ROOT / "tests" / "fixtures" / "estimator"
CONFIGS = ["configs/llama/Llama-3.1-8B.json", "configs/mistral/Mistral-7B-v0.1.json", "configs/gemma2/gemma-2-2b.json",
           "configs/gemma3_text/gemma-3-1b-pt.json", "serving/gpt_oss/gpt-oss-20b.json",
           "serving/cohere2/c4ai-command-r7b-12-2024.json", "serving/deepseek_v3/DeepSeek-V3.json",
           "serving/jamba/Jamba-v0.1.json", "serving/qwen3_next/Qwen3-Next-80B-A3B-Instruct.json",
           "serving/falcon_h1/Falcon-H1-0.5B-Instruct.json", "serving/lfm2/LFM2-1.2B.json",
           "configs/falcon/falcon-7b.json"]
CONTEXTS = (8192, 32768, 131072)
BENCHMARK = Benchmark(
    name="serving_kv",
    about="hubwatch's KV cache per sequence beside hf-mem 0.5.6's on the same configs (pip-installs hf-mem when it can)",
    tags=("slow", "estimator"),
    figures=(
        Figure("config x context cases", "cases"),
        Figure("cases where hf-mem's figure equals hubwatch's", "cases"),
        Figure("cases hf-mem fails on", "cases"),
        Figure("largest ratio hf-mem / hubwatch", "ratio"),
        Figure("smallest ratio hf-mem / hubwatch", "ratio"),
        Figure("hf-mem from its wheel (1) or its rule restated (0)", "flag"),
    ),
)


def _hf_mem_rule():
    """hf-mem's function, from the installed package, or None when it cannot be installed."""
    target = Path(tempfile.mkdtemp(prefix="hfmem"))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                           "hf-mem==0.5.6"], capture_output=True, text=True)
    if done.returncode:
        return None
    sys.path.insert(0, str(target))
    from hf_mem.safetensors.kv_cache import compute_safetensors_kv_cache_size

    return compute_safetensors_kv_cache_size


def _copied_rule(config: dict, cache_dtype: str, max_model_len: int, batch_size: int = 1) -> int:
    """hf-mem 0.5.6's rule restated: 2 x (full layers x len + sliding layers x tokens) x kv heads x head_dim x
    bytes, a sliding layer in a hybrid costing the full length, every layer counted as attention."""
    layers = config["num_hidden_layers"]
    if "sliding_window_pattern" in config:
        full = layers // config["sliding_window_pattern"]
    elif "layer_types" in config:
        full = sum(t in {"attention", "full_attention", "global_attention"} for t in config["layer_types"])
    else:
        full = layers
    sliding = layers - full
    window = config.get("sliding_window") or max_model_len
    tokens = max_model_len if full and sliding else min(window, max_model_len)
    kv = config.get("num_key_value_heads", config["num_attention_heads"])
    head_dim = config.get("head_dim", config["hidden_size"] // config["num_attention_heads"])
    return 2 * (full * max_model_len + sliding * tokens) * kv * head_dim * 2 * batch_size


def _why(config: dict, ours: int, theirs: int) -> str:
    lay = layout(config)
    kinds = {g.kind for g in lay.groups}
    if ours == theirs:
        return "same"
    reasons = []
    if "latent" in kinds:
        reasons.append("MLA: hf-mem prices 128 decompressed K/V heads a layer; vLLM caches the 576-wide latent")
    attention = sum(g.count for g in lay.groups if g.kind in ("full", "sliding", "latent"))
    if "state" in kinds and attention == config.get("num_hidden_layers"):
        reasons.append("parallel hybrid: every layer has attention, which hf-mem prices right, beside a mamba state "
                       "it leaves out (fixed per sequence, in hubwatch's figure)")
    elif "state" in kinds:
        reasons.append("hybrid: hf-mem counts every layer as attention; only the attention layers grow, the "
                       "mamba/linear layers keep a fixed state (in hubwatch's figure)")
    if "sliding" in kinds and "full" in kinds:
        reasons.append("interleaved sliding: hf-mem reserves the full length for sliding layers of a hybrid; vLLM's "
                       "SlidingWindowSpec holds window - 1 + 2048 batched tokens")
    elif "sliding" in kinds:
        reasons.append("sliding: hf-mem keeps the window; vLLM keeps window - 1 + 2048 batched tokens, in pages")
    if config.get("sliding_window_pattern") and not config.get("layer_types"):
        reasons.append("pattern: hf-mem counts layers // pattern as full")
    if config.get("model_type") == "falcon" and config.get("multi_query"):
        reasons.append("MQA: Falcon's config has no num_key_value_heads, so hf-mem prices one K/V head per query "
                       "head (multi_query not read)")
    return "; ".join(reasons) or "pages: vLLM rounds to 16-token pages"


def measure(size: int | None = None) -> dict[str, float]:
    installed = _hf_mem_rule()
    detail("hf-mem:", "compute_safetensors_kv_cache_size from the hf-mem 0.5.6 wheel" if installed else
           "not installable here; its 0.5.6 rule restated (_copied_rule)")
    rule = installed or _copied_rule
    detail(f"{'config':<48}{'context':>9}{'hubwatch vLLM':>16}{'hubwatch hf':>16}{'hf-mem':>16}{'hf-mem/ours':>12}")
    ratios, same, fails = [], 0, 0
    for path in CONFIGS:
        config = json.loads((FIXTURES / path).read_text())
        lay = layout(config)
        for context in CONTEXTS:
            ours = lay.at_context("vllm", context, 2) + lay.fixed_bytes("vllm", 2)
            hf = lay.at_context("transformers", context, 2) + lay.fixed_bytes("transformers", 2)
            try:
                theirs = rule(config, "BF16", context)
                ratio = f"{theirs / ours:.2f}x"
                ratios.append(theirs / ours)
                same += theirs == ours
            except (KeyError, TypeError, ZeroDivisionError) as err:
                theirs, ratio = f"fails: {type(err).__name__} {err}", "-"
                fails += 1
            detail(f"{path.split('/', 1)[1]:<48}{context:>9}{ours:>16,}{hf:>16,}"
                   f"{theirs if isinstance(theirs, str) else f'{theirs:,}':>16}{ratio:>12}")
        detail(f"  why: {_why(config, ours, theirs if isinstance(theirs, int) else -1)}")
    return {"config x context cases": len(CONFIGS) * len(CONTEXTS), "cases where hf-mem's figure equals hubwatch's": same,
            "cases hf-mem fails on": fails, "largest ratio hf-mem / hubwatch": max(ratios),
            "smallest ratio hf-mem / hubwatch": min(ratios), "hf-mem from its wheel (1) or its rule restated (0)": int(bool(installed))}


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
