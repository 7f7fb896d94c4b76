"""The priced card table: per card its memory, peak dense throughput per dtype, memory bandwidth and an hourly
price, each with where it was read and when.

Memory comes from ``memory.CARDS`` (the table the memory figures were always sized on), so the two cannot drift.
Peak throughput is the vendor's dense figure (the datasheets print the 2:4-sparsity figure beside it, twice as
large; it is never used here). Prices are one GPU an hour, on demand, from one named price list; a card whose
price was not verified carries none, and its cost figures say "no price" while its times are still given.

``with_overrides`` applies the ``[cost] cards`` configuration ("CARD:field=value"); the overridden figure's source
becomes the configuration.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .errors import EstimateError
from .memory import CARDS as MEMORY

DTYPES = ("bf16", "fp16", "fp32", "fp8", "int8")
FIELDS = ("usd_per_hour", "bandwidth_gb_s", *(f"{d}_tflops" for d in DTYPES))
MAX_TFLOPS = 100_000.0      # a figure beyond this is a typo, not a card
MAX_BANDWIDTH = 100_000.0   # GB/s
MAX_PRICE = 10_000.0        # USD an hour

TAKEN = "2026-12-05"  # the day the datasheet figures below were written into this table
AWS_LIST = "AWS EC2 On-Demand pricing, us-east-1, Linux"
AWS_TAKEN = "2025-06 (AWS's list as last read; not re-read on " + TAKEN + ": no network beside the package registries)"
RECEIPTS = ("AWS EC2 On-Demand, us-east-1, per GPU as collected in datareceipts/data-receipts "
            "109-gpu-pricing/hyperscalers.json")
RECEIPTS_TAKEN = "2026-11-09 (that file's retrieval date)"


@dataclass(frozen=True)
class Card:
    """One GPU: memory (bytes), dense peak TFLOPS per dtype (absent: the card has no such tensor path),
    bandwidth (GB/s, decimal), price (USD per GPU-hour, None: no price), and each figure's source and date."""

    name: str
    memory_bytes: int
    tflops: Mapping[str, float]
    bandwidth_gb_s: float
    usd_per_hour: float | None
    sources: Mapping[str, str]

    def peak_flops(self, dtype: str) -> tuple[float, str]:
        """Dense FLOP/s for ``dtype`` and the dtype actually used: bf16 falls back to fp16 (T4 has no bf16:
        autocast runs fp16 there), fp8/int8 to bf16 where the card lacks them."""
        for candidate in _fallbacks(dtype):
            if candidate in self.tflops:
                return self.tflops[candidate] * 1e12, candidate
        raise EstimateError("cards", f"{self.name} has no peak throughput for {dtype}")

    def to_dict(self) -> dict:
        return {"memory_bytes": self.memory_bytes, "peak_tflops": dict(self.tflops),
                "bandwidth_gb_s": self.bandwidth_gb_s, "usd_per_hour": self.usd_per_hour,
                "sources": dict(self.sources)}


def _fallbacks(dtype: str) -> tuple[str, ...]:
    return {"bf16": ("bf16", "fp16"), "fp16": ("fp16", "bf16"), "fp32": ("fp32",),
            "fp8": ("fp8", "bf16", "fp16"), "int8": ("int8", "bf16", "fp16")}.get(dtype, (dtype,))


def _spec(datasheet: str) -> dict[str, str]:
    where = f"{datasheet} (dense, no sparsity), written {TAKEN}"
    return {"memory_bytes": f"marketed memory, as {datasheet} states it (memory.CARDS), written {TAKEN}",
            "peak_tflops": where, "bandwidth_gb_s": where}


def _card(name: str, tflops: dict[str, float], bandwidth: float, price: float | None, datasheet: str,
          price_source: str) -> Card:
    return Card(name, MEMORY[name], tflops, bandwidth, price, {**_spec(datasheet), "usd_per_hour": price_source})


T4 = _card("T4 16GB", {"fp16": 65.0, "fp32": 8.1, "int8": 130.0}, 320.0, 0.526,
           "NVIDIA T4 Tensor Core GPU datasheet", f"{AWS_LIST}: g4dn.xlarge (1 x T4), {AWS_TAKEN}")
L4 = _card("L4 24GB", {"bf16": 121.0, "fp16": 121.0, "fp32": 30.3, "fp8": 242.5, "int8": 242.5}, 300.0, 0.8048,
           "NVIDIA L4 Tensor Core GPU datasheet", f"{AWS_LIST}: g6.xlarge (1 x L4), {AWS_TAKEN}")
