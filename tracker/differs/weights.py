"""Weight files: added, removed or changed by LFS sha256 and size; tensor-level changes from the
safetensors headers and torch checkpoints' pickles (names, shapes, dtypes, renames, parameter counts);
shard indexes; pickles judged by what they import (pickle_verdicts.py) and silent weight swaps flagged; the
parts of a GGUF split as one change (gguf_splits.py)."""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tracker.differs.files import ADDED, CHANGED, REMOVED, FileDelta, file_deltas
from tracker.differs.gguf_splits import merged_scan, split_name, splits
from tracker.differs.pickle_verdicts import pickle_verdict
from tracker.formats.gguf import is_gguf
from tracker.formats.manifest import WeightManifest
from tracker.revision.changes import Change, ChangeKind, Severity
from tracker.revision.classify import TRAINING_STATE, WEIGHT_INDEX_NAMES, is_pickle, is_safetensors, kind_of
from tracker.revision.snapshot import FileEntry, Snapshot

EXAMPLES = 20
_SHARD = re.compile(r"^(?P<stem>.+)-\d{5}-of-\d{5}(?P<ext>\.[a-z]+)$")
Signature = tuple[str, tuple[int, ...]]


def diff(old: Snapshot | None, new: Snapshot) -> list[Change]:
    """File-level changes of weight files, then one tensor-level Change per checkpoint that changed."""
    if old is None:
        return []
    deltas = file_deltas(old, new, lambda p: kind_of(p) is ChangeKind.WEIGHTS)
    files = [d for d in deltas if not _is_index(d.path)]
    grouped: dict[str, list[FileDelta]] = {}
    for d in files:
        if (named := split_name(d.path)) is not None:
            grouped.setdefault(named[0], []).append(d)
    out = [_file_change(old, new, d) for d in files if split_name(d.path) is None]
    out += [_split_change(old, new, name, parts) for name, parts in sorted(grouped.items())]
    out += _new_header_errors(old, new, {d.path for d in files})
    out += _checkpoint_changes(old, new, deltas)
    return out


def _is_index(path: str) -> bool:
    return posixpath.basename(path) in WEIGHT_INDEX_NAMES


def _size(entry: FileEntry | None) -> int | None:
    if entry is None:
        return None
    return entry.lfs_size if entry.lfs_size is not None else entry.size


def _usable(manifest: WeightManifest | None) -> bool:
    return manifest is not None and manifest.error is None


# --- one weight file --------------------------------------------------------------------------------


