"""benchmarks/bench_cost_gpu.py's parts that need no GPU: the FLOPs it divides by, the bytes a decode step reads,
the utilisation formula, the card names, and the rows' shape (estimator/utilisation.py's Measurement)."""

from __future__ import annotations

import json

import pytest

from benchmarks import bench_cost_gpu as bench
from estimator.utilisation import Measurement, declared


def _config(path: str) -> dict:
    return json.loads((bench.CONFIGS / path).read_text())


def test_the_models_are_at_least_six_fixture_configs() -> None:
    assert len(bench.MODELS) >= 6 and all((bench.CONFIGS / m).exists() for m in bench.MODELS)


def test_training_flops_are_the_estimators_full_fine_tune_count() -> None:
    """GPT-2 at 1,024 tokens, batch 4: 4 x (3 x forward) where the forward is 2 x the matmul weights x tokens plus
    attention's two products (12 layers x 2 x 2 x 1024^2 x 768), the LM head included."""
    c = _config("gpt2/gpt2.json")
    h, layers, vocab, seq = c["n_embd"], c["n_layer"], c["vocab_size"], 1024
    matmuls = layers * 12 * h * h + vocab * h
    forward = 2 * matmuls * seq + layers * 4 * seq * seq * h
    assert bench.train_flops(c, 4, seq) == pytest.approx(4 * 3 * forward, rel=1e-3)


def test_decode_bytes_are_the_weights_and_every_sequences_cache() -> None:
    """Llama-3.2-1B, 8 sequences of 1,024 tokens: bf16 weights + 8 x 16 layers x (K and V) x 8 KV heads x 64 x 2
    bytes x 1,024 tokens."""
    c = _config("llama/Llama-3.2-1B.json")
    kv = 2 * c["num_hidden_layers"] * c["num_key_value_heads"] * (c["hidden_size"] // c["num_attention_heads"]) * 2
    assert bench.decode_bytes(c, 1_000_000, 8, 1024) == 2 * 1_000_000 + 8 * kv * 1024


def test_utilisation_is_work_over_time_over_peak_and_refuses_nonsense() -> None:
    assert bench.utilisation(4e14, 2.0, 1e15) == pytest.approx(0.2)
    for bad in ((1.0, 0.0, 1.0), (1.0, 1.0, 0.0), (-1.0, 1.0, 1.0)):
        with pytest.raises(ValueError):
            bench.utilisation(*bad)


@pytest.mark.parametrize(("device", "card"), [("NVIDIA H100 80GB HBM3", "H100 80GB"), ("NVIDIA H200", "H200 141GB"),
                                             ("NVIDIA A100-SXM4-40GB", "A100 40GB"), ("NVIDIA A100-SXM4-80GB", "A100 80GB"),
                                             ("NVIDIA A10G", "A10G 24GB"), ("Tesla T4", "T4 16GB"), ("NVIDIA B200", None)])
def test_torch_device_names_map_to_the_card_table(device: str, card: str | None) -> None:
    assert bench.card_name(device) == card


def test_rows_are_measurements_that_replace_the_published_ones() -> None:
    """A row the benchmark writes loads as a Measurement marked hubwatch's; two training rows at 30% and 34% make
    the declared training utilisation 30%; the summary gives medians in % and the models timed."""
    rows = [bench.measurement("train", "H100 80GB", m, 1024, v, {"seconds": 1.0})
            for m, v in (("gpt2/gpt2.json", 0.30), ("qwen2/Qwen2.5-0.5B.json", 0.34))]
    rows.append(bench.measurement("bandwidth", "H100 80GB", "gpt2/gpt2.json", 1024, 0.5, {}))
    loaded = [Measurement(**{k: r[k] for k in Measurement.__dataclass_fields__}) for r in rows]
    assert all(m.hubwatch for m in loaded) and declared("train", loaded) == 0.30
    assert bench.summarise(rows) == {"models timed": 2.0, "training MFU, median over models": pytest.approx(32.0),
                                     "decode bandwidth utilisation, median over models": pytest.approx(50.0)}
