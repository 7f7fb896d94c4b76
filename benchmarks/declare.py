"""What a benchmark declares: its figures (name, unit, goal, direction, baseline, noise margin) and its tags.

Each `benchmarks/bench_NAME.py` holds one `BENCHMARK = Benchmark(...)` near its top and a module-level
`measure(size)` that returns {figure name: value}; the runner (`python -m benchmarks`) runs it in a process of
its own and writes the one results table. `run_alone` keeps `python benchmarks/bench_NAME.py` working: it runs
the benchmark here and prints its rows of that table.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

Direction = Literal["lower", "higher"]
Status = Literal["pass", "short", "no goal", "not run"]
TIME_UNITS = ("us", "ms", "s")  # wall or CPU time; simulated minutes are not


@dataclass(frozen=True)
class Figure:
    """One measured number. `goal` None: no goal was ever stated for it (status "no goal"). `baseline` is the
    figure before (at `baseline_at`: a commit, a session, the issue that asked); `margin` the noise fraction
    the figure may miss its goal by before it counts as short."""

    name: str
    unit: str
    goal: float | None = None
    direction: Direction = "lower"
    baseline: float | None = None
    baseline_at: str = ""
    margin: float = 0.0
    note: str = ""

    def __post_init__(self) -> None:
        if self.direction not in ("lower", "higher"):
            raise ValueError(f"{self.name}: direction is 'lower' or 'higher', not {self.direction!r}")
        if self.margin < 0:
            raise ValueError(f"{self.name}: a noise margin is a fraction >= 0")


@dataclass(frozen=True)
class Benchmark:
    """A benchmark's declaration. `size` says what measure(size)'s number scales (None: its default); `small` is
    a size for a smoke run; `requires` names what the machine must have ("cuda", "root", "postgres"). `alone`: the
    runner never runs it beside another benchmark (`run --jobs N`); a benchmark with a goal on a time (a figure in
    ms or s) runs alone whether it says so or not (`runs_alone`). `quick` is the size CI's quick selection
    (`run --tag quick`) measures at, where a smaller one keeps the figures meaningful (None: its default)."""

    name: str
    about: str
    figures: tuple[Figure, ...]
    tags: tuple[str, ...] = ()
    size: str = ""
    small: int | None = None
    timeout_s: float = 600.0
    requires: tuple[str, ...] = ()
    alone: bool = False
    quick: int | None = None

    def __post_init__(self) -> None:
        names = [f.name for f in self.figures]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: a figure is declared twice")
        if not self.figures:
            raise ValueError(f"{self.name}: a benchmark declares at least one figure")
        if {"quick", "slow"} <= set(self.tags):
            raise ValueError(f"{self.name}: quick or slow, not both")
        if self.quick is not None and "quick" not in self.tags:
            raise ValueError(f"{self.name}: a quick size is for a benchmark tagged quick")

    @property
    def runs_alone(self) -> bool:
        """Run with no other benchmark beside it: said so, or a goal on a time, which a busy second core would skew."""
        return self.alone or any(f.goal is not None and f.unit in TIME_UNITS for f in self.figures)

    def figure(self, name: str) -> Figure:
        for f in self.figures:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} declares no figure {name!r}")


def status_of(value: float | None, goal: float | None, direction: Direction, margin: float) -> Status:
    """pass / short / no goal / not run; short when the value misses the goal by more than the margin."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "not run"
    if goal is None:
        return "no goal"
    if direction == "lower":
        return "short" if value > goal + abs(goal) * margin else "pass"
    return "short" if value < goal - abs(goal) * margin else "pass"


def row(benchmark: Benchmark, figure: Figure, value: float | None, note: str = "") -> dict[str, object]:
    """One row of the results table (the fixed JSON shape the docs render)."""
    if value is not None:
        value = float(value)
        if math.isinf(value) or math.isnan(value):
            note = "; ".join(n for n in (note, f"measured {value}") if n)
            value = None
    ratio = value / figure.baseline if value is not None and figure.baseline else None
    notes = [n for n in (figure.note, f"baseline: {figure.baseline_at}" if figure.baseline_at else "", note) if n]
    return {"benchmark": benchmark.name, "figure": figure.name, "unit": figure.unit, "value": value,
            "baseline": figure.baseline, "ratio": ratio, "goal": figure.goal, "direction": figure.direction,
            "margin": figure.margin, "status": status_of(value, figure.goal, figure.direction, figure.margin),
            "tags": list(benchmark.tags), "note": "; ".join(notes)}


def rows_for(benchmark: Benchmark, values: Mapping[str, float | None], note: str = "") -> list[dict[str, object]]:
    """Every declared figure's row; a figure the run did not report is "not run"."""
    unknown = sorted(set(values) - {f.name for f in benchmark.figures})
    if unknown:
        raise ValueError(f"{benchmark.name} reported figures it does not declare: {unknown}")
    out = []
    for figure in benchmark.figures:
        if figure.name in values:
            out.append(row(benchmark, figure, values[figure.name], note))
        else:
            out.append(row(benchmark, figure, None, note or "not reported by this run"))
    return out


def detail(*parts: object) -> None:
    """A line of context beside the figures (stderr: the runner keeps it in the benchmark's log, not the table)."""
    print(*parts, file=sys.stderr, flush=True)


def run_alone(benchmark: Benchmark, measure: Callable[[int | None], Mapping[str, float | None]],
              argv: Sequence[str] | None = None) -> None:
    """`python benchmarks/bench_NAME.py [--size N]`: measure here and print this benchmark's rows."""
    from benchmarks.table import text_table

    parser = argparse.ArgumentParser(description=benchmark.about)
    parser.add_argument("--size", type=int, default=None, help=benchmark.size or "the benchmark's scale")
    parser.add_argument("--small", action="store_true", help=f"a smoke run at size {benchmark.small}")
    args = parser.parse_args(argv)
    size = benchmark.small if args.small else args.size
    print(text_table(rows_for(benchmark, measure(size))))