def _file_change(old: Snapshot, new: Snapshot, delta: FileDelta) -> Change:
    path = delta.path
    detail: dict[str, Any] = {"status": delta.status, "format": _format(path)}
    for side, entry in (("old", delta.old), ("new", delta.new)):
        if entry is not None:
            detail[f"{side}_sha256"], detail[f"{side}_size"] = entry.content_id, _size(entry)
    notes, severity, security, structural = [], Severity.NOTICE, False, False
    om, nm = old.manifests.get(path), new.manifests.get(path)
    if _usable(om) or _usable(nm):
        detail["parameters"] = _file_parameters(om, nm)
    if delta.status != REMOVED and nm is not None and nm.error is not None:
        detail["header_error"] = nm.error
        notes.append(f"header unreadable: {nm.error}")
        severity = Severity.WARNING
    scan = new.scans.get(path)
    if delta.status != REMOVED and (is_pickle(path) or (scan is not None and scan.format == "pickle")):
        verdict = pickle_verdict(scan)
        if is_pickle(path) or verdict.severity is not Severity.NOTICE:  # a .keras without code layers: no note
            notes.append(verdict.text)
            detail["pickle_scan"] = verdict.detail
            severity, security = max(severity, verdict.severity, key=lambda s: s.rank), security or verdict.security
    elif is_gguf(path) and delta.status != REMOVED:
        scan = new.scans.get(path)
        if scan is None or scan.note or not scan.result.get("tensors"):
            notes.append("GGUF" + (f" (header: {scan.note})" if scan is not None and scan.note else ""))
            severity, security = max(severity, Severity.WARNING, key=lambda s: s.rank), True
        else:
            notes.append(_gguf_text(scan.result))
            detail["gguf"] = {k: scan.result.get(k) for k in ("architecture", "file_type", "parameters", "tensor_bytes")}
    if delta.status == REMOVED and is_safetensors(path) and (pickles := _pickles_beside(new, path)):
        detail["replaced_by_pickle"] = pickles
        notes.append("pickle weights remain: " + ", ".join(pickles[:3]))
        severity, security = Severity.CRITICAL, True
    if delta.status == CHANGED and _header_changed(old, new, path):
        detail["header_changed"] = True  # the GGUF differ says what changed in it: not a silent swap
    elif delta.status == CHANGED:
        tensors_same = _same_tensors(om, nm, path)
        if tensors_same is None:
            detail["tensors_compared"] = False
            notes.append("tensors not compared (no readable header on both sides)")
        elif not tensors_same:
            structural = True
        elif not _config_changed(old, new, path):
            detail["silent_weight_swap"] = True
            notes.append("silent weight swap: new content, same tensors, config.json unchanged")
            severity, security = max(severity, Severity.WARNING, key=lambda s: s.rank), True
    if delta.status != CHANGED and _usable(om or nm) and (om or nm).tensors:
        structural = True
    summary = f"{path} {delta.status} ({_size_text(delta)})" + "".join(f"; {n}" for n in notes)
    return Change(ChangeKind.WEIGHTS, path, summary, severity, detail, structural, security)


def _split_change(old: Snapshot, new: Snapshot, name: str, deltas: list[FileDelta]) -> Change:
    """The parts of one GGUF split that differ, as one change named for the split: its parts' own changes in the
    detail, their sizes summed, the model's header facts merged, and every part missing from it named."""
    parts = [_file_change(old, new, d) for d in deltas]
    before, after = splits(old.files).get(name), splits(new.files).get(name)
    status = ADDED if before is None else REMOVED if after is None else CHANGED
    model = after or before
    assert model is not None  # a delta has a side
    sizes = [sum(_size(snapshot.files[p]) or 0 for p in m.paths) if m else None
             for snapshot, m in ((old, before), (new, after))]
    size_text = _bytes(sizes[1]) if status == ADDED else _bytes(sizes[0]) if status == REMOVED else \
        f"{_bytes(sizes[0])} -> {_bytes(sizes[1])}"
    changed = Counter(d.status for d in deltas)
    notes = [f"{len(model.paths)} of {model.parts} parts present, " + ", ".join(f"{n} {s}" for s, n in sorted(changed.items()))]
    detail: dict[str, Any] = {"status": status, "format": "gguf", "split": model.facts(),
                              "parts": [{"path": c.path, **c.detail} for c in parts]}
    severity = max((c.severity for c in parts), key=lambda x: x.rank)
    security, structural = any(c.security for c in parts), any(c.structural for c in parts)
    merged = merged_scan(after, new.scans) if after is not None else None
    if merged is not None and merged.result.get("tensors"):
        notes.append(_gguf_text(merged.result))
        detail["gguf"] = {k: merged.result.get(k) for k in ("architecture", "file_type", "parameters", "tensor_bytes")}
    if after is not None and after.missing:
        notes.append(f"missing part{'s' if len(after.missing) > 1 else ''}: {', '.join(after.missing)}")
        severity, security = max(severity, Severity.WARNING, key=lambda x: x.rank), True
    if any(c.detail.get("header_changed") for c in parts):
        detail["header_changed"] = True
    summary = f"{name} {status} (split GGUF, {size_text})" + "".join(f"; {n}" for n in notes)
    return Change(ChangeKind.WEIGHTS, name, summary, severity, detail, structural, security)