# AWS's A10G has no NVIDIA datasheet: it shares the A10's memory and bandwidth but has about half its tensor
# throughput (70 against 125 dense bf16 TFLOPS), as Baseten's spec table has it
A10G = _card("A10G 24GB", {"bf16": 70.0, "fp16": 70.0, "fp32": 31.52, "int8": 140.0}, 600.0, 1.006,
             "Baseten, \"NVIDIA A10 vs A10G for ML model inference\" (its spec table; AWS's A10G has no NVIDIA "
             "datasheet of its own)", f"{AWS_LIST}: g5.xlarge (1 x A10G), {AWS_TAKEN}")
A100_40 = _card("A100 40GB", {"bf16": 312.0, "fp16": 312.0, "fp32": 19.5, "int8": 624.0}, 1555.0, 2.7447,
                "NVIDIA A100 Tensor Core GPU datasheet (SXM4 40GB)",
                f"{RECEIPTS}: p4d.24xlarge / 8, {RECEIPTS_TAKEN}")
A100_80 = _card("A100 80GB", {"bf16": 312.0, "fp16": 312.0, "fp32": 19.5, "int8": 624.0}, 2039.0, 3.4309,
                "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB)",
                f"{RECEIPTS}: p4de.24xlarge / 8, {RECEIPTS_TAKEN}")
H100 = _card("H100 80GB", {"bf16": 989.4, "fp16": 989.4, "fp32": 66.9, "fp8": 1978.9, "int8": 1978.9}, 3350.0, 6.88,
             "NVIDIA H100 Tensor Core GPU datasheet (SXM5)", f"{RECEIPTS}: p5.48xlarge / 8, {RECEIPTS_TAKEN}")
H200 = _card("H200 141GB", {"bf16": 989.4, "fp16": 989.4, "fp32": 66.9, "fp8": 1978.9, "int8": 1978.9}, 4800.0, None,
             "NVIDIA H200 Tensor Core GPU datasheet (SXM)",
             "no price: no on-demand single-GPU list price was verified when this table was written; "
             "set one with [cost] cards = [\"H200 141GB:usd_per_hour=...\"]")

PRICED_CARDS: dict[str, Card] = {c.name: c for c in (T4, L4, A10G, A100_40, A100_80, H100, H200)}


def with_overrides(overrides: Iterable[str], base: Mapping[str, Card] | None = None) -> dict[str, Card]:
    """The table with each "CARD:field=value" applied (fields: usd_per_hour, bandwidth_gb_s, <dtype>_tflops;
    a price of "none" removes it). A bad entry raises EstimateError saying which and why."""
    table = dict(PRICED_CARDS if base is None else base)
    for entry in overrides:
        name, field, value = parse_override(entry, table)
        card = table[name]
        sources = {**card.sources}
        if field == "usd_per_hour":
            card = dataclasses.replace(card, usd_per_hour=value)
            sources["usd_per_hour"] = "configuration ([cost] cards)" if value is not None else "no price (configuration)"
        elif field == "bandwidth_gb_s":
            card = dataclasses.replace(card, bandwidth_gb_s=value)
            sources["bandwidth_gb_s"] = "configuration ([cost] cards)"
        else:
            card = dataclasses.replace(card, tflops={**card.tflops, field.removesuffix("_tflops"): value})
            sources["peak_tflops"] = card.sources["peak_tflops"] + f"; {field} from the configuration ([cost] cards)"
        table[name] = dataclasses.replace(card, sources=sources)
    return table


def parse_override(entry: str, table: Mapping[str, Card] | None = None) -> tuple[str, str, float | None]:
    """("CARD", field, value) from "CARD:field=value"; EstimateError naming the entry when it is not one."""
    table = PRICED_CARDS if table is None else table
    name, colon, rest = str(entry).partition(":")
    field, equals, raw = rest.partition("=")
    name, field, raw = name.strip(), field.strip(), raw.strip()
    if not colon or not equals:
        raise EstimateError("cards", f"{entry!r} is not CARD:field=value (e.g. \"A10G 24GB:usd_per_hour=1.2\")")
    if name not in table:
        raise EstimateError("cards", f"{entry!r}: unknown card {name!r} (cards: {', '.join(table)})")
    if field not in FIELDS:
        raise EstimateError("cards", f"{entry!r}: unknown field {field!r} (fields: {', '.join(FIELDS)})")
    if field == "usd_per_hour" and raw.lower() == "none":
        return name, field, None
    try:
        value = float(raw)
    except ValueError:
        raise EstimateError("cards", f"{entry!r}: {raw!r} is not a number") from None
    limit = {"usd_per_hour": MAX_PRICE, "bandwidth_gb_s": MAX_BANDWIDTH}.get(field, MAX_TFLOPS)
    if not 0 < value <= limit or value != value:
        raise EstimateError("cards", f"{entry!r}: {field} must be above 0 and at most {limit:g}")
    return name, field, value
