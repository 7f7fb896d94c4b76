"""Custom code: every `.py` added, removed or changed (a unified diff; always critical and
security-relevant), and requirements.txt (the requirement lines added, removed and re-pinned, as
tracker/revision/requirements.py reads them)."""

from __future__ import annotations

import difflib
import posixpath
import re
from typing import Any

from tracker.differs.files import ADDED, REMOVED, FileDelta, file_deltas
from tracker.revision.changes import Change, ChangeKind, Severity
from tracker.revision.classify import REQUIREMENTS_NAMES, kind_of
from tracker.revision.requirements import is_package_source, leading_name, requirement_lines
from tracker.revision.snapshot import Snapshot

MAX_DIFF_LINES = 400
MAX_DIFF_CHARS = 40_000
MAX_NOTABLE = 20
# Added lines that reach outside the process: worth a reviewer's first look.
NOTABLE = re.compile(
    r"\b(subprocess|os\.system|os\.popen|eval\(|exec\(|__import__|socket|urllib|requests\.|httpx|"
    r"base64|pickle|marshal|ctypes|importlib|trust_remote_code|hf_hub_download|snapshot_download)"
)
AUTO_MAP_FILES = ("config.json", "tokenizer_config.json")


def diff(old: Snapshot | None, new: Snapshot) -> list[Change]:
    """One Change per .py file and requirements file added, removed or changed."""
    if old is None:
        return []
    deltas = file_deltas(old, new, lambda p: kind_of(p) is ChangeKind.CUSTOM_CODE)
    loaded = auto_map_files(old) | auto_map_files(new)
    out = []
    for delta in deltas:
        if posixpath.basename(delta.path) in REQUIREMENTS_NAMES:
            out.append(_requirements_change(old, new, delta))
        else:
            out.append(_python_change(old, new, delta, delta.path in loaded))
    return out


def auto_map_files(snap: Snapshot) -> set[str]:
    """The .py files of this repo that an `auto_map` in config.json or tokenizer_config.json names."""
    files: set[str] = set()
    for name in AUTO_MAP_FILES:
        doc, _ = snap.read_json(name) if snap.has(name) else (None, None)
        auto_map = doc.get("auto_map") if isinstance(doc, dict) else None
        for ref in _strings(auto_map):
            if "--" not in ref and "." in ref:
                files.add(ref.rsplit(".", 1)[0].replace(".", "/") + ".py")
    return files


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


# --- python files --------------------------------------------------------------------------------


def _texts(old: Snapshot, new: Snapshot, delta: FileDelta) -> tuple[str | None, str | None, str | None]:
    """Old and new text ("" for a side without the file), or a reason why they cannot be compared."""
    old_text = old.text(delta.path) if delta.old else ""
    new_text = new.text(delta.path) if delta.new else ""
    for snap, text, entry in ((new, new_text, delta.new), (old, old_text, delta.old)):
        if text is None and entry is not None:
            return None, None, snap.unavailable.get(delta.path, "content not downloaded")
    return old_text, new_text, None


def _python_change(old: Snapshot, new: Snapshot, delta: FileDelta, loaded: bool) -> Change:
    old_text, new_text, reason = _texts(old, new, delta)
    detail: dict[str, Any] = {"status": delta.status, "loaded_by_auto_map": loaded}
    note = "; named by auto_map" if loaded else ""
    if reason is not None:
        detail["not_compared"] = reason
        detail["old_content_id"] = delta.old.content_id if delta.old else None
        detail["new_content_id"] = delta.new.content_id if delta.new else None
        summary = f"{delta.path} {delta.status} (content not compared: {reason}){note}"
        return Change(ChangeKind.CUSTOM_CODE, delta.path, summary, Severity.CRITICAL, detail, False, True)
    assert old_text is not None and new_text is not None
    detail.update(unified_diff(delta.path, old_text, new_text))
    if delta.status in (ADDED, REMOVED):
        counts = _lines(len((new_text if delta.status == ADDED else old_text).splitlines()))
    else:
        counts = f"+{detail['lines_added']:,} -{detail['lines_removed']:,} lines"
    if detail["notable"]:
        names = sorted({m for line in detail["notable"] for m in NOTABLE.findall(line)})
        note += "; adds " + ", ".join(n.rstrip("(.") for n in names[:5])
    summary = f"{delta.path} {delta.status} ({counts}){note}"
    return Change(ChangeKind.CUSTOM_CODE, delta.path, summary, Severity.CRITICAL, detail, False, True)