def _header_changed(old: Snapshot, new: Snapshot, path: str) -> bool:
    """Both sides' headers were scanned (GGUF) and the bytes read differ."""
    a, b = old.scans.get(path), new.scans.get(path)
    return a is not None and b is not None and a.scanned_oid != b.scanned_oid


def _gguf_text(result: dict[str, Any]) -> str:
    """"GGUF llama Q4_K_M, 8,030,261,248 parameters": what the header says of the model."""
    parts = [p for p in (result.get("architecture"), result.get("file_type")) if p]
    return "GGUF " + " ".join(parts) + f", {result.get('parameters', 0):,} parameters"


def _file_parameters(om: WeightManifest | None, nm: WeightManifest | None) -> dict[str, Any]:
    params: dict[str, Any] = {
        "old": om.parameters if om is not None and _usable(om) else None,
        "new": nm.parameters if nm is not None and _usable(nm) else None,
    }
    if params["old"] is not None and params["new"] is not None:
        params["delta"] = params["new"] - params["old"]
    return params


def _format(path: str) -> str:
    if is_safetensors(path):
        return "safetensors"
    if is_pickle(path):
        return "pickle"
    return posixpath.splitext(path)[1].lstrip(".").lower() or "unknown"


def _size_text(delta: FileDelta) -> str:
    old, new = _size(delta.old), _size(delta.new)
    if delta.status == ADDED:
        return _bytes(new)
    if delta.status == REMOVED:
        return _bytes(old)
    return f"{_bytes(old)} -> {_bytes(new)}" if old != new else f"same size {_bytes(new)}, new sha256"


