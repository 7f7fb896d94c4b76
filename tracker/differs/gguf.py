"""GGUF files compared by what their headers say (tracker/formats/gguf.py): quantization and tensors, context
length and architecture, special tokens and vocabulary, the embedded chat templates (through the chat
template differ: rendered prompts before and after), and an embedded template that is not the repo's own.

A file is compared with the file of the same path in the parent revision, and the parts of a split
(`-00001-of-0000N.gguf`) as one model (gguf_splits.py); a model whose content did not change is not compared
again (its scan is the same row). The file-level change itself (added, changed, sizes) is the
weights differ's."""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from tracker.differs import chat_template
from tracker.differs.chat_sources import effective_templates
from tracker.differs.gguf_splits import merged_scan, splits
from tracker.differs.weights import compare_tensors
from tracker.formats import FileScan
from tracker.revision.changes import Change, ChangeKind, Severity
from tracker.revision.snapshot import FileEntry, Snapshot

# Special tokens whose change changes when generation stops (or starts): the ones a runtime acts on.
STOP_TOKENS = frozenset({"eos", "eot", "eom", "bos"})
_TEMPLATE_NAME = re.compile(r"[^A-Za-z0-9_.-]")


def diff(old: Snapshot | None, new: Snapshot) -> list[Change]:
    """Per GGUF model of `new` (a file, or a split's parts as one: gguf_splits.py): what changed in its header
    against the same model in `old`; [] for a first revision."""
    if old is None:
        return []
    out: list[Change] = []
    repo_changed = _repo_templates(old) != _repo_templates(new)
    before_models = _models(old)
    for path, (after, ids) in sorted(_models(new).items()):
        before, before_ids = before_models.get(path, (None, None))
        same = before_ids == ids
        if not same:
            if before is not None:
                out += compare(path, before, after)
            elif after.note:
                out.append(_unreadable(path, after))
        if not same or repo_changed:
            out += _mismatch(path, old, new, before, after)
    return out


def _models(snapshot: Snapshot) -> dict[str, tuple[FileScan, tuple[str, ...]]]:
    """{path or split name: (its scan, the content ids it is made of)} for the GGUF models of a snapshot."""
    out: dict[str, tuple[FileScan, tuple[str, ...]]] = {}
    grouped = splits(p for p in snapshot.scans if p in snapshot.files)
    in_splits = {p for model in grouped.values() for p in model.paths}
    for path, scan in snapshot.scans.items():
        if scan.format == "gguf" and path in snapshot.files and path not in in_splits:
            out[path] = (scan, (snapshot.files[path].content_id,))
    for name, model in grouped.items():
        merged = merged_scan(model, snapshot.scans)
        if merged is not None:
            out[name] = (merged, tuple(snapshot.files[p].content_id for p in model.paths))
    return out


def compare(path: str, before: FileScan, after: FileScan) -> list[Change]:
    """What changed between two scans of one GGUF path."""
    old, new = before.result, after.result
    out: list[Change] = []
    if after.note and after.note != before.note:
        out.append(_unreadable(path, after))
    if not old.get("tensors") and not old.get("architecture") or not new.get("tensors") and not new.get("architecture"):
        return out  # a side with nothing read: the note says why
    out += _model_changes(path, old, new)
    out += _tokenizer_changes(path, old, new)
    out += _template_changes(path, old, new)
    return out


def _unreadable(path: str, scan: FileScan) -> Change:
    return Change(ChangeKind.WEIGHTS, path, f"{path}: GGUF header not fully read ({scan.note})", Severity.WARNING,
                  {"format": "gguf", "note": scan.note, "bytes_read": scan.bytes_read}, security=True)


