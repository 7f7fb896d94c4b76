"""What changed between two estimates of a repo: the card boundaries a mode crossed."""

from __future__ import annotations

from dataclasses import dataclass

from .result import Estimate

MODE_LABELS = {"inference": "inference", "full_finetune": "full fine-tune", "lora": "LoRA r=16",
               "qlora": "QLoRA"}


@dataclass(frozen=True)
class Crossing:
    """One mode on one card whose largest batch changed."""

    mode: str
    card: str
    before: int | None
    after: int | None
    summary: str


def mode_label(mode: str) -> str:
    base = mode.removesuffix("_gc")
    label = MODE_LABELS.get(base, base)
    return label + (" with gradient checkpointing" if mode.endswith("_gc") else "")


def crossings(before: Estimate | dict, after: Estimate | dict) -> list[Crossing]:
    """Every (mode, card) whose largest batch changed, with a sentence a person can read."""
    old = before.to_dict() if isinstance(before, Estimate) else before
    new = after.to_dict() if isinstance(after, Estimate) else after
    out = []
    for card, row in new.get("cards", {}).items():
        old_row = old.get("cards", {}).get(card, {}).get("max_batch", {})
        for mode, batch in row["max_batch"].items():
            was = old_row.get(mode)
            if was == batch:
                continue
            out.append(Crossing(mode, card, was, batch, _sentence(mode_label(mode), card, was, batch)))
    return out


def _sentence(label: str, card: str, was: int | None, now: int | None) -> str:
    if was is None or now is None:
        return f"{label} on {card}: largest batch {was if was is not None else 'unknown'} -> " \
               f"{now if now is not None else 'unknown'}"
    if now == 0:
        return f"{label} no longer fits {card} (was batch {was})"
    if was == 0:
        return f"{label} now fits {card} at batch {now}"
    if now < was:
        return f"{label} at batch {was} no longer fits {card} (largest batch now {now})"
    return f"{label} fits batch {now} on {card} (was {was})"
