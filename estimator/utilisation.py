"""Where the cost roofline's utilisations come from: published measurements, each with its source and the day it
was read, and the rule that turns them into the declared figure (cost.py's TRAIN_UTILISATION,
SERVE_UTILISATION and BANDWIDTH_UTILISATION). Pure data and arithmetic; tests/estimator/test_utilisation.py
checks the declared figures are what the rule gives.

The rule, for each kind: the median of the rows of that kind, rounded down to a multiple of 5% (a published row
is a tuned stack, FlashAttention and hand-picked micro-batches, which a plain fine-tune or serving stack does not
beat). Rows hubwatch measured itself (benchmarks/bench_cost_gpu.py on a lent card, ``source`` naming that file)
replace the published rows of their kind as soon as there is one: the declared figure then comes from hubwatch's
own measurements.

Kinds:

- ``train``: model FLOPs utilisation (MFU) of a bf16 training step: the model's FLOPs (6 x parameters x tokens
  plus attention, no recomputation counted) over the card's dense bf16 peak. Published rows: MosaicML's LLM
  Foundry one-node (8-GPU) H100 bf16 runs of MPT models up to 7B parameters at up to 4,096 tokens, the card
  generation the table's dearest cards belong to. Their A100 runs reach 45-64% and are kept as ``train_a100``
  for reference (not used: the H100 rows are the lower, and newer cards keep their tensor cores less busy).
- ``serve``: the share of the dense peak a prefill reaches. Prefill is a training step's forward half over the
  same matrices; no published prefill MFU was read, so the rule takes the same H100 MFU rows and the A100 ones
  together (a forward has no optimizer or gradient traffic dragging it down).
- ``bandwidth``: model bandwidth utilisation (MBU) of a decode step: bytes read (weights, and the KV cache) per
  second over the datasheet bandwidth. Published rows: gpt-fast's batch-1 decode of bf16 Llama-2-7B and int8
  Llama-2-70B on one A100-80GB (power-limited to 330 W, so a little below an unrestricted card).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

READ_ON = "2026-12-05"
FOUNDRY = ("MosaicML LLM Foundry, scripts/train/benchmarking/README.md (\"MPT Training Benchmarks\"), "
           "https://github.com/mosaicml/llm-foundry/blob/main/scripts/train/benchmarking/README.md")
GPT_FAST = ("pytorch-labs/gpt-fast README.md, Benchmarks table (8xA100-80GB power-limited to 330 W, batch size 1), "
            "https://github.com/pytorch-labs/gpt-fast")
MEGATRON = ("NVIDIA Megatron-LM README.md, MFU/HFU table (A100s, data parallel size 1), "
            "https://github.com/NVIDIA/Megatron-LM")
STEP = 0.05  # declared figures are rounded down to this


@dataclass(frozen=True)
class Measurement:
    """One measured utilisation: its kind (train, serve, bandwidth, or a reference kind), the card, the model and
    its sequence length, the fraction measured, where it was published and the day it was read."""

    kind: str
    card: str
    model: str
    tokens: int
    value: float
    source: str
    read_on: str = READ_ON
    hubwatch: bool = False  # measured by benchmarks/bench_cost_gpu.py, not read from a publication

    def to_dict(self) -> dict:
        return {"kind": self.kind, "card": self.card, "model": self.model, "tokens": self.tokens,
                "value": self.value, "source": self.source, "read_on": self.read_on, "hubwatch": self.hubwatch}


def _foundry(card: str, rows: Iterable[tuple[str, int, float]]) -> list[Measurement]:
    return [Measurement("train" if card == "H100 80GB" else "train_a100", card, f"MPT-{model}", tokens, mfu / 100,
                        FOUNDRY) for model, tokens, mfu in rows]


# MFU (%) of MPT models up to 7B at up to 4,096 tokens, 8 GPUs (one node), bf16, as the README's tables give them
MEASURED: tuple[Measurement, ...] = (
    *_foundry("H100 80GB", [
        ("7b", 4096, 40.42), ("7b", 2048, 46.44), ("7b", 1024, 42.83), ("3b", 4096, 42.31), ("3b", 1024, 46.2),
        ("3b", 512, 46.32), ("1b", 4096, 40.26), ("1b", 2048, 41.82), ("1b", 1024, 41.95), ("1b", 512, 43.21),
        ("760m", 4096, 35.83), ("760m", 2048, 34.9), ("760m", 1024, 39.76), ("760m", 512, 40.42)]),
    *_foundry("A100 80GB", [
        ("7b", 4096, 54.84), ("7b", 2048, 64.23), ("7b", 1024, 58.01), ("3b", 4096, 60.53), ("3b", 2048, 62.11),
        ("3b", 1024, 62.73), ("3b", 512, 63.71), ("1b", 4096, 59.0), ("1b", 2048, 59.86), ("1b", 1024, 60.15),
        ("1b", 512, 60.68), ("760m", 4096, 56.05), ("760m", 2048, 56.85), ("760m", 1024, 47.76),
        ("760m", 512, 45.07), ("350m", 4096, 53.31), ("350m", 2048, 51.62), ("350m", 1024, 50.51),
        ("350m", 512, 50.61), ("125m", 4096, 46.08), ("125m", 2048, 44.79), ("125m", 1024, 43.15),
        ("125m", 512, 42.56)]),
    # Megatron-LM's smallest published configuration, for reference (many nodes, tensor and pipeline parallel)
    Measurement("train_reference", "A100 80GB", "GPT 22B", 2048, 0.415, MEGATRON),
    # achieved decode bandwidth / the A100-80GB's 2,039 GB/s datasheet bandwidth
    Measurement("bandwidth", "A100 80GB", "Llama-2-7B bf16, batch 1", 5, 1397.31 / 2039, GPT_FAST),
    Measurement("bandwidth", "A100 80GB", "Llama-2-70B int8, batch 1", 5, 1322.58 / 2039, GPT_FAST),
)

# Which rows each declared figure is derived from (hubwatch's own rows of the first kind replace them all)
RULES = {"train": ("train",), "serve": ("train", "train_a100"), "bandwidth": ("bandwidth",)}


def rows_for(figure: str, rows: Iterable[Measurement] = MEASURED) -> list[Measurement]:
    """The rows ``figure`` is derived from: hubwatch's own measurements of its kind where any exist, else the
    published rows the rule names."""
    rows = list(rows)
    own = [r for r in rows if r.hubwatch and r.kind == RULES[figure][0]]
    return own or [r for r in rows if r.kind in RULES[figure] and not r.hubwatch]


def declared(figure: str, rows: Iterable[Measurement] = MEASURED) -> float:
    """The declared utilisation: the median of ``rows_for(figure)``, rounded down to a multiple of 5%."""
    chosen = rows_for(figure, rows)
    if not chosen:
        raise ValueError(f"no measurement to derive the {figure} utilisation from")
    median = statistics.median(r.value for r in chosen)
    return round(math.floor(median / STEP + 1e-9) * STEP, 2)


def summary(figure: str, rows: Iterable[Measurement] = MEASURED) -> dict:
    """What a cost section says of a declared figure: its value, the median it was rounded from, how many rows of
    which sources, and whether hubwatch measured them."""
    chosen = rows_for(figure, rows)
    return {"value": declared(figure, chosen), "median": round(statistics.median(r.value for r in chosen), 4),
            "rows": len(chosen), "measured_by_hubwatch": any(r.hubwatch for r in chosen),
            "sources": sorted({f"{r.source} (read {r.read_on})" for r in chosen})}
