"""The readable table `hubwatch estimate --cost` prints for an estimate's ``cost`` section (cost.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _money(value: float | None, note: str | None = None) -> str:
    if value is None:
        return "no price" if note and "no price" in note else "-"
    return f"${value:,.2f}" if value >= 0.01 else f"${value:.4f}"


def _hours(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 60:.1f} min" if value < 1 else f"{value:,.1f} h"


def _flops(value: int | None) -> str:
    return "unknown" if value is None else f"{value:.3e}"


def render_cost(cost: Mapping[str, Any] | None) -> str:
    """Training hours and USD per card (full fine-tune, LoRA beside it), then serving tokens/s and USD per million
    output tokens, then what the figures assume."""
    if not cost:
        return "Cost\n  unknown: no cost figures"
    w = cost.get("workload") or {}
    train = cost.get("train") or {}
    lines = [f"Cost per run (an estimate: {w.get('epochs')} epochs x {w.get('samples'):,} samples at batch "
             f"{w.get('batch')}, {w.get('optimizer_steps'):,} optimizer steps)",
             f"  FLOPs a sample: {_flops(train.get('flops_per_sample'))} full fine-tune, "
             f"{_flops(train.get('lora_flops_per_sample'))} LoRA"]
    if train.get("unknown"):
        lines.append(f"  unknown: {train['unknown']}")
    else:
        lines.append(f"  {'card':<12}{'hours':>12}{'$ a run':>12}{'bound':>9}{'LoRA hours':>12}{'LoRA $':>11}  note")
        for row in train.get("cards", []):
            lora = row.get("lora") or {}
            note = "; ".join(n for n in (row.get("note"), lora.get("note") and f"LoRA: {lora['note']}") if n)
            lines.append(f"  {row['card']:<12}{_hours(row.get('hours')):>12}{_money(row.get('usd'), row.get('note')):>12}"
                         f"{row.get('bound') or '-':>9}{_hours(lora.get('hours')):>12}"
                         f"{_money(lora.get('usd'), row.get('note')):>11}  {note}".rstrip())
    serve = cost.get("serve") or {}
    if serve.get("unknown"):
        lines.append(f"Serving cost\n  {serve['unknown']}")
    else:
        lines.append(f"Serving cost ({serve.get('prompt_tokens'):,} prompt + {serve.get('output_tokens'):,} output tokens "
                     "a request, as many requests at once as the KV budget holds, at most 256)")
        lines.append(f"  {'card':<12}{'tokens/s':>10}{'$ / M tokens':>14}{'requests':>10}  note")
        for row in serve.get("cards", []):
            tps = row.get("tokens_per_s")
            lines.append(f"  {row['card']:<12}{'-' if tps is None else f'{tps:,.0f}':>10}"
                         f"{_money(row.get('usd_per_mtok'), row.get('note')):>14}{row.get('concurrency') or 0:>10}  "
                         f"{row.get('note') or ''}".rstrip())
    for note in cost.get("notes", []):
        lines.append(f"  - {note}")
    return "\n".join(lines)
