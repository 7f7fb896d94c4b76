"""The one place deepdiff is used: parsed JSON in, our own `JsonChange` records out.

Paths are written the way a person reads them: `text_config.num_hidden_layers`, `eos_token_id[2]`,
`id2label["7"]` (keys that are not plain names are quoted). Containers with more than
`BIG_CONTAINER` entries (id2label, a vocab, a merges list) are never walked element by element: they
come back as one change whose `summary` counts what was added, removed and changed, with examples.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from deepdiff import DeepDiff

BIG_CONTAINER = 50
EXAMPLES = 20
ADDED, REMOVED, CHANGED, TYPE_CHANGED = "added", "removed", "changed", "type_changed"

Key = str | int

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
_REPORTS = {
    "values_changed": CHANGED,
    "type_changes": TYPE_CHANGED,
    "dictionary_item_added": ADDED,
    "dictionary_item_removed": REMOVED,
    "iterable_item_added": ADDED,
    "iterable_item_removed": REMOVED,
}
_SAME = "\x00hubwatch-summarised\x00"  # stands in, on both sides, for a container already summarised


@dataclass(frozen=True)
class JsonChange:
    """One difference between two JSON documents.

    `old`/`new` are the values (None where absent). When `summary` is set the values were too big to
    carry: `old`/`new` are None and `summary` holds counts and examples instead.
    """

    keys: tuple[Key, ...]
    change: str
    old: Any = None
    new: Any = None
    summary: dict[str, Any] | None = None

    @property
    def path(self) -> str:
        return format_path(self.keys)

    @property
    def top(self) -> Key | None:
        return self.keys[0] if self.keys else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "change": self.change}
        if self.summary is not None:
            out["summary"] = self.summary
        else:
            out["old"], out["new"] = self.old, self.new
        return out


def format_path(keys: tuple[Key, ...] | list[Key]) -> str:
    """`("text_config", "num_hidden_layers")` -> `text_config.num_hidden_layers`; ints become `[i]`."""
    out = ""
    for key in keys:
        if isinstance(key, int):
            out += f"[{key}]"
        elif _NAME.match(key):
            out += f".{key}" if out else key
        else:
            out += f"[{json.dumps(key, ensure_ascii=False)}]"
    return out


def json_changes(old: Any, new: Any) -> list[JsonChange]:
    """Every difference between two parsed JSON values, in a stable order (sorted by path)."""
    if old == new:
        return []
    summarised: list[JsonChange] = []
    old_p, new_p = _prune(old, new, (), summarised)
    changes = summarised + _deepdiff(old_p, new_p)
    return sorted(changes, key=lambda c: _sort_key(c.keys))


def _sort_key(keys: tuple[Key, ...]) -> tuple[tuple[int, Any], ...]:
    return tuple((0, k) if isinstance(k, int) else (1, k) for k in keys)


def _is_big(value: Any) -> bool:
    return isinstance(value, (dict, list)) and len(value) > BIG_CONTAINER


def _prune(old: Any, new: Any, keys: tuple[Key, ...], out: list[JsonChange]) -> tuple[Any, Any]:
    """Copies of old/new with big containers replaced by a shared marker; their summaries go to `out`."""
    if _is_big(old) or _is_big(new):
        if type(old) is type(new):
            if old != new:
                out.append(JsonChange(keys, CHANGED, summary=summarise_container(old, new)))
            return _SAME, _SAME
        return old, new  # a type change: reported by deepdiff, compacted below
    if isinstance(old, dict) and isinstance(new, dict):
        old_c, new_c = dict(old), dict(new)
        for key in old.keys() & new.keys():
            old_c[key], new_c[key] = _prune(old[key], new[key], (*keys, key), out)
        return old_c, new_c
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        pairs = [_prune(a, b, (*keys, i), out) for i, (a, b) in enumerate(zip(old, new, strict=True))]
        return [a for a, _ in pairs], [b for _, b in pairs]
    return old, new


def _deepdiff(old: Any, new: Any) -> list[JsonChange]:
    if old == new:
        return []
    tree = DeepDiff(
        old,
        new,
        view="tree",
        ignore_numeric_type_changes=True,  # 500000 and 500000.0 are the same setting
        ignore_private_variables=False,  # keys like `__version__` are data here
        threshold_to_diff_deeper=0,  # always walk into dicts, however few keys they share
    )
    out: list[JsonChange] = []
    for report, levels in tree.items():
        change = _REPORTS.get(report)
        if change is None:
            continue
        for level in levels:
            keys = tuple(level.path(output_format="list"))
            before = None if change == ADDED else level.t1
            after = None if change == REMOVED else level.t2
            # null <-> a value is a plain change; type_changed is kept for two different non-null types
            kind = CHANGED if change == TYPE_CHANGED and (before is None or after is None) else change
            out.append(_compacted(JsonChange(keys, kind, before, after)))
    return out


def _compacted(change: JsonChange) -> JsonChange:
    if not (_is_big(change.old) or _is_big(change.new)):
        return change
    summary = {"old": describe_container(change.old), "new": describe_container(change.new)}
    return JsonChange(change.keys, change.change, summary=summary)


def describe_container(value: Any) -> Any:
    """A big container as `{"type": "dict", "length": n}`; anything else as itself."""
    if isinstance(value, dict):
        return {"type": "dict", "length": len(value)}
    if isinstance(value, list):
        return {"type": "list", "length": len(value)}
    return value


def summarise_container(old: dict | list, new: dict | list) -> dict[str, Any]:
    """Counts and examples of what differs between two big dicts (by key) or lists (as multisets)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return _summarise_dict(old, new)
    assert isinstance(old, list) and isinstance(new, list)
    return _summarise_list(old, new)


