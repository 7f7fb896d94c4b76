"""A base's followed family as the derivatives page and the revision page show it: one row per derivative
with its relation, publisher, downloads and, per behaviour part, whether it carries the base's latest, is
behind (by how many changes, matching which base revision) or diverged; and the list a reach event holds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from storage.kinds import BEHAVIOUR_PARTS

PART_COLUMNS = tuple(BEHAVIOUR_PARTS.items())


@dataclass(frozen=True)
class PartCell:
    """One part of one derivative: the verdict, in words, and the base revision it matches (None: none)."""

    status: str
    words: str
    matched_sha: str | None


@dataclass(frozen=True)
class FamilyRow:
    repo_id: str
    relation: str
    publisher: str
    downloads: int
    head_sha: str | None
    problem: str | None
    cells: list[PartCell]


def part_cell(state: dict[str, Any] | None) -> PartCell:
    """A part's lineage (as stored) in words: `carries`, `behind by 2`, `diverged`, or `-` (not held)."""
    status = str((state or {}).get("status") or "absent")
    matched = (state or {}).get("matched_sha")
    matched = matched if isinstance(matched, str) else None
    if status == "behind":
        words = f"behind by {int((state or {}).get('behind') or 0)}"
    elif status == "carries" and (state or {}).get("compared"):
        words = f"carries (compared on {', '.join(map(str, (state or {})['compared']))})"
    elif status == "carries" and not (state or {}).get("exact", True):
        words = "carries (after whitespace normalisation)"
    elif status == "not_in_format":
        words = "not in this format"
    elif status in ("carries", "diverged"):
        words = status
    else:
        words = "-"
    return PartCell(status, words, matched)


def family_rows(tree: dict[str, Any]) -> list[FamilyRow]:
    """The rows of `DerivativeStore.tree`'s derivatives, with a cell per behaviour part."""
    return [FamilyRow(str(r["repo_id"]), str(r["relation"]), str(r["publisher"]), int(r["downloads"] or 0), r.get("head_sha"),
                      r.get("problem"), [part_cell((r.get("parts") or {}).get(p)) for p, _ in PART_COLUMNS])
            for r in tree["derivatives"]]


@dataclass(frozen=True)
class ReachView:
    """One `derivatives.reached` event: its line and, per derivative, where it stands on the changed parts."""

    title: str
    parts: list[str]
    carries: int
    behind: int
    total: int
    rows: list[tuple[str, str, str, list[tuple[str, PartCell]]]]  # repo id, relation, verdict, cells of the changed parts


def reach_view(title: str, payload: dict[str, Any]) -> ReachView:
    """A reach event's payload as the revision page lists it (the behind first, then the rest by name)."""
    parts = [str(p) for p in payload.get("parts") or [] if p in BEHAVIOUR_PARTS]
    rows = []
    for row in payload.get("derivatives") or []:
        if not isinstance(row, dict):
            continue
        states = row.get("parts") if isinstance(row.get("parts"), dict) else {}
        rows.append((str(row.get("repo_id")), str(row.get("relation")), str(row.get("status")),
                     [(BEHAVIOUR_PARTS[p], part_cell(states.get(p))) for p in parts]))
    rows.sort(key=lambda r: (r[2] != "behind", r[0]))
    return ReachView(title, [BEHAVIOUR_PARTS[p] for p in parts], int(payload.get("carries") or 0),
                     int(payload.get("behind") or 0), int(payload.get("total") or 0), rows)
