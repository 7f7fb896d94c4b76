"""Config files (config.json, generation_config.json, processor and sentence-transformers configs,
model_index.json, any subfolder config): one Change per file, keys diffed with `jsondiff`."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tracker.differs.files import FileDelta, file_deltas
from tracker.differs.jsondiff import (
    ADDED,
    MISSING,
    REMOVED,
    JsonChange,
    brief,
    describe_group,
    format_path,
    json_changes,
    value_at,
)
from tracker.revision.changes import Change, ChangeKind, Severity
from tracker.revision.classify import kind_of
from tracker.revision.snapshot import Snapshot

MAX_DETAIL_CHANGES = 200
MAX_SUMMARY_PARTS = 6

STRUCTURAL_KEYS = frozenset(
    {
        "architectures", "model_type", "torch_dtype", "dtype", "quantization_config", "quantization",
        "vocab_size", "hidden_size", "intermediate_size", "head_dim", "max_position_embeddings",
        "rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor", "rotary_dim",
        "tie_word_embeddings", "tie_encoder_decoder", "layer_types", "n_layer", "n_head", "n_embd",
        "n_inner", "n_positions", "n_ctx", "n_head_kv", "d_model", "d_ff", "d_kv", "num_layers",
        "num_heads", "encoder_ffn_dim", "decoder_ffn_dim", "type_vocab_size", "image_size",
        "patch_size", "num_channels", "projection_dim", "embed_dim", "mlp_ratio", "depths",
        "hidden_sizes", "num_mel_bins", "word_embedding_dimension", "first_k_dense_replace",
        "r", "target_modules", "modules_to_save", "peft_type",
        # what the KV cache holds per layer (estimator/kv_cache.py): serving figures move with them
        "sliding_window", "use_sliding_window", "sliding_window_pattern", "attention_chunk_size",
        "kv_lora_rank", "q_lora_rank",
    }
)
_STRUCTURAL_NAME = re.compile(
    r"^(num|n)_\w*(layers?|heads?|experts?)(_per_tok)?$|_(size|dim|dims|dimension|channels)$|_per_block$"
)
NOT_STRUCTURAL = frozenset(
    {
        "transformers_version", "_diffusers_version", "__version__", "_name_or_path", "_commit_hash",
        "use_cache", "id2label", "label2id", "max_length", "min_length", "max_new_tokens",
        "chunk_size_feed_forward", "sliding_window_size", "max_window_layers", "batch_size",
        "pad_to_multiple_of", "_attn_implementation", "attn_implementation",
    }
)
TOKEN_ID_KEYS = frozenset(
    {
        "eos_token_id", "bos_token_id", "pad_token_id", "decoder_start_token_id", "sep_token_id",
        "forced_eos_token_id", "forced_bos_token_id", "unk_token_id", "mask_token_id",
    }
)
VERSION_KEYS = frozenset({"transformers_version", "_diffusers_version", "__version__", "_commit_hash"})
# Files whose keys decide the model's shape; in WHOLLY_STRUCTURAL any non-version change does.
KEYED_STRUCTURAL_FILES = frozenset({"config.json", "adapter_config.json"})
WHOLLY_STRUCTURAL_FILES = frozenset({"modules.json", "model_index.json"})
REMOTE_CODE_KEYS = ("auto_map", "custom_pipelines")
IDENTITY_KEYS = ("architectures", "model_type")


def diff(old: Snapshot | None, new: Snapshot) -> list[Change]:
    """One Change per config file added, removed or changed between `old` and `new`."""
    if old is None:
        return []
    deltas = file_deltas(old, new, lambda p: kind_of(p) is ChangeKind.CONFIG)
    changes = (json_file_change(ChangeKind.CONFIG, old, new, d, _rate) for d in deltas)
    return [c for c in changes if c is not None]


# --- one JSON file: shared with the tokenizer differ --------------------------------------------


def read_docs(old: Snapshot, new: Snapshot, delta: FileDelta) -> tuple[Any, Any, dict[str, Any]]:
    """The two parsed documents ({} for a side without the file) and notes on what could not be read.

    A new side that cannot be read leaves both documents None; an old side that cannot be read is
    compared as {} (so everything in the new file counts as added, security keys included).
    """
    notes: dict[str, Any] = {}
    new_doc, new_err = new.read_json(delta.path) if delta.new else ({}, None)
    if new_err is not None:
        notes["error" if delta.path in new.contents else "unavailable"] = new_err
        return None, None, notes
    old_doc, old_err = old.read_json(delta.path) if delta.old else ({}, None)
    if old_err is not None:
        notes["old_error"] = old_err
        old_doc = {}
    return old_doc, new_doc, notes


@dataclass
class Rating:
    """What a file's key changes mean: a differ's `rate` function answers with one."""

    severity: Severity
    structural: bool = False
    security: bool = False
    phrases: list[str] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)


Rate = Callable[[str, list[JsonChange], Any, Any], Rating]


def json_file_change(
    kind: ChangeKind,
    old: Snapshot,
    new: Snapshot,
    delta: FileDelta,
    rate: Rate,
    prepare: Callable[[Any], Any] | None = None,
) -> Change | None:
    """The Change for one JSON file, or None when only what `prepare` drops (another differ's part) changed.

    `prepare` trims a parsed document before it is diffed; `rate(path, changes, old_doc, new_doc)` is
    given the changes that no security finding accounts for, and the untrimmed documents.
    """
    old_doc, new_doc, notes = read_docs(old, new, delta)
    if old_doc is None:
        return unreadable_change(kind, delta, notes)
    old_p, new_p = (prepare(old_doc), prepare(new_doc)) if prepare else (old_doc, new_doc)
    changes = json_changes(old_p, new_p)
    findings, covered = security_findings(changes, new_p)
    rating = rate(delta.path, [c for c in changes if id(c) not in covered], old_doc, new_doc)
    if prepare and delta.status == "changed" and not changes and not rating.phrases:
        return None
    severities = [rating.severity, *(Severity(f["severity"]) for f in findings)]
    if delta.status != "changed":
        severities.append(Severity.NOTICE)
    detail: dict[str, Any] = {"status": delta.status, **notes, **rating.detail}
    detail["changes"] = [c.to_dict() for c in changes[:MAX_DETAIL_CHANGES]]
    if len(changes) > MAX_DETAIL_CHANGES:
        detail["changes_total"] = len(changes)
    if findings:
        detail["security"] = findings
    summary = summary_line(delta, [f["phrase"] for f in findings] + rating.phrases, notes)
    severity = max(severities, key=lambda s: s.rank)
    return Change(kind, delta.path, summary, severity, detail, rating.structural, rating.security or bool(findings))


def unreadable_change(kind: ChangeKind, delta: FileDelta, notes: dict[str, Any]) -> Change:
    detail = {"status": delta.status, **notes, **content_ids(delta)}
    if "error" in notes:
        summary = f"{delta.path}: not valid JSON ({notes['error']})"
        return Change(kind, delta.path, summary[:200], Severity.WARNING, detail)
    summary = f"{delta.path} {delta.status}; content not compared ({notes['unavailable']})"
    return Change(kind, delta.path, summary[:200], Severity.NOTICE, detail)


def content_ids(delta: FileDelta) -> dict[str, Any]:
    return {
        "old_content_id": delta.old.content_id if delta.old else None,
        "new_content_id": delta.new.content_id if delta.new else None,
    }


def summary_line(delta: FileDelta, phrases: list[str], notes: dict[str, Any]) -> str:
    head = delta.path if delta.status == "changed" else f"{delta.path} {delta.status}"
    if "old_error" in notes:
        head += " (previous version unreadable)"
    if not phrases:
        return head if delta.status != "changed" else f"{head}: reformatted, no value changed"
    shown = phrases[:MAX_SUMMARY_PARTS]
    more = len(phrases) - len(shown)
    return f"{head}: " + ", ".join(shown) + (f", +{more} more" if more else "")


# --- what a change means ----------------------------------------------------------------------


def _names(change: JsonChange) -> list[str]:
    return [k for k in change.keys if isinstance(k, str)]


def is_version(change: JsonChange) -> bool:
    return any(k in VERSION_KEYS for k in _names(change))


def is_token_id(change: JsonChange) -> bool:
    return change.top in TOKEN_ID_KEYS


def is_structural(change: JsonChange) -> bool:
    """True when the change touches a key that shapes the model (or adds/removes a block holding one)."""
    names = _names(change)
    if any(n in NOT_STRUCTURAL or n in TOKEN_ID_KEYS for n in names):
        return False
    if any(_structural_name(n) for n in names):
        return True
    return any(_holds_structural(v) for v in (change.old, change.new))


def _structural_name(name: str) -> bool:
    return name in STRUCTURAL_KEYS or bool(_STRUCTURAL_NAME.search(name))


def _holds_structural(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    return any((_structural_name(k) and k not in NOT_STRUCTURAL) or _holds_structural(v) for k, v in value.items())


def _rate(path: str, changes: list[JsonChange], old_doc: Any, new_doc: Any) -> Rating:
    """Severity, structural flag and summary phrases for a config file's key changes."""
    base = posixpath.basename(path)
    if base in KEYED_STRUCTURAL_FILES:
        structural = any(is_structural(c) for c in changes)
    else:
        structural = base in WHOLLY_STRUCTURAL_FILES and any(not is_version(c) for c in changes)
    token_ids = any(is_token_id(c) for c in changes)
    if structural or token_ids:
        severity = Severity.WARNING
    elif changes and all(is_version(c) for c in changes):
        severity = Severity.INFO
    else:
        severity = Severity.NOTICE if changes else Severity.INFO
    return Rating(severity, structural, False, ordered_phrases(changes, old_doc, new_doc))


def ordered_phrases(
    changes: list[JsonChange], old_doc: Any, new_doc: Any, first: Callable[[JsonChange], bool] = is_token_id
) -> list[str]:
    """One phrase per top-level key: architecture first, then `first` (token ids), other structural
    keys, the rest, and versions last."""
    groups: dict[Any, list[JsonChange]] = {}
    for change in changes:
        groups.setdefault(change.top, []).append(change)

    def rank(top: Any) -> int:
        group = groups[top]
        if top in IDENTITY_KEYS:
            return 0
        if any(first(c) for c in group):
            return 1
        if any(is_structural(c) for c in group):
            return 2
        return 4 if all(is_version(c) for c in group) else 3

    tops = [t for t in groups if t is not None]
    phrases = [describe_group(t, groups[t], old_doc, new_doc) for t in sorted(tops, key=rank)]
    if None in groups:
        phrases.insert(0, "whole document replaced")
    return phrases


# --- security ---------------------------------------------------------------------------------


def security_findings(changes: list[JsonChange], new_doc: Any) -> tuple[list[dict[str, Any]], set[int]]:
    """Remote-code keys that changed, and the ids of the changes they account for.

    auto_map / custom_pipelines: any change is critical, naming the repos a `repo--module` value pulls
    code from; an attention implementation naming a hub repo: critical; trust_remote_code-like keys:
    critical when enabled, warning when disabled or removed.
    """
    findings: dict[str, dict[str, Any]] = {}
    covered: set[int] = set()
    for change in changes:
        for candidate in (change, *_nested(change)):
            for i in range(len(candidate.keys)):
                finding = _finding(candidate.keys[: i + 1], candidate, new_doc)
                if finding is not None:
                    findings.setdefault(finding["path"], finding)
                    covered.add(id(change))
                    break
    return list(findings.values()), covered


def _nested(change: JsonChange) -> list[JsonChange]:
    """For a block added or removed whole, one change per key inside it (to find code keys there)."""
    if change.change not in (ADDED, REMOVED):
        return []
    value = change.new if change.change == ADDED else change.old
    out = []
    for keys, inner in _walk(value, change.keys):
        before, after = (None, inner) if change.change == ADDED else (inner, None)
        out.append(JsonChange(keys, change.change, before, after))
    return out


def _walk(value: Any, prefix: tuple) -> list[tuple[tuple, Any]]:
    if not isinstance(value, dict):
        return []
    out = []
    for key, inner in value.items():
        out.append(((*prefix, key), inner))
        out.extend(_walk(inner, (*prefix, key)))
    return out


def _finding(keys: tuple, change: JsonChange, new_doc: Any) -> dict[str, Any] | None:
    key = keys[-1]
    if not isinstance(key, str):
        return None
    if key in REMOTE_CODE_KEYS:
        return _code_key_finding(keys, change, new_doc)
    if "trust_remote_code" in key:
        return _trust_finding(keys, change)
    if key.lstrip("_").startswith("attn_implementation"):
        return _attn_finding(keys, change)
    return None


def _code_key_finding(keys: tuple, change: JsonChange, new_doc: Any) -> dict[str, Any]:
    path = format_path(keys)
    value = value_at(new_doc, keys)
    if len(change.keys) == len(keys) and change.change in (ADDED, REMOVED):
        verb = change.change
    else:
        verb = "removed" if value is MISSING else "changed"
    repos = sorted(cross_repo_refs(None if value is MISSING else value))
    phrase = f"{path} {verb}" + (f": code from {', '.join(repos)}" if repos else "")
    return {"path": path, "issue": f"{keys[-1]} {verb}", "repos": repos,
            "severity": Severity.CRITICAL.value, "phrase": phrase}


def _trust_finding(keys: tuple, change: JsonChange) -> dict[str, Any]:
    path = format_path(keys)
    enabled = bool(change.new) and change.change != REMOVED
    severity = Severity.CRITICAL if enabled else Severity.WARNING
    phrase = f"{path} {'enabled' if enabled else 'disabled or removed'}"
    return {"path": path, "issue": "trust_remote_code", "repos": [],
            "severity": severity.value, "phrase": phrase}


def _attn_finding(keys: tuple, change: JsonChange) -> dict[str, Any] | None:
    new = change.new if isinstance(change.new, str) else ""
    if "/" not in new:
        return None  # a built-in implementation (sdpa, flash_attention_2): an ordinary setting
    path = format_path(keys)
    repo = new.split(":", 1)[0].split("@", 1)[0]
    phrase = f"{path} {brief(change.old)} -> {brief(new)}: kernel code from {repo}"
    return {"path": path, "issue": "attention kernel from another repo", "repos": [repo],
            "severity": Severity.CRITICAL.value, "phrase": phrase}


def cross_repo_refs(value: Any) -> set[str]:
    """Repos named by `org/repo--module.Class` strings anywhere inside `value`."""
    if isinstance(value, str):
        return {value.split("--", 1)[0]} if "--" in value else set()
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return set().union(*(cross_repo_refs(v) for v in value)) if value else set()
    return set()
