"""An estimate's structure section (estimator/graph.py's `structure`) as the pages show it: per tower its input, the
layer count and the verdict "Will it forward-pass", and the module graph with repeated blocks shown once.

Reads stored JSON defensively: an estimate stored before structures existed shows no section, never an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_ROWS = 400  # rows a tower shows on a page (a collapsed graph of a real model has a few dozen)


@dataclass
class StructureRow:
    name: str
    type: str
    shape: str
    repeat: int


@dataclass
class TowerView:
    name: str
    input_name: str
    input_shape: str
    output_shape: str
    layers: int | None
    node_count: int
    failure: str | None
    rows: list[StructureRow] = field(default_factory=list)
    more_rows: int = 0


@dataclass
class SplitRow:
    card: str
    mode: str
    layers: str         # "6 | 10"
    cut_after: str
    card_gib: str       # "12.38 GiB + 12.02 GiB"
    fits: bool


@dataclass
class StructureView:
    layers: int | None
    node_count: int
    forward_pass: bool | None
    failure: str | None
    towers: list[TowerView] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    splits: list[SplitRow] = field(default_factory=list)  # where one card cannot hold batch 1 (estimator/split.py)
    split_text: str = ""


def shape_text(shape: Any) -> str:
    """``50 × 768``; a scalar ``scalar``; an unknown dimension ``?``."""
    if not isinstance(shape, list):
        return "?"
    return " × ".join(str(d) if isinstance(d, int) else "?" for d in shape) if shape else "scalar"


def structure_view(result: Mapping[str, Any] | None) -> StructureView | None:
    """The structure section of a stored estimate, or None when it has none."""
    structure = _map(_map(result).get("structure"))
    if not structure:
        return None
    failure = _map(structure.get("failure"))
    view = StructureView(layers=_int(structure.get("layers")), node_count=_int(structure.get("node_count")) or 0,
                         forward_pass=structure.get("forward_pass") if isinstance(structure.get("forward_pass"), bool)
                         else None, failure=_failure(failure),
                         notes=[str(n) for n in structure.get("notes") or [] if isinstance(n, str)][:30])
    for tower in structure.get("towers") or []:
        tower = _map(tower)
        given = _map(tower.get("input"))
        rows = [r for r in (tower.get("rows") or tower.get("nodes") or []) if isinstance(r, Mapping)]
        view.towers.append(TowerView(
            name=str(tower.get("name") or "?"), input_name=str(given.get("name") or "input"),
            input_shape=shape_text(given.get("shape")), output_shape=shape_text(tower.get("output_shape")),
            layers=_int(tower.get("layers")), node_count=_int(tower.get("node_count")) or 0,
            failure=_failure(_map(tower.get("failure"))),
            rows=[StructureRow(str(r.get("name") or "?"), str(r.get("type") or "?"), shape_text(r.get("output_shape")),
                               _int(r.get("repeat")) or 1) for r in rows[:MAX_ROWS]],
            more_rows=max(0, len(rows) - MAX_ROWS)))
    split = _map(_map(result).get("split"))
    view.split_text = str(split.get("text") or "")
    for card, modes in _map(split.get("cards")).items():
        for mode, cut in _map(modes).items():
            cut = _map(cut)
            layers, sizes = cut.get("layers"), cut.get("card_bytes")
            view.splits.append(SplitRow(
                str(card), str(mode),
                " | ".join(str(n) for n in layers) if isinstance(layers, list) else "?", str(cut.get("cut_after") or "?"),
                " + ".join(f"{b / 2**30:.2f} GiB" if isinstance(b, int | float) else "?" for b in sizes)
                if isinstance(sizes, list) else "?", cut.get("fits") is True))
    return view


def _failure(failure: Mapping[str, Any]) -> str | None:
    if not failure:
        return None
    return f"{failure.get('node', '?')}: {failure.get('reason', '?')}"


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
