"""An estimate's cost section (estimator/cost.py's `cost`) as the revision page shows it: per card the hours and
dollars of a training run (LoRA beside them), the serving tokens per second and dollars per million output tokens,
and what the figures assume.

Reads stored JSON defensively: an estimate stored before costs existed has none, and a missing field shows as
absent, never as an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class CostRow:
    card: str
    hours: str
    usd: str
    lora_hours: str
    lora_usd: str
    tokens_per_s: str
    usd_per_mtok: str
    note: str


@dataclass
class CostView:
    workload: str
    flops: str
    rows: list[CostRow] = field(default_factory=list)
    serve_unknown: str | None = None
    train_unknown: str | None = None
    notes: list[str] = field(default_factory=list)
    prices: list[str] = field(default_factory=list)  # each card's price and where it was taken
    priced: str | None = None  # whose prices the dollars are at: today's configuration's, or those stored with it


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def hours_text(value: Any) -> str:
    n = _number(value)
    if n is None:
        return "—"
    return f"{n * 60:.1f} min" if n < 1 else f"{n:,.1f} h"


def usd_text(value: Any, priced: bool = True) -> str:
    n = _number(value)
    if n is None:
        return "—" if priced else "no price"
    return f"${n:,.2f}" if n >= 0.01 else f"${n:.4f}"


def cost_view(result: Mapping[str, Any] | None) -> CostView | None:
    """The cost section of a stored estimate, or None when it has none."""
    cost = _map(_map(result).get("cost"))
    if not cost:
        return None
    w, train, serve, cards = _map(cost.get("workload")), _map(cost.get("train")), _map(cost.get("serve")), \
        _map(cost.get("cards"))
    flops = _number(train.get("flops_per_sample"))
    view = CostView(
        workload=f"{w.get('epochs', '?')} epochs over {w.get('samples', '?'):,} samples at batch {w.get('batch', '?')}"
        if isinstance(w.get("samples"), int) else "unknown",
        flops="unknown" if flops is None else f"{flops:.3g}",
        train_unknown=str(train["unknown"]) if train.get("unknown") else None,
        serve_unknown=str(serve["unknown"]) if serve.get("unknown") else None,
        notes=[str(n) for n in cost.get("notes") or [] if isinstance(n, str)][:10])
    served = {str(_map(r).get("card")): _map(r) for r in serve.get("cards") or []}
    for row in train.get("cards") or []:
        row = _map(row)
        name = str(row.get("card") or "?")
        priced = _number(_map(cards.get(name)).get("usd_per_hour")) is not None
        lora, s = _map(row.get("lora")), served.get(name, {})
        note = "; ".join(str(n) for n in (row.get("note"), lora.get("note") and f"LoRA: {lora['note']}", s.get("note"))
                         if n and n != "no price")
        view.rows.append(CostRow(name, hours_text(row.get("hours")), usd_text(row.get("usd"), priced),
                                 hours_text(lora.get("hours")), usd_text(lora.get("usd"), priced),
                                 "—" if _number(s.get("tokens_per_s")) is None else f"{s['tokens_per_s']:,.0f}",
                                 usd_text(s.get("usd_per_mtok"), priced), note))
    priced = _map(cost.get("priced"))
    if priced:
        on = priced.get("on")
        view.priced = "Dollars at the card prices configured now" + (f" (applied {on})" if isinstance(on, str) else "") + \
            ": hours and tokens/s are what was estimated for this revision, the money is recomputed from them."
    else:
        view.priced = "Dollars at the card prices stored with this estimate."
    for name, card in cards.items():
        card = _map(card)
        price = _number(card.get("usd_per_hour"))
        source = str(_map(card.get("sources")).get("usd_per_hour") or "")
        view.prices.append(f"{name}: {'no price' if price is None else f'${price:,.4g} an hour'} ({source})")
    return view
