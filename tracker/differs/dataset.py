"""What changed between two dataset summaries (tracker/revision/dataset_summary.py), as Changes of kind
`dataset`, each naming its own event kind (`detail["event"]`, storage.kinds.DATASET_EVENT_DESCRIPTIONS) and
saying in one line what a user of the dataset meets: rows added or removed per config and split, columns
added, removed or retyped (HF feature types), a config or split renamed or removed with the load_dataset call
that now fails, the licence or the gate changed, a loading script added or all that is left, files re-uploaded
unchanged, the card's counts disagreeing with the files, and files whose footer could not be read.

A dataset whose head holds no data files (a script) is compared by the viewer's Parquet conversion when one
was read and it does not lag the head; a conversion that lags is said in the summary, never compared.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tracker.differs.files import card_summary
from tracker.revision.changes import Change, ChangeKind, Severity
from tracker.revision.classify import MODEL_CARD

SHOW = 6  # names listed in a summary line before "and N more"


def diff(old: dict[str, Any] | None, new: dict[str, Any], repo_id: str, requires_latest: bool = False) -> list[Change]:
    """The changes from `old` (None: the first revision seen) to `new`, for the dataset `repo_id` (`org/name`).
    `requires_latest`: the dataset's licence requires its latest version (the watch's configuration), which
    makes removed rows an event of their own."""
    changes: list[Change] = []
    if new.get("script_only") and not (old or {}).get("script_only"):
        changes.append(_change("dataset.script_only", Severity.CRITICAL, new.get("loading_script") or "",
                               f"only a loading script left ({new.get('loading_script')}), no data files: load_dataset "
                               "fails with datasets 4.0 and later", {"loading_script": new.get("loading_script")},
                               security=False))
    changes += _unreadable(old, new)
    if old is None:
        return changes
    if new.get("loading_script") and not old.get("loading_script"):
        changes.append(_change("dataset.loading_script_added", Severity.WARNING, new["loading_script"],
                               f"loading script {new['loading_script']} added: datasets before 4.0 run its code, 4.0 "
                               "and later refuse it", {"loading_script": new["loading_script"]}, security=True))
    cards_read = _card_read(old) and _card_read(new)  # an unread or unreadable card declares nothing
    if cards_read and old.get("licence") != new.get("licence"):
        changes.append(_change("dataset.licence_changed", Severity.WARNING, "README.md",
                               f"licence changed: {old.get('licence') or 'none'} -> {new.get('licence') or 'none'}",
                               {"before": old.get("licence"), "after": new.get("licence")}, security=True))
    if old.get("gated") is not None and new.get("gated") is not None and old["gated"] != new["gated"]:
        changes.append(_change("dataset.gating_changed", Severity.WARNING, "",
                               f"gate changed: {_gate(old['gated'])} -> {_gate(new['gated'])}",
                               {"before": old["gated"], "after": new["gated"]}))
    before, after = _compared(old), _compared(new)
    if before is not None and after is not None:
        if cards_read:  # without the card's configs, the files' own layout would read as configs renamed
            changes += _structure(before, after, repo_id)
        changes += _rows(before, after, requires_latest)
        changes += _columns(before, after)
        changes += _reuploads(old, new, before, after)
    changes += _mismatches(old, new)
    return changes


def licence_said_once(changes: list[Change]) -> list[Change]:
    """A dataset's licence change said once, as `dataset.licence_changed` ("licence changed: apache-2.0 -> mit"):
    when the revision's changes hold one, the card's own change (README.md, of the `files` kind) leaves its
    licence keys out of its summary, severity, security and the key table its detail's `metadata` shows (they move
    to `licence_metadata`, and `licence_said_by` names the event that says them); the card's other front-matter
    changes (gating, base model) and the file change itself stay. Without a `dataset.licence_changed` (the card
    unread on one side) the card's change says the licence."""
    if not any(c.kind is ChangeKind.DATASET and c.detail.get("event") == "dataset.licence_changed" for c in changes):
        return changes
    folded = []
    for change in changes:
        metadata = change.detail.get("metadata")
        if change.kind is ChangeKind.FILES and change.path == MODEL_CARD and isinstance(metadata, list) and any(
                isinstance(m, dict) and m.get("topic") == "license" for m in metadata):
            summary, severity, security = card_summary(change.path, str(change.detail.get("status", "changed")),
                                                       metadata, frozenset({"license"}))
            kept = [m for m in metadata if not (isinstance(m, dict) and m.get("topic") == "license")]
            moved = [m for m in metadata if isinstance(m, dict) and m.get("topic") == "license"]
            change = replace(change, summary=summary, severity=severity, security=security,
                             detail={**change.detail, "metadata": kept, "licence_metadata": moved,
                                     "licence_said_by": "dataset.licence_changed"})
        folded.append(change)
    return folded