def _summarise_dict(old: dict, new: dict) -> dict[str, Any]:
    added = [k for k in new if k not in old]
    removed = [k for k in old if k not in new]
    changed = [k for k in new if k in old and old[k] != new[k]]
    return {
        "type": "dict",
        "old_length": len(old),
        "new_length": len(new),
        "added": len(added),
        "removed": len(removed),
        "changed": len(changed),
        "examples": {
            "added": {k: new[k] for k in added[:EXAMPLES]},
            "removed": {k: old[k] for k in removed[:EXAMPLES]},
            "changed": {k: [old[k], new[k]] for k in changed[:EXAMPLES]},
        },
    }


def _summarise_list(old: list, new: list) -> dict[str, Any]:
    old_count, new_count = Counter(map(_canonical, old)), Counter(map(_canonical, new))
    added = new_count - old_count
    removed = old_count - new_count
    return {
        "type": "list",
        "old_length": len(old),
        "new_length": len(new),
        "added": sum(added.values()),
        "removed": sum(removed.values()),
        "reordered": not added and not removed,
        "examples": {
            "added": [json.loads(s) for s in list(added)[:EXAMPLES]],
            "removed": [json.loads(s) for s in list(removed)[:EXAMPLES]],
        },
    }


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def brief(value: Any, limit: int = 48) -> str:
    """A value as compact JSON for a summary line, cut with an ellipsis past `limit` characters."""
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def fits(value: Any, limit: int = 48) -> bool:
    """True when `value` reads whole in a summary line."""
    return len(json.dumps(value, ensure_ascii=False, separators=(", ", ": "))) <= limit


MISSING = object()  # value_at's answer for a path that does not exist


def value_at(doc: Any, keys: tuple[Key, ...]) -> Any:
    """The value at `keys` inside `doc`, or `MISSING` when the path does not exist."""
    for key in keys:
        try:
            doc = doc[key]
        except (KeyError, IndexError, TypeError):
            return MISSING
    return doc


def describe_group(top: Key, changes: list[JsonChange], old_doc: Any, new_doc: Any) -> str:
    """One phrase for all changes under one top-level key: `num_hidden_layers 32 -> 40`,
    `rope_scaling changed`, `text_config.hidden_size 896 -> 1536`, `id2label: 3 added`."""
    name = format_path((top,))
    before, after = value_at(old_doc, (top,)), value_at(new_doc, (top,))
    if len(changes) == 1 and changes[0].summary is not None and changes[0].keys == (top,):
        return f"{name}: {_counts(changes[0].summary)}"
    if before is MISSING:
        return f"{name} added ({brief(after)})" if fits(after) else f"{name} added"
    if after is MISSING:
        return f"{name} removed"
    if fits(before) and fits(after):
        return f"{name} {brief(before)} -> {brief(after)}"
    leaves = [c for c in changes if c.summary is None]
    if len(changes) <= 2 and len(leaves) == len(changes) and all(_short(c) for c in changes):
        return ", ".join(describe_change(c) for c in changes)
    return f"{name} changed ({len(changes)} keys)" if len(changes) > 1 else f"{name} changed"


def _short(change: JsonChange) -> bool:
    return fits(change.old, 24) and fits(change.new, 24)


def describe_change(change: JsonChange) -> str:
    """One phrase for one change: `a.b 1 -> 2`, `a.c added (3)`, `a.d removed`, `vocab: 2 added`."""
    if change.summary is not None and "added" in change.summary:
        return f"{change.path}: {_counts(change.summary)}"
    if change.change == ADDED:
        return f"{change.path} added ({brief(change.new)})"
    if change.change == REMOVED:
        return f"{change.path} removed"
    return f"{change.path} {brief(change.old)} -> {brief(change.new)}"


def _counts(summary: dict[str, Any]) -> str:
    parts = [f"{summary[k]:,} {k}" for k in ("added", "removed", "changed") if summary.get(k)]
    if summary.get("reordered"):
        parts.append("reordered")
    return ", ".join(parts) or "changed"
