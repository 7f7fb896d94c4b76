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
    full_before, full_after = old.get("full_context"), new.get("full_context")
    out = []
    for card, row in new["cards"].items():
        was = old["cards"].get(card)
        if not isinstance(was, dict) or "concurrency" not in row or "concurrency" not in was:
            continue
        moved = []
        if was.get("loads") != row.get("loads"):
            moved.append(("loads", int(bool(was.get("loads"))), int(bool(row.get("loads"))),
                          f"the model {'no longer loads' if was.get('loads') else 'now loads'} at its full context"
                          + (f" ({_k(str(full_after))})" if full_after else "")))
        then, now = was.get("concurrency_full_context"), row.get("concurrency_full_context")
        if then is not None and now is not None and then != now:
            moved.append(("full", then, now, f"{then} sequences at its full context"
                          + (f" ({_k(str(full_before))})" if full_before else "") + f" before, {now} now"
                          + (f" ({_k(str(full_after))})" if full_after and full_after != full_before else "")))
        for context, count in row["concurrency"].items():
            previous = was["concurrency"].get(context)
            if previous is not None and previous != count and context not in (str(full_before), str(full_after)):
                moved.append((context, previous, count, f"{previous} sequences at {_k(context)} before, {count} now"))
        for key, a, b, words in moved:
            out.append(Crossing(f"serve@{key}", card, a, b, f"on {card}: {words}" + (f": {why}" if why else "")))
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
    sa, sb = _sequence_bytes(old), _sequence_bytes(new)
    if sa != sb and sa is not None and sb is not None:  # at 8k, not per token: a sliding window adds 0 a token
        parts.append(f"the KV cache of one 8k sequence went from {sa / 2**20:,.0f} to {sb / 2**20:,.0f} MiB")
    return "; ".join(parts)


def _sequence_bytes(serving: dict) -> int | None:
    """vLLM's cache of one 8k sequence (growing and fixed parts): what a sliding window or a latent cache moves."""
    vllm = (serving.get("kv_cache") or {}).get("vllm") or {}
    growing, fixed = (vllm.get("at_context") or {}).get("8192"), vllm.get("fixed_bytes_per_sequence")
    return growing + (fixed or 0) if isinstance(growing, int) else None