def _card_read(summary: dict[str, Any]) -> bool:
    """The card was read: its YAML parsed, or there is none (a card refused by a gate or unreadable is not)."""
    return summary.get("card", "ok") in ("ok", "none")


def _change(event: str, severity: Severity, path: str, summary: str, detail: dict[str, Any],
            security: bool = False, structural: bool = False) -> Change:
    return Change(kind=ChangeKind.DATASET, path=path, summary=summary, severity=severity,
                  detail={"event": event, **detail}, structural=structural, security=security)


def _gate(value: Any) -> str:
    return "not gated" if value is False else f"gated ({value})"


def _compared(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The configs compared: the files', or the conversion's when the head holds no data files and the
    conversion is of the head; None when neither stands."""
    if summary.get("shards"):
        return summary.get("configs") or {}
    conversion = summary.get("conversion")
    if conversion and not conversion.get("lagging"):
        return conversion.get("configs") or {}
    return None


def _present(configs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{config: {split: facts}} for the splits that hold files."""
    return {name: {s: f for s, f in c["splits"].items() if f.get("shards")} for name, c in configs.items()
            if any(f.get("shards") for f in c["splits"].values())}


def _call(repo_id: str, config: str | None, split: str | None = None) -> str:
    args = [f'"{repo_id}"'] + ([f'"{config}"'] if config and config != "default" else [])
    if split is not None:
        args.append(f'split="{split}"')
    return f"load_dataset({', '.join(args)})"


def _same_content(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two splits (or configs, as their splits) hold the same data: the same rows and columns, known."""
    return a.get("rows_known") and b.get("rows_known") and a["rows"] == b["rows"] and a["columns"] == b["columns"]


def _structure(before: dict[str, Any], after: dict[str, Any], repo_id: str) -> list[Change]:
    old, new = _present(before), _present(after)
    changes: list[Change] = []
    gone, came = [c for c in old if c not in new], [c for c in new if c not in old]
    for config in gone:
        twin = next((c for c in came if _same_config(old[config], new[c])), None)
        if twin is not None:
            came.remove(twin)
            changes.append(_change("dataset.config_renamed", Severity.CRITICAL, config,
                                   f"config {config} renamed to {twin}: {_call(repo_id, config)} now fails, use "
                                   f"{_call(repo_id, twin)}", {"config": config, "renamed_to": twin,
                                                               "fails": _call(repo_id, config)}, structural=True))
            continue
        changes.append(_change("dataset.config_removed", Severity.CRITICAL, config,
                               f"config {config} removed: {_call(repo_id, config)} now fails",
                               {"config": config, "fails": _call(repo_id, config)}, structural=True))
    for config in came:
        changes.append(_change("dataset.config_added", Severity.NOTICE, config,
                               f"config {config} added ({_splits_line(new[config])})",
                               {"config": config, "splits": sorted(new[config])}, structural=True))
    for config in (c for c in old if c in new):
        lost, added = [s for s in old[config] if s not in new[config]], [s for s in new[config] if s not in old[config]]
        for split in lost:
            twin = next((s for s in added if _same_content(old[config][split], new[config][s])), None)
            call = _call(repo_id, config, split)
            if twin is not None:
                added.remove(twin)
                changes.append(_change("dataset.split_renamed", Severity.CRITICAL, f"{config}/{split}",
                                       f"config {config}: split {split} renamed to {twin}: {call} now fails",
                                       {"config": config, "split": split, "renamed_to": twin, "fails": call},
                                       structural=True))
                continue
            changes.append(_change("dataset.split_removed", Severity.CRITICAL, f"{config}/{split}",
                                   f"config {config}: split {split} removed: {call} now fails",
                                   {"config": config, "split": split, "fails": call}, structural=True))
        for split in added:
            rows = new[config][split].get("rows")
            changes.append(_change("dataset.split_added", Severity.NOTICE, f"{config}/{split}",
                                   f"config {config}: split {split} added" + (f" ({rows:,} rows)" if rows is not None else ""),
                                   {"config": config, "split": split, "rows": rows}, structural=True))
    return changes


def _same_config(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return set(a) == set(b) and all(_same_content(a[s], b[s]) for s in a)


def _splits_line(splits: dict[str, Any]) -> str:
    parts = [f"{s}: {f['rows']:,} rows" if f.get("rows") is not None else f"{s}: rows not counted"
             for s, f in splits.items()]
    return ", ".join(parts) or "no splits"


def _rows(before: dict[str, Any], after: dict[str, Any], requires_latest: bool) -> list[Change]:
    old, new = _present(before), _present(after)
    changes: list[Change] = []
    removed_total, removed_where = 0, []
    for config in (c for c in old if c in new):
        for split in (s for s in old[config] if s in new[config]):
            a, b = old[config][split], new[config][split]
            if not (a.get("rows_known") and b.get("rows_known")) or a["rows"] == b["rows"]:
                continue
            delta = b["rows"] - a["rows"]
            detail = {"config": config, "split": split, "before": a["rows"], "after": b["rows"], "delta": delta}
            where = f"config {config}, split {split}"
            if delta > 0:
                changes.append(_change("dataset.rows_added", Severity.NOTICE, f"{config}/{split}",
                                       f"{where}: {delta:,} rows added ({a['rows']:,} -> {b['rows']:,})", detail))
            else:
                changes.append(_change("dataset.rows_removed", Severity.WARNING, f"{config}/{split}",
                                       f"{where}: {-delta:,} rows removed ({a['rows']:,} -> {b['rows']:,})", detail))
                removed_total -= delta
                removed_where.append(f"{config}/{split}")
    if requires_latest and removed_total:
        changes.append(_change("dataset.rows_removed_latest_required", Severity.CRITICAL, "",
                               f"{removed_total:,} rows removed under a licence requiring the latest version "
                               f"({_names(removed_where)}): drop them from every copy", {
                                   "removed": removed_total, "splits": removed_where}))
    return changes


def _columns(before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    """Per config: columns added, removed and retyped, with the splits each applies to."""
    old, new = _present(before), _present(after)
    changes: list[Change] = []
    for config in (c for c in old if c in new):
        added: dict[str, dict[str, Any]] = {}
        removed: dict[str, dict[str, Any]] = {}
        retyped: dict[str, dict[str, Any]] = {}
        for split in (s for s in old[config] if s in new[config]):
            a, b = old[config][split].get("columns") or {}, new[config][split].get("columns") or {}
            if not a or not b:
                continue  # a split whose columns were not read is not compared
            for name in b.keys() - a.keys():
                added.setdefault(name, {"type": b[name], "splits": []})["splits"].append(split)
            for name in a.keys() - b.keys():
                removed.setdefault(name, {"type": a[name], "splits": []})["splits"].append(split)
            for name in a.keys() & b.keys():
                if a[name] != b[name]:
                    retyped.setdefault(name, {"before": a[name], "after": b[name], "splits": []})["splits"].append(split)
        splits = sorted(new[config])
        if added:
            partial = any(set(v["splits"]) != set(splits) for v in added.values())
            changes.append(_change(
                "dataset.columns_added", Severity.WARNING if partial else Severity.NOTICE, config,
                f"config {config}: column(s) added: {_listed(added, 'type')}"
                + (" (not in every split: load_dataset casts every split to one schema)" if partial else ""),
                {"config": config, "columns": _sorted(added)}, structural=True))
        if removed:
            changes.append(_change("dataset.columns_removed", Severity.WARNING, config,
                                   f"config {config}: column(s) removed: {_listed(removed, 'type')}",
                                   {"config": config, "columns": _sorted(removed)}, structural=True))
        if retyped:
            line = ", ".join(f"{n} {v['before']} -> {v['after']}" for n, v in sorted(retyped.items())[:SHOW])
            more = f" and {len(retyped) - SHOW} more" if len(retyped) > SHOW else ""
            changes.append(_change("dataset.columns_retyped", Severity.WARNING, config,
                                   f"config {config}: column(s) retyped: {line}{more}",
                                   {"config": config, "columns": _sorted(retyped)}, structural=True))
    return changes


def _listed(columns: dict[str, dict[str, Any]], key: str) -> str:
    shown = [f"{name} ({facts[key]})" for name, facts in sorted(columns.items())[:SHOW]]
    return ", ".join(shown) + (f" and {len(columns) - SHOW} more" if len(columns) > SHOW else "")


def _sorted(columns: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {name: {**facts, "splits": sorted(facts["splits"])} for name, facts in sorted(columns.items())}


def _names(items: list[str]) -> str:
    return ", ".join(items[:SHOW]) + (f" and {len(items) - SHOW} more" if len(items) > SHOW else "")


def _reuploads(old: dict[str, Any], new: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    """Splits whose files all changed content ids while their rows and columns stayed: a re-upload."""
    a, b = _present(before), _present(after)
    old_ids = {facts["oid"] for facts in (old.get("shards") or {}).values()}
    rewritten, files = [], 0
    for config in (c for c in a if c in b):
        for split in (s for s in a[config] if s in b[config]):
            x, y = a[config][split], b[config][split]
            shards = (new.get("shards") or {})
            fresh = [p for p in y["shards"] if p in shards and shards[p]["oid"] not in old_ids]
            if fresh and _same_content(x, y):
                rewritten.append(f"{config}/{split}")
                files += len(fresh)
    if not rewritten:
        return []
    return [_change("dataset.reuploaded", Severity.INFO, "",
                    f"{files} data file(s) rewritten with the same columns and rows in {_names(rewritten)}: a re-upload",
                    {"splits": rewritten, "files": files})]


def _mismatches(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """The card's counts disagreeing with the files, where they did not (or not so) before."""
    seen = {(m["config"], m["split"], m["card"], m["files"]) for m in old.get("card_mismatches") or []}
    fresh = [m for m in new.get("card_mismatches") or [] if (m["config"], m["split"], m["card"], m["files"]) not in seen]
    if not fresh:
        return []
    line = ", ".join(f"{m['config']}/{m['split']}: card {m['card']:,}, files {m['files']:,}" for m in fresh[:SHOW])
    return [_change("dataset.card_mismatch", Severity.NOTICE, "README.md",
                    f"the card's num_examples disagree with the files' rows: {line}", {"mismatches": fresh})]


def _unreadable(old: dict[str, Any] | None, new: dict[str, Any]) -> list[Change]:
    """Data files, new in this revision, whose footer or first range could not be read or contradicts itself."""
    known = {facts["oid"] for facts in ((old or {}).get("shards") or {}).values()}
    bad = {path: facts for path, facts in (new.get("shards") or {}).items()
           if facts.get("verdict") in ("unreadable", "inconsistent") and facts["oid"] not in known}
    if new.get("card") == "unreadable" and (old or {}).get("card") != "unreadable":
        bad["README.md"] = {"verdict": "unreadable", "note": "; ".join(new.get("notes") or [])[:500]}
    return [_change("dataset.file_unreadable", Severity.NOTICE, path, f"{path}: {facts['verdict']}: {facts.get('note')}",
                    {"verdict": facts["verdict"], "note": facts.get("note")}) for path, facts in sorted(bad.items())]
