"""`hubwatch estimate --serve`: serving per card on the table and in --json, additive to the existing output."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import run_cli

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "estimator"
LLAMA = str(FIXTURES / "configs" / "llama" / "Llama-3.1-8B.json")
DEEPSEEK = str(FIXTURES / "serving" / "deepseek_v3" / "DeepSeek-V3.json")


def test_serve_json_holds_the_cache_per_runtime():
    """--serve --json has serving.kv_cache per runtime with at_context (asked contexts too) and fixed bytes; fp8
    halves the cache."""
    bf16 = json.loads(run_cli("estimate", "--config-file", LLAMA, "--serve", "--context", "4096", "--json").stdout)
    fp8 = json.loads(run_cli("estimate", "--config-file", LLAMA, "--serve", "--kv-dtype", "fp8", "--json").stdout)
    for runtime in ("transformers", "vllm"):
        cache = bf16["serving"]["kv_cache"][runtime]
        assert cache["at_context"]["4096"] == 536_870_912 and cache["fixed_bytes_per_sequence"] == 0
        assert fp8["serving"]["kv_cache"][runtime]["at_context"]["8192"] * 2 == cache["at_context"]["8192"]


def test_without_serve_the_output_is_unchanged():
    """Without --serve, --json has no serving key and the table no serving section; --context needs --serve."""
    plain = run_cli("estimate", "--config-file", LLAMA, "--json")
    assert "serving" not in json.loads(plain.stdout)
    assert "Serving" not in run_cli("estimate", "--config-file", LLAMA).stdout
    assert run_cli("estimate", "--config-file", LLAMA, "--context", "4096").returncode == 2


def test_serve_on_an_unmodelled_architecture_still_prices_the_cache():
    """DeepSeek-V3 (no parameter builder): --serve still gives the latent cache, with the weights unknown."""
    out = run_cli("estimate", "--config-file", DEEPSEEK, "--serve")
    assert out.returncode == 0, out.stderr
    assert "latent attention: 70,272 bytes a token" in out.stdout and "weights' size is unknown" in out.stdout
