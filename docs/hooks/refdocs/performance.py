"""The performance table: benchmarks/results/results.json, which the benchmark runner (`python -m benchmarks`)
writes, as one Markdown table. The file's format: {"generated_at", "commit", "machine", "rows": [{"benchmark",
"figure", "unit", "value", "baseline", "ratio", "goal", "direction", "margin", "status", "tags", "note"}]}."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from refdocs.markdown import cell, code, table

RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "results.json"
NO_RESULTS = "No results committed yet: `python -m benchmarks` writes them to `benchmarks/results/results.json`."
STATUS_WORDS = {"pass": "pass", "short": "**short**", "no goal": "no goal", "not run": "not run"}
ROW_KEYS = ("benchmark", "figure", "unit", "value", "baseline", "ratio", "goal", "direction", "margin", "status", "tags", "note")


class ResultsError(ValueError):
    """The results file is not in the runner's format (the message names the row and the key)."""


def number(value: float | None, unit: str = "") -> str:
    """A figure for a reader: three significant digits, its unit; a dash when there is none."""
    if value is None:
        return "—"
    text = f"{value:.3g}" if abs(value) < 1e6 else f"{value:,.0f}"
    return f"{text} {cell(unit)}".strip()


def goal_text(row: dict[str, Any]) -> str:
    """The goal with its direction and noise margin: `≤ 50 ms (± 20%)`."""
    if row["goal"] is None:
        return "—"
    sign = "≤" if row["direction"] == "lower" else "≥"
    return f"{sign} {number(row['goal'], row['unit'])} (± {row['margin']:.0%})"


def check_row(i: int, row: Any) -> dict[str, Any]:
    """`row` if it has every key of the format with a known direction and status, else ResultsError."""
    if not isinstance(row, dict):
        raise ResultsError(f"rows[{i}] is not an object")
    missing = [key for key in ROW_KEYS if key not in row]
    if missing:
        raise ResultsError(f"rows[{i}] has no {', '.join(missing)}")
    if row["direction"] not in ("lower", "higher"):
        raise ResultsError(f"rows[{i}] direction must be lower or higher, got {row['direction']!r}")
    if row["status"] not in STATUS_WORDS:
        raise ResultsError(f"rows[{i}] status must be one of {', '.join(STATUS_WORDS)}, got {row['status']!r}")
    return row


def results_table(results: dict[str, Any]) -> str:
    rows = [check_row(i, row) for i, row in enumerate(results.get("rows", []))]
    body = [(code(r["benchmark"]), cell(r["figure"]), number(r["value"], r["unit"]), number(r["baseline"], r["unit"]),
             "—" if r["ratio"] is None else f"{r['ratio']:.2f}×", goal_text(r), STATUS_WORDS[r["status"]],
             cell(", ".join(r["tags"])), cell(r["note"]))
            for r in rows]
    return table(("Benchmark", "Figure", "Value", "Baseline", "Ratio", "Goal", "Status", "Tags", "Note"), body)


def render(path: Path = RESULTS) -> str:
    """Where the figures come from, then the table; a sentence saying there are none when the file is absent."""
    if not path.exists():
        return NO_RESULTS
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise ResultsError(f"{path} is not JSON: {err}") from err
    if not isinstance(results, dict) or not isinstance(results.get("rows"), list):
        raise ResultsError(f"{path} has no rows list")
    origin = (f"Measured on {cell(results.get('machine', 'an unnamed machine'))} at commit "
              f"{code(str(results.get('commit', '?'))[:12])}, {cell(results.get('generated_at', 'at an unknown time'))}.")
    return "\n".join([origin, "", results_table(results), ""])
