"""A dataset revision's section as the revision page, the feeds and chat messages show it: the table the tracker
stored in the revision's `revision.ingested` event (payload `dataset`, tracker/revision/dataset_table.py) read
defensively into rows of text: per config and split the rows before and after with the delta, the schema diff
(columns added, removed or retyped, HF feature types), the licence, gate and loading-script notes, and the state
of the viewer's conversion.

A revision ingested before the table existed has none: no section, never an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SplitRow:
    config: str
    split: str
    before: str
    after: str
    delta: str
    state: str  # same, added or removed


@dataclass(frozen=True)
class ColumnRow:
    config: str
    column: str
    change: str  # added, removed or retyped
    before: str
    after: str
    splits: str


@dataclass
class DatasetView:
    line: str
    splits: list[SplitRow] = field(default_factory=list)
    splits_more: int = 0  # split rows the table did not carry
    schema: list[ColumnRow] = field(default_factory=list)
    schema_more: int = 0
    licence: str = ""
    gated: str = ""
    notes: list[str] = field(default_factory=list)
    conversion: str | None = None  # None: no conversion read (not at the head, or the dataset has none)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "—"


def _delta(value: Any) -> str:
    return f"{value:+,}" if isinstance(value, int) and not isinstance(value, bool) and value else ""


def _type(value: Any) -> str:
    return "—" if value is None else str(value)


def _gate(value: Any) -> str:
    return "unknown" if value is None else "not gated" if value is False else f"gated ({value})"


def dataset_view(payload: Mapping[str, Any] | None) -> DatasetView | None:
    """The section of a `revision.ingested` payload, or None when it carries no dataset table."""
    table = _map(_map(payload).get("dataset"))
    if not table:
        return None
    splits = [_map(s) for s in table.get("splits") or []]
    schema = [_map(c) for c in table.get("schema") or []]
    licence, gated = _map(table.get("licence")), _map(table.get("gated"))
    conversion = _map(table.get("conversion"))
    view = DatasetView(
        line=str(table.get("line") or ""),
        splits=[SplitRow(str(s.get("config")), str(s.get("split")), _count(s.get("before")), _count(s.get("after")),
                         _delta(s.get("delta")), str(s.get("state") or "same")) for s in splits],
        schema=[ColumnRow(str(c.get("config")), str(c.get("column")), str(c.get("change")), _type(c.get("before")),
                          _type(c.get("after")), ", ".join(str(x) for x in c.get("splits") or [])) for c in schema],
        licence=str(licence.get("after") or "none declared"),
        gated=_gate(gated.get("after")),
        notes=[str(n) for n in table.get("notes") or [] if isinstance(n, str)][:20],
        conversion=(f"{conversion.get('state')} (refs/convert/parquet at {str(conversion.get('sha') or '?')[:12]})"
                    if conversion else None))
    total, columns = table.get("splits_total"), table.get("schema_total")
    view.splits_more = max(0, total - len(splits)) if isinstance(total, int) else 0
    view.schema_more = max(0, columns - len(schema)) if isinstance(columns, int) else 0
    return view


def dataset_text(view: DatasetView, limit: int = 6) -> list[str]:
    """A few plain lines for chat messages and feed summaries: the one-line summary, the splits whose rows moved
    and the schema changes (the first `limit` of each)."""
    lines = [view.line] if view.line else []
    moved = [s for s in view.splits if s.delta or s.state != "same"]
    lines += [f"{s.config}/{s.split}: {s.before} -> {s.after}" + (f" ({s.delta})" if s.delta else "")
              + (f" [{s.state}]" if s.state != "same" else "") for s in moved[:limit]]
    lines += [f"{c.config}: column {c.column} {c.change}" + (f" ({c.before} -> {c.after})" if c.change == "retyped"
                                                              else f" ({c.after if c.change == 'added' else c.before})")
              for c in view.schema[:limit]]
    return lines
