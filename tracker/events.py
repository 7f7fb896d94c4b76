"""Composing the Event of an ingested revision: a title a person can act on, a stable id."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from storage.store import NewEvent
from tracker.changes import Change, ChangeKind, Severity, max_severity

REVISION_INGESTED = "revision.ingested"
REPO_VISIBILITY_CHANGED = "repo.visibility_changed"

_NAMESPACE = uuid.UUID("6f1c2d3e-8b7a-4c5d-9e0f-1a2b3c4d5e6f")

_PHRASES = {
    ChangeKind.CONFIG: "config",
    ChangeKind.TOKENIZER: "tokenizer",
    ChangeKind.CHAT_TEMPLATE: "chat template",
    ChangeKind.WEIGHTS: "weights",
    ChangeKind.CUSTOM_CODE: "custom code",
    ChangeKind.FILES: "files",
    ChangeKind.ESTIMATE: "memory estimate",
}


def event_id(repo_id: str, sha: str | None, kind: str, extra: str = "") -> str:
    """Stable across re-runs: the same revision always yields the same event id."""
    return str(uuid.uuid5(_NAMESPACE, f"{repo_id}\n{sha or ''}\n{kind}\n{extra}"))


def _eos_touched(changes: Sequence[Change]) -> bool:
    return any("eos" in c.summary.lower() for c in changes if c.kind in (ChangeKind.CONFIG, ChangeKind.TOKENIZER))


def revision_title(repo_id: str, changes: Sequence[Change], is_baseline: bool, file_count: int) -> str:
    """e.g. "Llama-3.1-8B-Instruct: chat template and eos token changed (warning)"."""
    name = repo_id.split("/", 1)[-1]
    if is_baseline:
        return f"{name}: now watched, baseline of {file_count} files recorded"
    phrases: list[str] = []
    for kind in _PHRASES:
        if any(c.kind is kind for c in changes):
            phrases.append(_PHRASES[kind])
    if _eos_touched(changes):
        phrases.append("eos token")
    repo_facts = [c.summary for c in changes if c.kind is ChangeKind.REPO]
    if not phrases and not repo_facts:
        return f"{name}: new commit, nothing tracked changed (info)"
    parts = []
    if phrases:
        joined = phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1]
        parts.append(f"{joined} changed")
    if any(c.detail.get("rewrite") for c in changes if c.kind is ChangeKind.REPO):
        parts.append("history rewritten")
    severity = max_severity(list(changes))
    return f"{name}: {'; '.join(parts) or repo_facts[0]} ({severity.value})"


def revision_event(
    repo_id: str, sha: str, title_line: str, commit_title: str, changes: Sequence[Change], is_baseline: bool
) -> NewEvent:
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
        },
    )
