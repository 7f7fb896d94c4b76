"""A repo's estimates over its revisions, laid out for an inline SVG chart drawn on the server.

Two panels share the x axis (one step per estimated revision, oldest left): parameters, and the
batch-1 memory of a full fine-tune and of LoRA with the cards' capacities as reference lines. Only the
geometry is computed here; `templates/estimates.html` writes the SVG (escaped, no script).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from storage.read_model import EstimatePoint

WIDTH = 720
HEIGHT = 220
LEFT = 70  # room for the y labels
RIGHT = 12
TOP = 14
BOTTOM = 34
GIB = 2**30


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    sha: str
    label: str  # what the point shows, for its tooltip and accessible name


@dataclass(frozen=True)
class Series:
    name: str
    css: str  # the class that colours and dashes it (colour is never the only cue: dash and shape differ)
    dots: list[Dot]

    @property
    def path(self) -> str:
        return " ".join(f"{'M' if i == 0 else 'L'}{d.x:.1f},{d.y:.1f}" for i, d in enumerate(self.dots))


@dataclass(frozen=True)
class Point:
    """One revision on a panel: one link, one accessible name, a circle per series (class, x, y)."""

    sha: str
    label: str
    circles: list[tuple[str, str, str]]


@dataclass(frozen=True)
class Rule:
    y: float
    label: str
    left: bool = False  # label at the left end (when the right end is taken by a line just below)


@dataclass
class Panel:
    title: str
    series: list[Series] = field(default_factory=list)
    ticks: list[Rule] = field(default_factory=list)
    cards: list[Rule] = field(default_factory=list)
    x_labels: list[tuple[float, str]] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)
    width: int = WIDTH
    height: int = HEIGHT
    plot_bottom: float = HEIGHT - BOTTOM
    plot_left: float = LEFT
    plot_right: float = WIDTH - RIGHT


def _x(i: int, n: int) -> float:
    span = WIDTH - LEFT - RIGHT
    return LEFT + (span / 2 if n == 1 else span * i / (n - 1))


def _scale(top: float) -> tuple[float, Any]:
    """A rounded maximum for the axis and the function placing a value on it."""
    top = max(top, 1.0)
    step = 10 ** (len(str(int(top))) - 1)
    rounded = next(m * step for m in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10) if m * step >= top)
    plot = HEIGHT - BOTTOM - TOP
    return rounded, lambda v: HEIGHT - BOTTOM - plot * (v / rounded)


def _count(n: float) -> str:
    for size, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:.0f}"


def _x_labels(points: Sequence[EstimatePoint]) -> list[tuple[float, str]]:
    n = len(points)
    picks = sorted({0, n - 1} | ({n // 2} if n > 4 else set()))
    return [(_x(i, n), points[i].committed_at.strftime("%Y-%m-%d")) for i in picks]


def _link_points(panel: Panel) -> None:
    """Group every series' dots by revision: one link per revision, however many series it is on."""
    labels: dict[str, list[str]] = {}
    circles: dict[str, list[tuple[str, str, str]]] = {}
    for series in panel.series:
        for dot in series.dots:
            labels.setdefault(dot.sha, []).append(dot.label)
            circles.setdefault(dot.sha, []).append((series.css, f"{dot.x:.1f}", f"{dot.y:.1f}"))
    panel.points = [Point(sha, f"{sha[:12]}: " + "; ".join(text), circles[sha]) for sha, text in labels.items()]


def parameters_panel(points: Sequence[EstimatePoint]) -> Panel:
    values = [p.parameters for p in points if p.parameters is not None]
    top, place = _scale(max(values, default=1))
    panel = Panel("Parameters", x_labels=_x_labels(points))
    panel.ticks = [Rule(place(top * f), _count(top * f)) for f in (0, 0.25, 0.5, 0.75, 1)]
    dots = [Dot(_x(i, len(points)), place(p.parameters), p.sha, f"{p.parameters:,} parameters")
            for i, p in enumerate(points) if p.parameters is not None]
    panel.series = [Series("parameters", "s-params", dots)]
    _link_points(panel)
    return panel


