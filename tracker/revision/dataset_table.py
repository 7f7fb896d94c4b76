"""A dataset revision as its pages, feeds and webhook payloads show it: per config and split the rows before and
after (with the delta), the schema diff (columns added, removed or retyped, in HF feature types where the files
state them), the licence, gate and loading-script notes, and the state of the viewer's conversion.

`dataset_table` is pure: two dataset summaries (tracker/revision/dataset_summary.py) in, a small JSON-able dict
out, stored in the revision's `revision.ingested` event payload as `dataset` (tracker/revision/events.py), which
feeds/views and feeds/webhooks render. Bounded: at most MAX_SPLITS split rows and MAX_COLUMNS schema rows, the
rest counted (`splits_total`, `schema_total`).
"""

from __future__ import annotations

from typing import Any

MAX_SPLITS = 100
MAX_COLUMNS = 100


def dataset_table(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """The table of `new` against `old` (None: the first revision seen, nothing before)."""
    before, after = _configs(old) if old is not None else {}, _configs(new)
    splits = _splits(before, after)
    schema = _schema(before, after) if old is not None else []
    conversion = new.get("conversion")
    table: dict[str, Any] = {
        "splits": splits[:MAX_SPLITS],
        "splits_total": len(splits),
        "schema": schema[:MAX_COLUMNS],
        "schema_total": len(schema),
        "licence": {"before": (old or {}).get("licence"), "after": new.get("licence")},
        "gated": {"before": (old or {}).get("gated"), "after": new.get("gated")},
        "loading_script": new.get("loading_script"),
        "script_only": bool(new.get("script_only")),
        "notes": _notes(old, new),
        "conversion": _conversion(conversion) if isinstance(conversion, dict) else None,
    }
    table["line"] = summary_line(table)
    return table


def _configs(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{config: {split: facts}}: the files' configs, or the viewer's conversion's when the head holds no data."""
    configs = summary.get("configs") or {}
    conversion = summary.get("conversion") or {}
    if not summary.get("shards") and conversion.get("configs"):
        configs = conversion["configs"]
    return {name: dict((c or {}).get("splits") or {}) for name, c in configs.items()}


def _rows(facts: dict[str, Any] | None) -> int | None:
    if not facts or not facts.get("rows_known"):
        return None
    rows = facts.get("rows")
    return rows if isinstance(rows, int) else None


SPLIT_ORDER = ("train", "validation", "test")  # the usual splits first, the rest by name


def _split_key(split: str) -> tuple[int, str]:
    return (SPLIT_ORDER.index(split) if split in SPLIT_ORDER else len(SPLIT_ORDER), split)


def _splits(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Configs by name, splits train, validation, test, then by name: the same order whether a summary was just
    made or read back from storage (stored as JSON with sorted keys)."""
    out = []
    for config in sorted(after.keys() | before.keys()):
        old, new = before.get(config, {}), after.get(config, {})
        for split in sorted(new.keys() | old.keys(), key=_split_key):
            a, b = _rows(old.get(split)), _rows(new.get(split))
            state = "removed" if split not in new else "added" if split not in old else "same"
            out.append({"config": config, "split": split, "before": a, "after": b, "state": state,
                        "delta": b - a if a is not None and b is not None else None,
                        "columns": len((new.get(split) or old.get(split) or {}).get("columns") or {})})
    return out


def _schema(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per config and column: added, removed or retyped, with the splits it applies to."""
    found: dict[tuple[str, str, str, str | None, str | None], list[str]] = {}
    for config in (c for c in after if c in before):
        for split in (s for s in after[config] if s in before[config]):
            a = before[config][split].get("columns") or {}
            b = after[config][split].get("columns") or {}
            if not a or not b:
                continue  # columns not read on one side: not compared
            for name in sorted(a.keys() | b.keys()):
                if name not in a:
                    key = (config, name, "added", None, b[name])
                elif name not in b:
                    key = (config, name, "removed", a[name], None)
                elif a[name] != b[name]:
                    key = (config, name, "retyped", a[name], b[name])
                else:
                    continue
                found.setdefault(key, []).append(split)
    return [{"config": c, "column": n, "change": k, "before": x, "after": y, "splits": sorted(s)}
            for (c, n, k, x, y), s in sorted(found.items(), key=lambda i: (i[0][0], i[0][1], i[0][2]))]


def _notes(old: dict[str, Any] | None, new: dict[str, Any]) -> list[str]:
    notes = []
    if old is not None and old.get("licence") != new.get("licence"):
        notes.append(f"licence changed: {old.get('licence') or 'none'} -> {new.get('licence') or 'none'}")
    if old is not None and None not in (old.get("gated"), new.get("gated")) and old["gated"] != new["gated"]:
        notes.append(f"gate changed: {_gate(old['gated'])} -> {_gate(new['gated'])}")
    if new.get("script_only"):
        notes.append(f"only a loading script ({new.get('loading_script')}), no data files: datasets 4.0 and later "
                     "cannot load it")
    elif new.get("loading_script"):
        notes.append(f"loading script {new['loading_script']}: datasets before 4.0 run its code, 4.0 and later refuse it")
    for m in new.get("card_mismatches") or []:
        notes.append(f"{m['config']}/{m['split']}: the card declares {m['card']:,} rows, the files hold {m['files']:,}")
    return notes[:20]


def _gate(value: Any) -> str:
    return "not gated" if value is False else f"gated ({value})"


def _conversion(conversion: dict[str, Any]) -> dict[str, Any]:
    lagging = bool(conversion.get("lagging"))
    source = conversion.get("source_sha")
    if lagging:
        state = "lags the head" + (f": made from {str(source)[:12]}" if source else ": made before any stored revision")
    else:
        state = "of this revision"
    return {"sha": conversion.get("sha"), "source_sha": source, "lagging": lagging, "state": state,
            "configs": sorted(conversion.get("configs") or {})}


def summary_line(table: dict[str, Any]) -> str:
    """One line: configs, splits, rows now and the net change, schema changes, e.g.
    "2 configs, 4 splits, 12,000 rows (-500); 1 column change"."""
    splits = [s for s in table["splits"] if s["state"] != "removed"]
    configs = {s["config"] for s in splits}
    parts = [f"{len(configs)} config{'s' if len(configs) != 1 else ''}, {len(splits)} split{'s' if len(splits) != 1 else ''}"]
    if splits and all(s["after"] is not None for s in splits):
        rows = sum(s["after"] for s in splits)
        deltas = [s["delta"] for s in table["splits"] if s["delta"]]
        parts[0] += f", {rows:,} rows" + (f" ({sum(deltas):+,})" if deltas else "")
    elif splits:
        parts[0] += ", rows not all counted"
    if table["schema_total"]:
        parts.append(f"{table['schema_total']} column change{'s' if table['schema_total'] != 1 else ''}")
    if table["script_only"]:
        parts.append("loading script only")
    return "; ".join(parts)