def _bytes(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def _pickles_beside(snap: Snapshot, path: str) -> list[str]:
    """Pickle weight files in the same folder (training state such as optimizer.pt does not count)."""
    folder = posixpath.dirname(path)
    return sorted(
        p
        for p in snap.files
        if is_pickle(p)
        and posixpath.dirname(p) == folder
        and not posixpath.basename(p).startswith(TRAINING_STATE)
    )


def _same_tensors(om: WeightManifest | None, nm: WeightManifest | None, path: str) -> bool | None:
    """True/False when the headers say whether tensors changed; None when they cannot tell."""
    if _usable(om) and _usable(nm):
        return _tensor_map(om) == _tensor_map(nm)
    return None if is_safetensors(path) else True


def _tensor_map(manifest: WeightManifest) -> dict[str, Signature]:
    return {t.name: (t.dtype, tuple(t.shape)) for t in manifest.tensors}


def _config_changed(old: Snapshot, new: Snapshot, path: str) -> bool:
    folder = posixpath.dirname(path)
    name = posixpath.join(folder, "config.json") if folder else "config.json"
    if name not in old.files and name not in new.files:
        name = "config.json"
    before, after = old.files.get(name), new.files.get(name)
    return (before.content_id if before else None) != (after.content_id if after else None)


def _new_header_errors(old: Snapshot, new: Snapshot, seen: set[str]) -> list[Change]:
    """Headers that became unreadable on files whose content did not change."""
    out = []
    for path, manifest in sorted(new.manifests.items()):
        if path in seen or manifest.error is None or path not in new.files:
            continue
        before = old.manifests.get(path)
        if before is not None and before.error == manifest.error:
            continue
        summary = f"{path}: header unreadable ({manifest.error})"
        out.append(Change(ChangeKind.WEIGHTS, path, summary, Severity.WARNING, {"header_error": manifest.error}))
    return out


# --- checkpoints: the tensors of a model, across its shards ---------------------------------------


@dataclass
class Checkpoint:
    """The tensors of one model as a snapshot holds them: one file, a shard set, or an index."""

    key: str
    files: list[str] = field(default_factory=list)
    weight_map: dict[str, str] | None = None
    index_error: str | None = None
    index_meta: dict[str, Any] = field(default_factory=dict)


def checkpoints(snap: Snapshot) -> dict[str, Checkpoint]:
    """Group a snapshot's weight files: by index file, else by shard name stem, else one per file."""
    groups: dict[str, Checkpoint] = {}
    indexed: set[str] = set()
    for path in sorted(p for p in snap.files if _is_index(p)):
        doc, error = snap.read_json(path)
        cp = Checkpoint(path, index_error=error)
        if isinstance(doc, dict) and isinstance(doc.get("weight_map"), dict):
            cp.weight_map = {str(k): str(v) for k, v in doc["weight_map"].items()}
            cp.index_meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
            folder = posixpath.dirname(path)
            cp.files = sorted({posixpath.join(folder, f) if folder else f for f in cp.weight_map.values()})
            indexed.update(cp.files)
        elif error is None:
            cp.index_error = "no weight_map object"
        groups[path] = cp
    for path in sorted(p for p in snap.files if kind_of(p) is ChangeKind.WEIGHTS and not _is_index(p)):
        if path in indexed:
            continue
        match = _SHARD.match(posixpath.basename(path))
        key = posixpath.join(posixpath.dirname(path), match["stem"] + match["ext"]) if match else path
        groups.setdefault(key, Checkpoint(key)).files.append(path)
    return groups


def _tensors(snap: Snapshot, cp: Checkpoint) -> tuple[dict[str, Signature] | None, dict[str, int], str | None]:
    """name -> (dtype, shape) over the checkpoint's files, parameters per file, or why not readable."""
    tensors: dict[str, Signature] = {}
    per_file: dict[str, int] = {}
    for path in cp.files:
        manifest = snap.manifests.get(path)
        if manifest is None or manifest.error is not None:
            reason = manifest.error if manifest else "no header read"
            return None, per_file, f"{path}: {reason}"
        tensors.update(_tensor_map(manifest))
        per_file[path] = manifest.parameters
    return tensors, per_file, None


def _checkpoint_changes(old: Snapshot, new: Snapshot, deltas: list[FileDelta]) -> list[Change]:
    touched = {d.path for d in deltas}
    old_cps, new_cps = checkpoints(old), checkpoints(new)
    out = []
    for key in sorted(old_cps.keys() | new_cps.keys()):
        before, after = old_cps.get(key, Checkpoint(key)), new_cps.get(key, Checkpoint(key))
        if not touched & ({key} | set(before.files) | set(after.files)):
            continue
        change = _checkpoint_change(old, new, before, after)
        if change is not None:
            out.append(change)
    return out


def _tensor_source(snap: Snapshot, cp: Checkpoint) -> tuple[dict[str, Signature] | None, dict[str, int], str | None]:
    """Tensors from headers when every file is safetensors; else names only from the index."""
    if not cp.files:
        return {}, {}, None
    if all(is_safetensors(p) or (is_pickle(p) and p in snap.manifests) for p in cp.files):
        tensors, per_file, why = _tensors(snap, cp)
        if tensors is not None or cp.weight_map is None:
            return tensors, per_file, why
    if cp.weight_map is not None:
        return dict.fromkeys(cp.weight_map, ("?", ())), {}, None
    return None, {}, None


def _checkpoint_change(old: Snapshot, new: Snapshot, before: Checkpoint, after: Checkpoint) -> Change | None:
    key = after.key
    if after.index_error is not None and key in new.files:
        detail = {"error": after.index_error}
        return Change(ChangeKind.WEIGHTS, key, f"{key}: not readable ({after.index_error})", Severity.WARNING, detail)
    old_t, old_pf, old_why = _tensor_source(old, before)
    new_t, new_pf, new_why = _tensor_source(new, after)
    detail: dict[str, Any] = {"files": {"old": before.files, "new": after.files}}
    phrases: list[str] = []
    structural = False
    if old_t is not None and new_t is not None:
        tensors = compare_tensors(old_t, new_t)
        if tensors["counts"]:
            detail["tensors"], structural = tensors, True
            phrases += _tensor_phrases(tensors)
    elif old_why or new_why:
        detail["tensors_not_compared"] = old_why or new_why  # the file's own Change says so
    if old_pf or new_pf:
        detail["parameters"] = _parameters(old_pf, new_pf, bool(before.files), bool(after.files))
        if (p := detail["parameters"]).get("delta"):
            phrases.append(f"parameters {p['delta']:+,} ({p['old']:,} -> {p['new']:,})")
    if (index := _index_changes(before, after)) is not None:
        detail["index"] = index
        phrases += index.pop("phrases")
    if not phrases:
        return None
    if not before.files or not after.files:
        severity = Severity.NOTICE
        head = f"{key} {'added' if not before.files else 'removed'}"
    else:
        severity = Severity.WARNING if structural else Severity.NOTICE
        head = key
    severity = Severity.INFO if phrases == ["index metadata changed"] else severity
    return Change(ChangeKind.WEIGHTS, key, f"{head}: " + ", ".join(phrases), severity, detail, structural)


def _parameters(old_pf: dict[str, int], new_pf: dict[str, int], had: bool, has: bool) -> dict[str, Any]:
    old_total = sum(old_pf.values()) if old_pf or not had else None
    new_total = sum(new_pf.values()) if new_pf or not has else None
    out: dict[str, Any] = {"old": old_total, "new": new_total}
    if old_total is not None and new_total is not None:
        out["delta"] = new_total - old_total
    out["per_file"] = {
        p: {"old": old_pf.get(p), "new": new_pf.get(p), "delta": new_pf.get(p, 0) - old_pf.get(p, 0)}
        for p in sorted(old_pf.keys() | new_pf.keys())
        if old_pf.get(p) != new_pf.get(p)
    }
    return out


def _index_changes(before: Checkpoint, after: Checkpoint) -> dict[str, Any] | None:
    """Shards re-cut (tensors moved between files) and index metadata changes."""
    if before.weight_map is None or after.weight_map is None:
        return None
    old_map, new_map = before.weight_map, after.weight_map
    moved = sum(1 for name, f in new_map.items() if name in old_map and old_map[name] != f)
    old_shards, new_shards = sorted(set(old_map.values())), sorted(set(new_map.values()))
    phrases = []
    if moved or old_shards != new_shards:
        phrases.append(f"shards re-cut ({len(old_shards)} -> {len(new_shards)} files, {moved:,} tensors moved)")
    meta_changed = before.index_meta != after.index_meta
    if not phrases and meta_changed and old_map == new_map:
        phrases.append("index metadata changed")
    if not phrases and not meta_changed:
        return None
    return {
        "old_shards": old_shards, "new_shards": new_shards, "moved": moved,
        "old_metadata": before.index_meta, "new_metadata": after.index_meta, "phrases": phrases,
    }


# --- tensors ------------------------------------------------------------------------------------------


def compare_tensors(old: dict[str, Signature], new: dict[str, Signature]) -> dict[str, Any]:
    """Tensors added, removed, renamed (same dtype and shape under a recognisable new name),
    re-shaped and re-typed; `counts` is empty when nothing differs."""
    removed = {n: s for n, s in old.items() if n not in new}
    added = {n: s for n, s in new.items() if n not in old}
    renamed = match_renames(removed, added)
    for before, after in renamed:
        removed.pop(before)
        added.pop(after)
    common = [n for n in new if n in old]
    shape = [{"name": n, "old": list(old[n][1]), "new": list(new[n][1])} for n in common if old[n][1] != new[n][1]]
    dtype = [{"name": n, "old": old[n][0], "new": new[n][0]} for n in common if old[n][0] != new[n][0]]
    counts = {k: v for k, v in (("added", len(added)), ("removed", len(removed)), ("renamed", len(renamed)),
                                ("shape_changed", len(shape)), ("dtype_changed", len(dtype))) if v}
    return {
        "old_count": len(old), "new_count": len(new), "counts": counts,
        "added": sorted(added)[:EXAMPLES], "removed": sorted(removed)[:EXAMPLES],
        "renamed": [{"old": a, "new": b} for a, b in renamed[:EXAMPLES]],
        "shape_changed": shape[:EXAMPLES], "dtype_changed": dtype[:EXAMPLES],
        "dtype_moves": {f"{a} -> {b}": n for (a, b), n in Counter((d["old"], d["new"]) for d in dtype).items()},
    }


def match_renames(removed: dict[str, Signature], added: dict[str, Signature]) -> list[tuple[str, str]]:
    """Pairs (old name, new name) for tensors that moved under a new name.

    First the prefix rewrite most pairs share (`transformer.h.` -> `model.layers.`) is found and applied
    wherever the signatures agree; then a leftover signature that occurs once on each side pairs up.
    """
    pairs: list[tuple[str, str]] = []
    rule = _prefix_rule(removed, added)
    if rule is not None:
        old_prefix, new_prefix = rule
        for name in sorted(removed):
            if name.startswith(old_prefix):
                target = new_prefix + name[len(old_prefix) :]
                if added.get(target) == removed[name]:
                    pairs.append((name, target))
    paired_old, paired_new = {a for a, _ in pairs}, {b for _, b in pairs}
    left_old = Counter(s for n, s in removed.items() if n not in paired_old)
    left_new = Counter(s for n, s in added.items() if n not in paired_new)
    for sig in (s for s, c in left_old.items() if c == 1 and left_new.get(s) == 1):
        before = next(n for n, s in removed.items() if s == sig and n not in paired_old)
        after = next(n for n, s in added.items() if s == sig and n not in paired_new)
        pairs.append((before, after))
    return pairs


def _prefix_rule(removed: dict[str, Signature], added: dict[str, Signature]) -> tuple[str, str] | None:
    """The (old prefix, new prefix) rewrite that explains most removed names, or None."""
    by_sig: dict[Signature, list[str]] = {}
    for name, sig in added.items():
        by_sig.setdefault(sig, []).append(name)
    votes: Counter[tuple[str, str]] = Counter()
    for name in sorted(removed)[:64]:
        candidates = by_sig.get(removed[name], [])
        best = max(candidates, key=lambda c: len(_common_suffix(name, c)), default=None)
        if best is None:
            continue
        suffix = _common_suffix(name, best)
        if suffix:
            votes[(name[: len(name) - len(suffix)], best[: len(best) - len(suffix)])] += 1
    if not votes:
        return None
    rule, count = votes.most_common(1)[0]
    return rule if count >= 2 or len(removed) == 1 else None


def _common_suffix(a: str, b: str) -> str:
    """The longest common suffix of a and b that starts at a name boundary (after a dot, or whole)."""
    i = 0
    while i < min(len(a), len(b)) and a[-1 - i] == b[-1 - i]:
        i += 1
    suffix = a[len(a) - i :]
    if i == len(a) or i == len(b):
        return suffix
    dot = suffix.find(".")
    return suffix[dot:] if dot >= 0 else ""


def _tensor_phrases(tensors: dict[str, Any]) -> list[str]:
    counts, phrases = tensors["counts"], []
    for key, label in (("added", "added"), ("removed", "removed")):
        if counts.get(key):
            names = tensors[key]
            phrases.append(f"{counts[key]:,} tensors {label}" + (f" ({names[0]})" if counts[key] == 1 else ""))
    if counts.get("renamed"):
        first = tensors["renamed"][0]
        phrases.append(f"{counts['renamed']:,} renamed ({first['old']} -> {first['new']}" +
                       (", ..." if counts["renamed"] > 1 else "") + ")")
    if counts.get("shape_changed"):
        first = tensors["shape_changed"][0]
        more = f", +{counts['shape_changed'] - 1} more" if counts["shape_changed"] > 1 else ""
        phrases.append(f"shape changed: {first['name']} {first['old']} -> {first['new']}{more}")
    if counts.get("dtype_changed"):
        moves = ", ".join(f"{n} {k}" for k, n in tensors["dtype_moves"].items())
        phrases.append(f"dtype changed: {moves}")
    return phrases