def _model_changes(path: str, old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    phrases, detail, severity, structural = [], {"format": "gguf"}, Severity.NOTICE, False
    for key, label in (("architecture", "architecture"), ("file_type", "quantization"), ("context_length", "context length"),
                       ("block_count", "blocks"), ("embedding_length", "embedding width"),
                       ("feed_forward_length", "feed-forward width"), ("head_count", "heads"), ("head_count_kv", "kv heads"),
                       ("rope", "rope")):
        if old.get(key) != new.get(key):
            detail[key] = {"old": old.get(key), "new": new.get(key)}
            phrases.append(f"{label} {_text(old.get(key))} -> {_text(new.get(key))}")
            if key != "file_type":
                severity, structural = Severity.WARNING, True
    tensors = compare_tensors(_signatures(old), _signatures(new))
    if tensors["counts"]:
        detail["tensors"] = tensors
        counts = tensors["counts"]
        for key in ("added", "removed", "renamed", "shape_changed"):
            if counts.get(key):
                phrases.append(f"{counts[key]:,} tensors {key.replace('_', ' ')}")
                severity, structural = Severity.WARNING, True
        if counts.get("dtype_changed"):
            moves = ", ".join(f"{n} {k}" for k, n in tensors["dtype_moves"].items())
            phrases.append(f"tensor types changed: {moves}")
    if old.get("parameters") != new.get("parameters"):
        detail["parameters"] = {"old": old.get("parameters"), "new": new.get("parameters")}
        phrases.append(f"parameters {_text(old.get('parameters'))} -> {_text(new.get('parameters'))}")
    if old.get("tensor_bytes") != new.get("tensor_bytes"):
        detail["tensor_bytes"] = {"old": old.get("tensor_bytes"), "new": new.get("tensor_bytes")}
    if not phrases:
        return []
    return [Change(ChangeKind.WEIGHTS, path, f"{path} (GGUF): " + ", ".join(phrases), severity, detail, structural)]


def _signatures(result: dict[str, Any]) -> dict[str, tuple[str, tuple[int, ...]]]:
    return {t["name"]: (t["type"], tuple(t["shape"])) for t in result.get("tensors") or []}


def _text(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _tokenizer_changes(path: str, old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    out = []
    a, b = old.get("tokenizer") or {}, new.get("tokenizer") or {}
    before, after = a.get("special_tokens") or {}, b.get("special_tokens") or {}
    for role in sorted(before.keys() | after.keys()):
        x, y = before.get(role), after.get(role)
        if x == y:
            continue
        stop = role in STOP_TOKENS
        summary = f"{path} (GGUF): {role.upper()} token {_token(x)} -> {_token(y)}"
        out.append(Change(ChangeKind.TOKENIZER, path, summary, Severity.WARNING if stop else Severity.NOTICE,
                          {"format": "gguf", "special_token": role, "old": x, "new": y}))
    phrases, detail = [], {"format": "gguf"}
    if a.get("vocab_sha256") != b.get("vocab_sha256"):
        phrases.append(f"vocabulary changed ({_text(a.get('tokens'))} -> {_text(b.get('tokens'))} tokens)")
        detail["vocabulary"] = {"old": a.get("vocab_sha256"), "new": b.get("vocab_sha256"),
                                "old_tokens": a.get("tokens"), "new_tokens": b.get("tokens")}
    if a.get("merges_sha256") != b.get("merges_sha256"):
        phrases.append(f"merges changed ({_text(a.get('merges'))} -> {_text(b.get('merges'))})")
        detail["merges"] = {"old": a.get("merges_sha256"), "new": b.get("merges_sha256")}
    for key in ("model", "pre"):
        if a.get(key) != b.get(key):
            phrases.append(f"tokenizer {key} {a.get(key)} -> {b.get(key)}")
            detail[key] = {"old": a.get(key), "new": b.get(key)}
    if a.get("flags") != b.get("flags"):
        detail["flags"] = {"old": a.get("flags"), "new": b.get("flags")}
        phrases.append("tokenizer flags changed")
    if phrases:
        out.append(Change(ChangeKind.TOKENIZER, path, f"{path} (GGUF): " + ", ".join(phrases), Severity.WARNING, detail))
    return out


def _token(value: dict[str, Any] | None) -> str:
    if value is None:
        return "none"
    return f"{value.get('token')!r} ({value.get('id')})" if value.get("token") is not None else f"id {value.get('id')}"


# --- the embedded chat templates, through the chat template differ ---------------------------------


def _template_changes(path: str, old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """The embedded templates as a repo of their own (chat_template.jinja, additional_chat_templates/), with
    the file's special tokens: the chat template differ renders the samples before and after."""
    if (old.get("chat_templates") or {}) == (new.get("chat_templates") or {}) and \
            _tokens(old) == _tokens(new):
        return []
    out = []
    for change in chat_template.diff(_template_snapshot(old), _template_snapshot(new)):
        detail = {**change.detail, "format": "gguf", "gguf": path}
        summary = change.summary.replace("chat_template (", "chat_template embedded in GGUF (", 1)
        out.append(Change(change.kind, path, f"{path}: {summary}", change.severity, detail, change.structural, change.security))
    return out


def _tokens(result: dict[str, Any]) -> dict[str, str]:
    """The special tokens as tokenizer_config.json would name them, for rendering."""
    special = (result.get("tokenizer") or {}).get("special_tokens") or {}
    return {f"{role}_token": value["token"] for role, value in special.items()
            if role in ("bos", "eos", "unk", "pad") and isinstance(value.get("token"), str)}


def _template_snapshot(result: dict[str, Any]) -> Snapshot:
    snapshot = Snapshot(repo_id="gguf", sha="embedded")
    files = {"tokenizer_config.json": json.dumps(_tokens(result)).encode()}
    for name, text in (result.get("chat_templates") or {}).items():
        where = "chat_template.jinja" if name == "default" else f"additional_chat_templates/{_TEMPLATE_NAME.sub('_', name)}.jinja"
        files[where] = text.encode("utf-8")
    for where, data in files.items():
        snapshot.files[where] = FileEntry(where, where, len(data))
        snapshot.contents[where] = data
    return snapshot


def _repo_templates(snapshot: Snapshot) -> dict[str, str]:
    return {name: source.text for name, source in effective_templates(snapshot).items()}


def _mismatch(path: str, old: Snapshot, new: Snapshot, before: FileScan | None, after: FileScan) -> list[Change]:
    """A finding when the GGUF's embedded default template is not the repo's own (compared without surrounding
    whitespace), unless the parent revision had the same two texts."""
    mine = (after.result.get("chat_templates") or {}).get("default")
    theirs = _repo_templates(new).get("default")
    if mine is None or theirs is None or mine.strip() == theirs.strip():
        return []
    if before is not None:
        was = ((before.result.get("chat_templates") or {}).get("default"), _repo_templates(old).get("default"))
        if was == (mine, theirs):
            return []  # the same mismatch as in the parent revision: said then
    diff = "".join(difflib.unified_diff(theirs.splitlines(keepends=True), mine.splitlines(keepends=True),
                                        "repo chat template", f"{path} (embedded)", n=1))
    summary = (f"{path}: the chat template embedded in this GGUF differs from the repo's own "
               f"(tokenizer_config.json/chat_template.jinja): runtimes that read the GGUF prompt differently")
    detail = {"format": "gguf", "gguf": path, "embedded_chars": len(mine), "repo_chars": len(theirs), "diff": diff[:20000]}
    return [Change(ChangeKind.CHAT_TEMPLATE, path, summary, Severity.WARNING, detail)]