def memory_panel(points: Sequence[EstimatePoint], cards: Mapping[str, int]) -> Panel:
    """Full fine-tune and LoRA memory at batch 1, with every card up to the first one that holds the
    largest value drawn as a reference line."""
    values = [v for p in points for v in (p.full_finetune_bytes, p.lora_bytes) if v is not None]
    peak = max(values, default=GIB) / GIB
    shown = []
    for name, capacity in sorted(cards.items(), key=lambda item: item[1]):
        shown.append((name, capacity / GIB))
        if capacity / GIB >= peak:
            break
    top, place = _scale(max([peak, *(c for _, c in shown)]) * 1.05)
    panel = Panel("Fine-tune memory at batch 1 (GiB)", x_labels=_x_labels(points))
    panel.ticks = [Rule(place(top * f), f"{top * f:.3g}") for f in (0, 0.25, 0.5, 0.75, 1)]
    for name, c in shown:  # labels too close to the previous one move to the other end of their line
        crowded = bool(panel.cards) and panel.cards[-1].y - place(c) < 12 and not panel.cards[-1].left
        panel.cards.append(Rule(place(c), f"{name} ({c:.0f} GiB)", left=crowded))
    n = len(points)
    for name, css, attr in (("full fine-tune", "s-full", "full_finetune_bytes"), ("LoRA", "s-lora", "lora_bytes")):
        dots = [Dot(_x(i, n), place(getattr(p, attr) / GIB), p.sha, f"{name} {getattr(p, attr) / GIB:.2f} GiB")
                for i, p in enumerate(points) if getattr(p, attr) is not None]
        panel.series.append(Series(name, css, dots))
    _link_points(panel)
    return panel


def card_capacities(result: Mapping[str, Any] | None) -> dict[str, int]:
    """Card names -> memory in bytes, from an estimate's `cards`; cards of one size share a line."""
    by_size: dict[int, list[str]] = {}
    cards = (result or {}).get("cards")
    for name, card in cards.items() if isinstance(cards, Mapping) else ():
        capacity = card.get("memory_bytes") if isinstance(card, Mapping) else None
        if isinstance(capacity, int) and not isinstance(capacity, bool):
            by_size.setdefault(capacity, []).append(str(name))
    return {" / ".join(names): size for size, names in by_size.items()}


MODES = (("full_finetune", "Full fine-tune"), ("lora", "LoRA"), ("qlora", "QLoRA"), ("inference", "Inference"))


@dataclass
class EstimateTables:
    """The newest estimate as tables: parameters by tower against the checkpoint, memory at batch 1
    per mode, and the largest batch per card and mode (0 or absent: does not fit)."""

    towers: list[tuple[str, int]]
    derived: int | None
    checkpoint: int | None
    delta_percent: float | None
    modes: list[tuple[str, str, float | None]]  # key, label, GiB at batch 1
    cards: list[tuple[str, float | None, list[int | None]]]  # name, GiB, max batch per mode


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def estimate_tables(result: Mapping[str, Any] | None) -> EstimateTables | None:
    if not isinstance(result, Mapping):
        return None
    params = result.get("parameters") if isinstance(result.get("parameters"), Mapping) else {}
    towers = params.get("by_tower") if isinstance(params.get("by_tower"), Mapping) else {}
    delta = params.get("delta") if isinstance(params.get("delta"), Mapping) else {}
    memory = result.get("memory") if isinstance(result.get("memory"), Mapping) else {}
    modes = []
    for key, label in MODES:
        entry = memory.get(key)
        value = _int(entry.get("batch_1_bytes")) if isinstance(entry, Mapping) else None
        if value is not None:
            modes.append((key, label, value / GIB))
    cards = []
    for name, card in (result.get("cards") or {}).items() if isinstance(result.get("cards"), Mapping) else ():
        if not isinstance(card, Mapping):
            continue
        batches = card.get("max_batch") if isinstance(card.get("max_batch"), Mapping) else {}
        size = _int(card.get("memory_bytes"))
        cards.append((str(name), size / GIB if size else None, [_int(batches.get(key)) for key, _, _ in modes]))
    percent = delta.get("percent")
    return EstimateTables(
        towers=[(str(k), v) for k, v in towers.items() if _int(v) is not None],
        derived=_int(params.get("derived")),
        checkpoint=_int(params.get("checkpoint")),
        delta_percent=float(percent) if isinstance(percent, int | float) and not isinstance(percent, bool) else None,
        modes=modes,
        cards=cards,
    )
