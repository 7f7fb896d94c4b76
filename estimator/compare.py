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


def _k(context: str) -> str:
    """A context as people say it: 8192 -> 8k, 131072 -> 128k."""
    n = int(context)
    return f"{n // 1024}k" if n % 1024 == 0 and n >= 1024 else f"{n:,}"


def serving_crossings(before: Estimate | dict, after: Estimate | dict) -> list[Crossing]:
    """Every card whose serving figures moved: whether the model loads, and the concurrent sequences at each
    context both estimates priced, with the reason (context raised, weights or cache per token changed).
    An estimate stored before serving figures existed has none, so nothing is said against it."""
    old = (before.to_dict() if isinstance(before, Estimate) else before).get("serving") or {}
    new = (after.to_dict() if isinstance(after, Estimate) else after).get("serving") or {}
    if not old.get("cards") or not new.get("cards"):
        return []
    why = _reasons(old, new)
    out = []
    for card, row in new["cards"].items():
        was = old["cards"].get(card)
        if not isinstance(was, dict) or "concurrency" not in row or "concurrency" not in was:
            continue
        for context, now in row["concurrency"].items():
            then = was["concurrency"].get(context)
            if then is None or then == now:
                continue
            sentence = f"on {card}: {then} sequences at {_k(context)} before, {now} now"
            if was.get("loads") and not row.get("loads"):
                sentence += ": the model no longer loads"
            elif not was.get("loads") and row.get("loads"):
                sentence += ": the model now loads"
            if why:
                sentence += (": " if "loads" not in sentence else " (") + why + (")" if "loads" in sentence else "")
            out.append(Crossing(f"serve@{context}", card, then, now, sentence))
    return out


def _reasons(old: dict, new: dict) -> str:
    parts = []
    if old.get("full_context") != new.get("full_context"):
        a, b = old.get("full_context"), new.get("full_context")
        verb = "raised" if (a or 0) < (b or 0) else "lowered"
        parts.append(f"the context was {verb} from {_k(str(a)) if a else '?'} to {_k(str(b)) if b else '?'}")
    wa, wb = (old.get("weights") or {}).get("bytes"), (new.get("weights") or {}).get("bytes")
    if wa != wb and wa is not None and wb is not None:
        parts.append(f"the weights went from {wa / 2**30:.1f} to {wb / 2**30:.1f} GiB")
    ta = ((old.get("kv_cache") or {}).get("vllm") or {}).get("bytes_per_token")
    tb = ((new.get("kv_cache") or {}).get("vllm") or {}).get("bytes_per_token")
    if ta != tb and ta is not None and tb is not None:
        parts.append(f"the KV cache went from {ta:,} to {tb:,} bytes a token")
    return "; ".join(parts)
