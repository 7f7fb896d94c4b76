"""What a rerun estimate's cost means next to its parent's: a change of more than `[cost] change_threshold` in any
card's training or serving cost is an `estimate.cost_changed` event, with the figures before and after."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracker.revision.changes import Change, ChangeKind, Severity

# (section, figure priced, figure timed, words): what is compared per card
FIGURES = (("train", "usd", "hours", "a training run"), ("serve", "usd_per_mtok", "tokens_per_s", "a million tokens"))


def card_figures(cost: Mapping[str, Any] | None) -> dict[str, dict[str, dict[str, float | None]]]:
    """Per section, per card: the money figure and the time figure (None where the card has none)."""
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for section, money, time, _ in FIGURES:
        rows = ((cost or {}).get(section) or {}).get("cards") or []
        out[section] = {r["card"]: {money: r.get(money), time: r.get(time)} for r in rows if isinstance(r, Mapping)}
    return out


def _relative(before: float | None, after: float | None) -> float | None:
    """The relative change; None when either side is missing; inf when a figure appears or vanishes."""
    if before is None and after is None:
        return None
    if before is None or after is None or before == 0:
        return float("inf")
    return (after - before) / before


def cost_change(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None, threshold: float,
                path: str = "config.json") -> Change | None:
    """The Change when some card's cost moved by more than ``threshold`` (a fraction) between two estimates' cost
    sections; None when neither has one (an estimate stored before costs were) or nothing moved that much.

    A card is compared on money where both sides are priced, on time otherwise (a card without a price still
    shows a run getting slower); a figure that appears or disappears (a card that no longer fits) always counts."""
    if not before or not after:
        return None
    old, new = card_figures(before), card_figures(after)
    moved: list[dict[str, Any]] = []
    for section, money, time, words in FIGURES:
        for card, figures in new[section].items():
            was = old[section].get(card)
            if was is None:
                continue
            key = money if figures[money] is not None and was[money] is not None else time
            change = _relative(was[key], figures[key])
            if change is not None and abs(change) > threshold:
                moved.append({"section": section, "card": card, "figure": key, "before": was[key], "after": figures[key],
                              "change": None if change == float("inf") else round(change, 4), "words": words})
    if not moved:
        return None
    moved.sort(key=lambda m: -(abs(m["change"]) if m["change"] is not None else float("inf")))
    summary = "cost: " + "; ".join(_sentence(m) for m in moved[:3])
    if len(moved) > 3:
        summary += f"; +{len(moved) - 3} more"
    dearer = any(_dearer(m) for m in moved)
    return Change(kind=ChangeKind.ESTIMATE, path=path, summary=summary,
                  severity=Severity.WARNING if dearer else Severity.NOTICE,
                  detail={"threshold": threshold, "moved": moved,
                          "before": {"workload": before.get("workload"), **old},
                          "after": {"workload": after.get("workload"), **new}})


def _dearer(m: Mapping[str, Any]) -> bool:
    """Costlier after: more money or hours, fewer tokens a second, or a figure that vanished."""
    if m["after"] is None:
        return True
    if m["before"] is None:
        return False
    return m["after"] < m["before"] if m["figure"] == "tokens_per_s" else m["after"] > m["before"]


def _show(figure: str, value: float | None) -> str:
    if value is None:
        return "none"
    if figure == "hours":
        return f"{value:,.2f} h"
    if figure == "tokens_per_s":
        return f"{value:,.0f} tokens/s"
    return f"${value:,.2f}"


def _sentence(m: Mapping[str, Any]) -> str:
    pct = "" if m["change"] is None else f" ({m['change']:+.0%})"
    what = f"{m['words']}" if m["figure"] in ("usd", "usd_per_mtok") else ("training" if m["section"] == "train" else "serving")
    return f"{what} on {m['card']} {_show(m['figure'], m['before'])} -> {_show(m['figure'], m['after'])}{pct}"
