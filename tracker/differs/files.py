"""Which files were added, removed or changed between two snapshots (used by every differ), and the
differ for the `files` kind: everything no other differ owns, by name only, except the model card's
front matter (license, gating, base model)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml  # PyYAML is importable here (huggingface_hub depends on it)

from tracker.revision.changes import Change, ChangeKind, Severity
from tracker.revision.classify import MODEL_CARD, kind_of
from tracker.revision.snapshot import FileEntry, Snapshot

ADDED, REMOVED, CHANGED = "added", "removed", "changed"
MAX_FILE_CHANGES = 50  # past this many files of one status in a revision, one Change sums them up
EXAMPLES = 20
LICENSE_KEYS = ("license", "license_name", "license_link")
BASE_MODEL_KEYS = ("base_model", "base_model_relation")


@dataclass(frozen=True)
class FileDelta:
    """One file that differs between two snapshots: `old`/`new` are None on the side that lacks it."""

    path: str
    status: str
    old: FileEntry | None
    new: FileEntry | None


def file_deltas(old: Snapshot, new: Snapshot, wanted: Callable[[str], bool]) -> list[FileDelta]:
    """Files passing `wanted` that were added, removed, or whose content id or size changed; by path."""
    out = []
    for path in sorted(old.files.keys() | new.files.keys()):
        if not wanted(path):
            continue
        before, after = old.files.get(path), new.files.get(path)
        if before is None:
            out.append(FileDelta(path, ADDED, None, after))
        elif after is None:
            out.append(FileDelta(path, REMOVED, before, None))
        elif before.content_id != after.content_id or _size(before) != _size(after):
            out.append(FileDelta(path, CHANGED, before, after))
    return out


def _size(entry: FileEntry) -> int:
    return entry.lfs_size if entry.lfs_size is not None else entry.size


def diff(old: Snapshot | None, new: Snapshot) -> list[Change]:
    """Files of the `files` kind added, removed or changed (info), and model-card metadata changes."""
    if old is None:
        return []
    deltas = file_deltas(old, new, lambda p: kind_of(p) is ChangeKind.FILES)
    changes: list[Change] = []
    for status in (ADDED, REMOVED, CHANGED):
        group = [d for d in deltas if d.status == status and d.path != MODEL_CARD]
        changes.extend(_name_changes(group, status))
    card = next((d for d in deltas if d.path == MODEL_CARD), None)
    if card is not None:
        changes.append(_model_card_change(old, new, card))
    return sorted(changes, key=lambda c: c.path)


def _name_changes(deltas: list[FileDelta], status: str) -> list[Change]:
    if len(deltas) <= MAX_FILE_CHANGES:
        return [_name_change(d) for d in deltas]
    paths = [d.path for d in deltas]
    summary = f"{len(paths):,} files {status} (" + ", ".join(paths[:3]) + ", ...)"
    detail = {"status": status, "count": len(paths), "paths": paths[:EXAMPLES]}
    return [Change(ChangeKind.FILES, paths[0], summary, Severity.INFO, detail)]


def _name_change(delta: FileDelta) -> Change:
    detail: dict[str, Any] = {"status": delta.status}
    for side, entry in (("old", delta.old), ("new", delta.new)):
        if entry is not None:
            detail[f"{side}_content_id"], detail[f"{side}_size"] = entry.content_id, _size(entry)
    return Change(ChangeKind.FILES, delta.path, f"{delta.path} {delta.status}", Severity.INFO, detail)


# --- the model card's front matter ---------------------------------------------------------------


# libyaml's safe loader builds the same values as PyYAML's pure-Python one, several times faster (a model card's
# front matter is read twice per revision: the card's differ and the advisory facts).
_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def front_matter(text: str | None) -> tuple[dict[str, Any], str | None]:
    """The YAML block between the leading `---` lines of a model card, and an error if it is malformed."""
    if not text:
        return {}, None
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, None
    try:
        end = next(i for i, line in enumerate(lines[1:], 1) if line.strip() in ("---", "..."))
    except StopIteration:
        return {}, "front matter has no closing ---"
    block = "\n".join(lines[1:end])
    try:
        data = yaml.load(block, Loader=_FAST_LOADER)  # a safe loader (libyaml's when built with it)
    except yaml.YAMLError:
        try:  # the pure-Python loader's own words for what is wrong (libyaml words it otherwise)
            data = yaml.safe_load(block)
        except yaml.YAMLError as err:
            return {}, f"front matter is not valid YAML: {str(err).splitlines()[0]}"
    return (data, None) if isinstance(data, dict) else ({}, None)


def _watched(key: str) -> str | None:
    if key in LICENSE_KEYS:
        return "license"
    if key == "gated" or key.startswith("extra_gated"):
        return "gating"
    if key in BASE_MODEL_KEYS:
        return "base_model"
    return None


def _model_card_change(old: Snapshot, new: Snapshot, delta: FileDelta) -> Change:
    old_text = old.text(delta.path) if delta.old else ""
    new_text = new.text(delta.path) if delta.new else ""
    if old_text is None or new_text is None:
        change = _name_change(delta)
        snap, entry = (old, delta.old) if old_text is None else (new, delta.new)
        reason = snap.unavailable.get(delta.path, "not downloaded")
        change.detail["front_matter"] = f"not compared: {reason}" if entry else "not compared"
        return change
    old_meta, old_err = front_matter(old_text)
    new_meta, new_err = front_matter(new_text)
    detail: dict[str, Any] = {"status": delta.status, "metadata": []}
    if new_err or old_err:
        detail["error"] = new_err or old_err
    for key in sorted(old_meta.keys() | new_meta.keys(), key=str):
        before, after = old_meta.get(key), new_meta.get(key)
        if before != after:
            detail["metadata"].append({"key": str(key), "old": _plain(before), "new": _plain(after),
                                       "topic": _watched(str(key))})
    summary, severity, security = card_summary(delta.path, delta.status, detail["metadata"])
    return Change(ChangeKind.FILES, delta.path, summary, severity, detail, False, security)


def card_summary(path: str, status: str, metadata: list[dict[str, Any]],
                 said_elsewhere: frozenset[str] = frozenset()) -> tuple[str, Severity, bool]:
    """(summary, severity, security) of a card change from its front matter's changed keys (`metadata`, as the
    change's detail holds them): the licence and gating keys a warning, the base model a notice. Topics in
    `said_elsewhere` are left out (a dataset's licence, which `dataset.licence_changed` says)."""
    phrases, severity, security = [], Severity.INFO, False
    for item in metadata:
        topic = item.get("topic")
        if topic is None or topic in said_elsewhere:
            continue
        phrases.append(_phrase(str(item["key"]), item.get("old"), item.get("new"), topic))
        if topic in ("license", "gating"):
            severity, security = Severity.WARNING, True
        else:
            severity = max(severity, Severity.NOTICE, key=lambda s: s.rank)
    head = f"{path} {status}"
    return head + (": " + ", ".join(_dedupe(phrases)) if phrases else ""), severity, security


def _phrase(key: str, before: Any, after: Any, topic: str) -> str:
    if topic == "gating" and key != "gated":
        return "gating terms changed"
    return f"{key} {_quote(before)} -> {_quote(after)}"


def _quote(value: Any) -> str:
    if value is None:
        return "(none)"
    text = json.dumps(_plain(value), ensure_ascii=False)
    return text if len(text) <= 48 else text[:47] + "…"


def _plain(value: Any) -> Any:
    """YAML values (dates, sets) made JSON-serialisable."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