def _lines(n: int) -> str:
    return f"{n:,} line" + ("" if n == 1 else "s")


def unified_diff(path: str, old_text: str, new_text: str) -> dict[str, Any]:
    """A unified diff of two texts, cut to MAX_DIFF_LINES / MAX_DIFF_CHARS, with full line counts."""
    lines = list(
        difflib.unified_diff(old_text.splitlines(), new_text.splitlines(), f"a/{path}", f"b/{path}", lineterm="")
    )
    body = [line for line in lines[2:] if not line.startswith("@@")]
    added = [line[1:] for line in body if line.startswith("+")]
    removed = sum(1 for line in body if line.startswith("-"))
    text = "\n".join(lines[:MAX_DIFF_LINES])
    truncated = len(lines) > MAX_DIFF_LINES or len(text) > MAX_DIFF_CHARS
    return {
        "diff": text[:MAX_DIFF_CHARS],
        "truncated": truncated,
        "diff_lines": len(lines),
        "lines_added": len(added),
        "lines_removed": removed,
        "notable": [line.strip()[:200] for line in added if NOTABLE.search(line)][:MAX_NOTABLE],
    }


# --- requirements.txt ----------------------------------------------------------------------------


def _requirements_change(old: Snapshot, new: Snapshot, delta: FileDelta) -> Change:
    old_text, new_text, reason = _texts(old, new, delta)
    if reason is not None:
        summary = f"{delta.path} {delta.status} (content not compared: {reason})"
        detail = {"status": delta.status, "not_compared": reason}
        return Change(ChangeKind.CUSTOM_CODE, delta.path, summary, Severity.WARNING, detail, False, True)
    assert old_text is not None and new_text is not None
    detail = compare_requirements(requirement_lines(old_text), requirement_lines(new_text))
    detail["status"] = delta.status
    phrases = [f"{c['old']} -> {c['new']}" for c in detail["changed"]]
    phrases += [f"+{line}" for line in detail["added"]] + [f"-{line}" for line in detail["removed"]]
    head = f"{delta.path} {delta.status}" if delta.status != "changed" else delta.path
    if detail["new_sources"]:
        head += " (new package source)"
    shown = ", ".join(phrases[:6]) + (f", +{len(phrases) - 6} more" if len(phrases) > 6 else "")
    summary = f"{head}: {shown}" if phrases else f"{head}: reformatted, no requirement changed"
    return Change(ChangeKind.CUSTOM_CODE, delta.path, summary, Severity.WARNING, detail, False, True)


def compare_requirements(old_lines: list[str], new_lines: list[str]) -> dict[str, Any]:
    """Lines added and removed; a package whose line changed is reported once, as `changed`."""
    old_set, new_set = set(old_lines), set(new_lines)
    added = [line for line in new_lines if line not in old_set]
    removed = [line for line in old_lines if line not in new_set]
    removed_by_name = {leading_name(line): line for line in removed if leading_name(line)}
    changed = []
    for line in list(added):
        name = leading_name(line)
        if name is not None and name in removed_by_name:
            changed.append({"name": name, "old": removed_by_name[name], "new": line})
            added.remove(line)
            removed.remove(removed_by_name.pop(name))
    return {
        "added": added,
        "removed": removed,
        "changed": changed,
        "new_sources": [line for line in added if is_package_source(line)]
        + [c["new"] for c in changed if is_package_source(c["new"])],
    }
