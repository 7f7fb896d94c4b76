"""Composing the Events the tracker writes, each with a title a person can act on and a stable id: the
one of an ingested revision and its changes (advisories compose theirs in tracker/advisories/events.py)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from storage.event_log import NewEvent
from storage.kinds import REVISION_INGESTED, split_repo_key
from tracker.revision.changes import Change, ChangeKind, Severity, max_severity

# How much of each side of a changed prompt an event carries for chat messages.
PROMPT_SAMPLE_CHARS = 4000
_NAMESPACE = uuid.UUID("6f1c2d3e-8b7a-4c5d-9e0f-1a2b3c4d5e6f")

_PHRASES = {
    ChangeKind.CONFIG: "config",
    ChangeKind.TOKENIZER: "tokenizer",
    ChangeKind.CHAT_TEMPLATE: "chat template",
    ChangeKind.WEIGHTS: "weights",
    ChangeKind.CUSTOM_CODE: "custom code",
    ChangeKind.FILES: "files",
    ChangeKind.ESTIMATE: "memory estimate",
    ChangeKind.STOP_TOKENS: "stop tokens",
}
# A dataset change's phrase, by the first word of its event kind (`dataset.rows_removed`: rows).
_DATASET_PHRASES = {"rows": "rows", "columns": "columns", "config": "configs", "split": "splits", "licence": "licence",
                    "gating": "gate", "loading": "loading script", "script": "loading script",
                    "reuploaded": "data files (re-upload)", "card": "card counts", "file": "unreadable data files"}


def event_id(repo_id: str, sha: str | None, kind: str, extra: str = "") -> str:
    """Stable across re-runs: the same revision always yields the same event id."""
    return str(uuid.uuid5(_NAMESPACE, f"{repo_id}\n{sha or ''}\n{kind}\n{extra}"))


def _paths(change: Change) -> list[str]:
    return [str(item.get("path", "")) for item in change.detail.get("changes", []) if isinstance(item, dict)]


def _eos_touched(changes: Sequence[Change]) -> bool:
    return any(
        "eos" in c.summary.lower() or any("eos" in p for p in _paths(c))
        for c in changes
        if c.kind in (ChangeKind.CONFIG, ChangeKind.TOKENIZER)
    )


def _only_eos(changes: Sequence[Change], kind: ChangeKind) -> bool:
    """Every change of this kind touches only eos keys (their paths in the detail say so)."""
    of_kind = [c for c in changes if c.kind is kind]
    if not of_kind:
        return False
    for change in of_kind:
        paths = _paths(change)
        if not paths or not all("eos" in path for path in paths):
            return False
    return True


def _moved_only(changes: Sequence[Change], kind: ChangeKind) -> bool:
    of_kind = [c for c in changes if c.kind is kind]
    return bool(of_kind) and all(c.detail.get("change") == "moved" for c in of_kind)


def revision_title(repo_id: str, changes: Sequence[Change], is_baseline: bool, file_count: int) -> str:
    """e.g. "Llama-3.1-8B-Instruct: chat template and eos token changed (warning)"."""
    name = display_name(repo_id)
    if is_baseline:
        return f"{name}: now watched, baseline of {file_count} file{'s' if file_count != 1 else ''} recorded"
    phrases: list[str] = list(dict.fromkeys(
        _DATASET_PHRASES.get(str(c.detail.get("event", "")).removeprefix("dataset.").split("_")[0], "data")
        for c in changes if c.kind is ChangeKind.DATASET))
    parts: list[str] = []
    for kind, phrase in _PHRASES.items():
        if kind is ChangeKind.CHAT_TEMPLATE and _moved_only(changes, kind):
            parts.append("chat template moved, text unchanged")
        elif kind in (ChangeKind.CONFIG, ChangeKind.TOKENIZER) and _only_eos(changes, kind):
            continue  # said as "eos token" below
        elif any(c.kind is kind for c in changes):
            phrases.append(phrase)
    if _eos_touched(changes):
        phrases.append("eos token")
    if phrases:
        joined = phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1]
        parts.insert(0, f"{joined} changed")
    repo = [c for c in changes if c.kind is ChangeKind.REPO]
    if any(c.detail.get("rewrite") for c in repo):
        parts.append("history rewritten")
    parts.extend(c.summary for c in repo if not c.detail.get("rewrite"))
    if not parts:
        return f"{name}: new commit, nothing tracked changed (info)"
    return f"{name}: {'; '.join(parts)} ({max_severity(list(changes)).value})"


def revision_event(
    repo_id: str, sha: str, title_line: str, commit_title: str, changes: Sequence[Change], is_baseline: bool,
    dataset: dict[str, Any] | None = None,
) -> NewEvent:
    """The event of one ingested revision; `dataset`: a dataset revision's table (tracker/revision/dataset_table.py),
    carried as the payload's `dataset` for pages, feeds and webhooks."""
    severity = max_severity(list(changes)) if changes else Severity.INFO
    return NewEvent(
        event_id=event_id(repo_id, sha, REVISION_INGESTED),
        kind=REVISION_INGESTED,
        title=title_line,
        severity=severity.value,
        security=any(c.security for c in changes),
        payload={
            "commit_title": commit_title,
            "baseline": is_baseline,
            "kinds": sorted({c.kind.value for c in changes}),
            "summaries": [c.summary for c in changes],
            **({"prompt": prompt} if (prompt := _prompt_sample(changes)) else {}),
            **({"dataset": dataset} if dataset else {}),
        },
    )


def _prompt_sample(changes: Sequence[Change]) -> dict[str, str] | None:
    """The first sample conversation whose rendered prompt a chat-template change altered, both sides
    clipped: what chat messages show as a short prompt diff (they get the event, not the change)."""
    for change in changes:
        if change.kind is not ChangeKind.CHAT_TEMPLATE:
            continue
        for sample in change.detail.get("samples") or []:
            if not isinstance(sample, dict):  # an engine change names its samples by id: no prompt to show
                continue
            before, after = sample.get("before") or {}, sample.get("after") or {}
            if sample.get("differs") and "prompt" in before and "prompt" in after:
                return {
                    "template": change.path,
                    "conversation": str(sample.get("conversation", "")),
                    "before": str(before["prompt"])[:PROMPT_SAMPLE_CHARS],
                    "after": str(after["prompt"])[:PROMPT_SAMPLE_CHARS],
                }
    return None


def display_name(repo_id: str) -> str:
    """A repo's name as event titles show it: `Llama-3.1-8B` for a model, `super (dataset)` for a dataset."""
    repo_type, hub_id = split_repo_key(repo_id)
    return hub_id.split("/", 1)[-1] + (" (dataset)" if repo_type == "dataset" else "")


def change_event(repo_id: str, sha: str, kind: str, change: Change, extra: str = "") -> NewEvent:
    """An event that announces one change on its own (an estimate that moved, a repo made private):
    "Llama-3.1-8B: full fine-tune no longer fits L4 24GB (warning)". `extra` tells apart events of
    the same kind at the same sha."""
    name = display_name(repo_id)
    return NewEvent(
        event_id=event_id(repo_id, sha, kind, extra),
        kind=kind,
        title=f"{name}: {change.summary} ({change.severity.value})",
        severity=change.severity.value,
        payload={"kinds": [change.kind.value], "summaries": [change.summary], "detail": change.detail},
    )
