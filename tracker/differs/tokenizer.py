"""Tokenizer files: the small JSON files diffed key by key (tokenizer_config.json without its chat
template, special_tokens_map.json, added_tokens.json), tokenizer.json summarised (vocab, merges, added
and special tokens, pipeline components), and opaque files (vocab.txt, tokenizer.model) by content id."""

from __future__ import annotations

import posixpath
from itertools import filterfalse
from typing import Any

from tracker.differs.config import (
    Rating,
    content_ids,
    json_file_change,
    ordered_phrases,
    unreadable_change,
)
from tracker.differs.files import ADDED, FileDelta, file_deltas
from tracker.differs.jsondiff import EXAMPLES, JsonChange, brief, describe_change, json_changes
from tracker.revision.changes import Change, ChangeKind, Severity
from tracker.revision.classify import kind_of
from tracker.revision.snapshot import Snapshot

TOKENIZER_JSON = "tokenizer.json"
SMALL_JSON = frozenset({"tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"})
OWNED_ELSEWHERE = ("chat_template",)  # the chat_template differ reports it
SPECIAL_LISTS = frozenset({"additional_special_tokens", "extra_special_tokens", "added_tokens_decoder"})
BEHAVIOUR_KEYS = frozenset({"add_bos_token", "add_eos_token", "add_prefix_space", "tokenizer_class", "legacy",
                            "do_lower_case", "strip_accents", "split_special_tokens"})
PIPELINE = ("normalizer", "pre_tokenizer", "post_processor", "decoder", "model")
QUIET_PARTS = frozenset({"truncation", "padding"})
TOKEN_FIELDS = ("content", "special", "normalized", "lstrip", "rstrip", "single_word")


def diff(old: Snapshot | None, new: Snapshot) -> list[Change]:
    """One Change per tokenizer file added, removed or changed (chat template changes excluded)."""
    if old is None:
        return []
    out = []
    for delta in file_deltas(old, new, lambda p: kind_of(p) is ChangeKind.TOKENIZER):
        base = posixpath.basename(delta.path)
        if base == TOKENIZER_JSON:
            out.append(_tokenizer_json_change(old, new, delta))
        elif base in SMALL_JSON:
            change = json_file_change(ChangeKind.TOKENIZER, old, new, delta, _rate_small, _prepare)
            if change is not None:
                out.append(change)
        else:
            out.append(_opaque_change(delta))
    return out


def _opaque_change(delta: FileDelta) -> Change:
    detail = {"status": delta.status, "compared": "content id", **content_ids(delta)}
    summary = f"{delta.path} {delta.status}" + (" (compared by content id only)" if delta.status == "changed" else "")
    return Change(ChangeKind.TOKENIZER, delta.path, summary, Severity.NOTICE, detail)


# --- tokenizer_config.json, special_tokens_map.json, added_tokens.json ---------------------------


def _prepare(doc: Any) -> Any:
    if not isinstance(doc, dict):
        return doc
    drop = {*OWNED_ELSEWHERE, "added_tokens_decoder"}
    return {k: v for k, v in doc.items() if k not in drop}


def _is_special_key(change: JsonChange) -> bool:
    top = change.top
    return isinstance(top, str) and (top.endswith("_token") or top in SPECIAL_LISTS)


def _rate_small(path: str, changes: list[JsonChange], old_doc: Any, new_doc: Any) -> Rating:
    """Special tokens, added tokens and tokenization switches: warning (tokens also security)."""
    base = posixpath.basename(path)
    tokens = None
    if base == "added_tokens.json":
        tokens = compare_added_tokens(_tokens_of_map(old_doc), _tokens_of_map(new_doc))
        changes = []
    elif base == "tokenizer_config.json":
        tokens = compare_added_tokens(_tokens_of_decoder(old_doc), _tokens_of_decoder(new_doc))
    special = tokens is not None or any(_is_special_key(c) for c in changes)
    special = special or (base == "special_tokens_map.json" and bool(changes))
    behaviour = any(c.top in BEHAVIOUR_KEYS for c in changes)
    phrases = token_phrases(tokens) if tokens else []
    phrases += ordered_phrases(changes, old_doc, new_doc, first=_is_special_key)
    if special or behaviour:
        severity = Severity.WARNING
    else:
        severity = Severity.NOTICE if changes else Severity.INFO
    detail = {"added_tokens": tokens} if tokens else {}
    return Rating(severity, False, special, phrases, detail)


