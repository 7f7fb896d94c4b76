"""The one results table: its JSON document (the shape the docs' performance page renders), its Markdown, a text
table for the terminal, and merging a run into an earlier results file."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

COLUMNS = ("benchmark", "figure", "value", "unit", "baseline", "ratio", "goal", "status", "note")


def number(value: object) -> str:
    """A figure as a person reads it: four significant digits, thousands grouped."""
    if value is None:
        return "-"
    if not isinstance(value, int | float):
        return str(value)
    if value == int(value) and abs(value) < 1e12:
        return f"{int(value):,}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def goal_text(row: dict) -> str:
    if row["goal"] is None:
        return "-"
    sign = "≤" if row["direction"] == "lower" else "≥"
    margin = f" (±{row['margin']:.0%})" if row["margin"] else ""
    return f"{sign} {number(row['goal'])}{margin}"


def cells(row: dict) -> list[str]:
    ratio = "-" if row["ratio"] is None else f"{row['ratio']:.3g}x"
    return [row["benchmark"], row["figure"], number(row["value"]), row["unit"], number(row["baseline"]), ratio,
            goal_text(row), row["status"], row["note"]]


def document(rows: Sequence[dict], generated_at: str, commit: str, machine: str) -> dict:
    return {"generated_at": generated_at, "commit": commit, "machine": machine, "rows": list(rows)}


def merged(old_rows: Iterable[dict], new_rows: Sequence[dict], known: Sequence[str]) -> list[dict]:
    """The new rows, and the old rows of benchmarks this run did not run (still declared), in `known`'s order."""
    ran = {r["benchmark"] for r in new_rows}
    keep = [r for r in old_rows if r["benchmark"] not in ran and r["benchmark"] in known]
    order = {name: i for i, name in enumerate(known)}
    return sorted([*keep, *new_rows], key=lambda r: order.get(r["benchmark"], len(order)))


def markdown(doc: dict) -> str:
    """The results as the docs' performance page shows them."""
    counts = {s: sum(r["status"] == s for r in doc["rows"]) for s in ("pass", "short", "no goal", "not run")}
    lines = [
        "# Benchmark results",
        "",
        f"Generated {doc['generated_at']} at commit `{doc['commit']}` on {doc['machine']}.",
        "Written by `python -m benchmarks run`; a row short of its goal misses it by more than its noise margin "
        "(±). Rows of benchmarks not run in the latest run keep their earlier values.",
        "",
        f"{counts['pass']} pass, {counts['short']} short, {counts['no goal']} without a goal, {counts['not run']} not run.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" for _ in COLUMNS) + "|",
    ]
    for row in doc["rows"]:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells(row)) + " |")
    return "\n".join(lines) + "\n"


def text_table(rows: Sequence[dict]) -> str:
    """The rows for a terminal: aligned columns, the note last."""
    grid = [list(COLUMNS)] + [cells(r) for r in rows]
    widths = [max(len(line[i]) for line in grid) for i in range(len(COLUMNS) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=False)) + "  " + line[-1] for line in grid)


def read(path: Path) -> dict | None:
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def write(path: Path, doc: dict) -> None:
    """results.json and, beside it, results.md (the same stem)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    path.with_suffix(".md").write_text(markdown(doc), encoding="utf-8")