def _tokens_of_map(doc: Any) -> list[dict[str, Any]]:
    if not isinstance(doc, dict):
        return []
    return [{"id": i, "content": t} for t, i in doc.items() if isinstance(i, int)]


def _tokens_of_decoder(doc: Any) -> list[dict[str, Any]]:
    decoder = doc.get("added_tokens_decoder") if isinstance(doc, dict) else None
    if not isinstance(decoder, dict):
        return []
    return [{**t, "id": int(i)} for i, t in decoder.items() if str(i).isdigit() and isinstance(t, dict)]


# --- added tokens (tokenizer.json added_tokens, added_tokens_decoder, added_tokens.json) ----------


def compare_added_tokens(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Added tokens matched by id: added, removed, and changed (content renamed or flags flipped)."""
    old_by_id = {t.get("id"): t for t in old if isinstance(t, dict)}
    new_by_id = {t.get("id"): t for t in new if isinstance(t, dict)}
    added = [_token(new_by_id[i]) for i in _sorted_ids(new_by_id.keys() - old_by_id.keys())]
    removed = [_token(old_by_id[i]) for i in _sorted_ids(old_by_id.keys() - new_by_id.keys())]
    changed = []
    for i in _sorted_ids(old_by_id.keys() & new_by_id.keys()):
        before, after = old_by_id[i], new_by_id[i]
        fields = [f for f in TOKEN_FIELDS if before.get(f) != after.get(f)]
        if fields:
            changed.append(
                {"id": i, "old": {f: before.get(f) for f in fields}, "new": {f: after.get(f) for f in fields}}
            )
    if not (added or removed or changed):
        return None
    return {"added": added, "removed": removed, "changed": changed,
            "counts": {"added": len(added), "removed": len(removed), "changed": len(changed)}}


def _sorted_ids(ids: Any) -> list[Any]:
    return sorted(ids, key=lambda i: (not isinstance(i, int), i if isinstance(i, int) else str(i)))


def _token(t: dict[str, Any]) -> dict[str, Any]:
    return {"id": t.get("id"), "content": t.get("content"), "special": t.get("special")}


def token_phrases(tokens: dict[str, Any]) -> list[str]:
    """`added tokens: 128004 "<|reserved_special_token_2|>" -> "<|finetune_right_pad_id|>", +2 more changed`."""
    parts = []
    for c in tokens["changed"][:2]:
        fields = ", ".join(f"{f} {brief(c['old'][f], 40)} -> {brief(c['new'][f], 40)}" for f in c["old"])
        parts.append(f"{c['id']} {fields}" if "content" not in c["old"] else
                     f"{c['id']} {brief(c['old']['content'], 40)} -> {brief(c['new']['content'], 40)}")
    if len(tokens["changed"]) > 2:
        parts.append(f"+{len(tokens['changed']) - 2} more changed")
    for label, items in (("added", tokens["added"]), ("removed", tokens["removed"])):
        if items:
            shown = ", ".join(f"{brief(t['content'], 30)} ({t['id']})" for t in items[:2])
            parts.append(f"{len(items)} {label}: {shown}" + (", ..." if len(items) > 2 else ""))
    return ["added tokens: " + "; ".join(parts)]


# --- tokenizer.json -------------------------------------------------------------------------------


def _tokenizer_json_change(old: Snapshot, new: Snapshot, delta: FileDelta) -> Change:
    old_doc, old_err = old.read_json(delta.path) if delta.old else ({}, None)
    new_doc, new_err = new.read_json(delta.path) if delta.new else ({}, None)
    if new_err is not None and delta.path in new.contents:
        return unreadable_change(ChangeKind.TOKENIZER, delta, {"error": new_err})
    if new_err is not None or old_err is not None:
        return _by_content_id(delta, new_err or old_err or "", "new" if new_err else "old")
    if delta.status != "changed":
        return _presence_change(delta, new_doc if delta.status == ADDED else old_doc)
    detail = summarise_tokenizer(old_doc, new_doc)
    return _tokenizer_change(delta, detail)


def _by_content_id(delta: FileDelta, reason: str, side: str) -> Change:
    detail = {"status": delta.status, "compared": "content id", "not_compared": reason, "side": side,
              **content_ids(delta)}
    summary = f"{delta.path} {delta.status}; not compared ({side} version: {reason})"
    return Change(ChangeKind.TOKENIZER, delta.path, summary[:240], Severity.WARNING, detail)


def _presence_change(delta: FileDelta, doc: Any) -> Change:
    vocab = _vocab(doc.get("model") if isinstance(doc, dict) else None)
    tokens = doc.get("added_tokens") if isinstance(doc, dict) else None
    detail = {"status": delta.status, "vocab_size": len(vocab), "added_tokens": len(tokens or [])}
    severity = Severity.NOTICE if delta.status == ADDED else Severity.WARNING
    summary = f"{delta.path} {delta.status} ({len(vocab):,} vocab entries, {len(tokens or [])} added tokens)"
    return Change(ChangeKind.TOKENIZER, delta.path, summary, severity, detail)


def summarise_tokenizer(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """What differs between two parsed tokenizer.json files, without walking the vocab with deepdiff."""
    old_model, new_model = _dict(old.get("model")), _dict(new.get("model"))
    out: dict[str, Any] = {}
    if old_model.get("type") != new_model.get("type"):
        out["model_type"] = {"old": old_model.get("type"), "new": new_model.get("type")}
    if (vocab := compare_vocab(_vocab(old_model), _vocab(new_model))) is not None:
        out["vocab"] = vocab
    if (merges := compare_merges(old_model.get("merges") or [], new_model.get("merges") or [])) is not None:
        out["merges"] = merges
    if (tokens := compare_added_tokens(old.get("added_tokens") or [], new.get("added_tokens") or [])) is not None:
        out["added_tokens"] = tokens
    if (special := _special_tokens(old, new)) is not None:
        out["special_tokens"] = special
    pipeline = json_changes(_pipeline(old), _pipeline(new))
    if pipeline:
        out["pipeline"] = [c.to_dict() for c in pipeline]
        out["_pipeline"] = pipeline
    return out


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _pipeline(doc: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in doc.items() if k not in ("added_tokens", "model")}
    out["model"] = {k: v for k, v in _dict(doc.get("model")).items() if k not in ("vocab", "merges", "type")}
    return out


def _vocab(model: Any) -> dict[str, int]:
    """token -> id: BPE / WordPiece / WordLevel keep a dict; Unigram a list of [piece, score]."""
    vocab = _dict(model).get("vocab")
    if isinstance(vocab, dict):
        return vocab
    if isinstance(vocab, list):
        return {p[0]: i for i, p in enumerate(vocab) if isinstance(p, list) and p}
    return {}


def compare_vocab(old: dict[str, int], new: dict[str, int]) -> dict[str, Any] | None:
    """Counts and examples (by id) of tokens added, removed and re-numbered."""
    if old == new:
        return None
    added = sorted((t for t in new if t not in old), key=new.__getitem__)
    removed = sorted((t for t in old if t not in new), key=old.__getitem__)
    renumbered = sorted((t for t in new if t in old and old[t] != new[t]), key=new.__getitem__)
    return {
        "old_size": len(old), "new_size": len(new),
        "added": len(added), "removed": len(removed), "renumbered": len(renumbered),
        "examples": {
            "added": [{"token": t, "id": new[t]} for t in added[:EXAMPLES]],
            "removed": [{"token": t, "id": old[t]} for t in removed[:EXAMPLES]],
            "renumbered": [{"token": t, "old_id": old[t], "new_id": new[t]} for t in renumbered[:EXAMPLES]],
        },
    }


def _merge_keys(merges: list[Any]) -> tuple[list[Any], set[Any]]:
    """Merges as "a b" strings (whichever notation the file uses), and their set."""
    try:
        return merges, set(merges)  # all "a b" strings: no copy
    except TypeError:
        keys = [m if isinstance(m, str) else " ".join(map(str, m)) for m in merges]
        return keys, set(keys)


def compare_merges(old: list[Any], new: list[Any]) -> dict[str, Any] | None:
    """Merges added and removed (counts, a few examples) and whether the kept ones changed priority."""
    if old == new:
        return None
    (old_m, old_set), (new_m, new_set) = _merge_keys(old), _merge_keys(new)
    added = list(filterfalse(old_set.__contains__, new_m))
    removed = list(filterfalse(new_set.__contains__, old_m))
    if added or removed:
        reordered = list(filter(new_set.__contains__, old_m)) != list(filter(old_set.__contains__, new_m))
    else:
        reordered = old_m != new_m
    if not added and not removed and not reordered:
        return None  # only the notation changed ("a b" strings <-> ["a", "b"] pairs)
    return {
        "old_count": len(old_m), "new_count": len(new_m), "added": len(added), "removed": len(removed),
        "reordered": reordered,
        "examples": {"added": added[:EXAMPLES], "removed": removed[:EXAMPLES]},
    }


def _special_tokens(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    def special(doc: dict[str, Any]) -> set[str]:
        tokens = doc.get("added_tokens") or []
        return {t.get("content") for t in tokens if isinstance(t, dict) and t.get("special")}

    before, after = special(old), special(new)
    if before == after:
        return None
    return {"added": sorted(after - before)[:EXAMPLES], "removed": sorted(before - after)[:EXAMPLES],
            "old_count": len(before), "new_count": len(after)}


def _tokenizer_change(delta: FileDelta, detail: dict[str, Any]) -> Change:
    pipeline: list[JsonChange] = detail.pop("_pipeline", [])
    phrases: list[str] = []
    severity, security = Severity.INFO, False
    if "added_tokens" in detail:
        phrases += token_phrases(detail["added_tokens"])
    if "special_tokens" in detail and "added_tokens" not in detail:
        phrases.append(f"special tokens: {len(detail['special_tokens']['added'])} added, "
                       f"{len(detail['special_tokens']['removed'])} removed")
    if "model_type" in detail:
        phrases.append(f"model type {brief(detail['model_type']['old'])} -> {brief(detail['model_type']['new'])}")
    if "vocab" in detail:
        phrases.append("vocab: " + _counts(detail["vocab"], ("added", "removed", "renumbered")))
    if "merges" in detail:
        phrases.append("merges: " + _counts(detail["merges"], ("added", "removed", "reordered")))
    phrases += _pipeline_phrases(pipeline)
    substantive = any(k in detail for k in ("model_type", "vocab", "merges"))
    substantive = substantive or any(c.top not in QUIET_PARTS and c.top != "version" for c in pipeline)
    if "added_tokens" in detail or "special_tokens" in detail:
        severity, security = Severity.WARNING, True
    elif substantive:
        severity = Severity.WARNING
    elif any(c.top in QUIET_PARTS for c in pipeline):
        severity = Severity.NOTICE
    detail["status"] = delta.status
    line = f"{delta.path}: " + ", ".join(phrases) if phrases else f"{delta.path}: reformatted, no value changed"
    return Change(ChangeKind.TOKENIZER, delta.path, line, severity, detail, False, security)


def _counts(part: dict[str, Any], keys: tuple[str, ...]) -> str:
    shown = []
    for key in keys:
        if part.get(key) is True:
            shown.append(key)
        elif part.get(key):
            shown.append(f"{part[key]:,} {key}")
    return ", ".join(shown) or "changed"


def _pipeline_phrases(changes: list[JsonChange]) -> list[str]:
    """`normalizer changed`, `model.byte_fallback false -> true`, ... one per component."""
    groups: dict[Any, list[JsonChange]] = {}
    for change in changes:
        groups.setdefault(change.top, []).append(change)
    phrases = []
    for top, group in groups.items():
        if len(group) == 1 and len(group[0].keys) <= 2:
            phrases.append(describe_change(group[0]))
        else:
            phrases.append(f"{top} changed")
    return phrases
