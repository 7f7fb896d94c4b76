"""What the CLI prints: JSON-ready dicts and plain text for watches, revisions, changes and polls."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from storage.models import ChangeRecord, Revision, RevisionFile, Watch
from tracker.changes import Change
from tracker.ingest import PollOutcome

_MARK = {"info": " ", "notice": "*", "warning": "!", "critical": "!!"}


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def watch_dict(w: Watch) -> dict[str, Any]:
    return {
        "repo_id": w.repo_id,
        "branch": w.branch,
        "interval_s": w.interval_s,
        "source": w.source,
        "last_sha": w.last_sha,
        "last_polled_at": _iso(w.last_polled_at),
        "last_ok_at": _iso(w.last_ok_at),
        "last_error": w.last_error,
        "error_count": w.error_count,
        "next_retry_at": _iso(w.next_retry_at),
    }


def change_dict(c: ChangeRecord | Change) -> dict[str, Any]:
    if isinstance(c, Change):
        return c.to_dict()
    return {
        "kind": c.kind,
        "path": c.path,
        "summary": c.summary,
        "severity": c.severity,
        "structural": c.structural,
        "security": c.security,
        "detail": c.detail,
    }


def revision_dict(r: Revision, changes: Sequence[ChangeRecord] = ()) -> dict[str, Any]:
    return {
        "repo_id": r.repo_id,
        "sha": r.sha,
        "parent_sha": r.parent_sha,
        "branch": r.branch,
        "committed_at": _iso(r.committed_at),
        "ingested_at": _iso(r.ingested_at),
        "title": r.title,
        "message": r.message,
        "authors": r.authors,
        "baseline": r.is_baseline,
        "file_count": r.file_count,
        "changes": [change_dict(c) for c in changes],
    }


def file_dict(f: RevisionFile) -> dict[str, Any]:
    return {
        "path": f.path,
        "kind": f.kind,
        "oid": f.oid,
        "size": f.size,
        "lfs_sha256": f.lfs_sha256,
        "held": f.held,
        "note": f.note,
    }


def outcome_dict(o: PollOutcome) -> dict[str, Any]:
    return {
        "repo_id": o.repo_id,
        "branch": o.branch,
        "status": o.status,
        "head_sha": o.head_sha,
        "error": o.error,
        "duration_ms": o.duration_ms,
        "revisions": [
            {
                "sha": r.sha,
                "title": r.title,
                "event": r.event_title,
                "baseline": r.is_baseline,
                "changes": [c.to_dict() for c in r.changes],
            }
            for r in o.revisions
        ],
    }


def change_lines(changes: Iterable[ChangeRecord | Change], indent: str = "    ") -> list[str]:
    lines = []
    for c in changes:
        d = change_dict(c)
        flags = "".join([" [structural]" if d["structural"] else "", " [security]" if d["security"] else ""])
        lines.append(f"{indent}{_MARK.get(d['severity'], ' '):<2} {d['severity']:<8} {d['summary']}{flags}")
    return lines


def revision_text(r: Revision, changes: Sequence[ChangeRecord]) -> list[str]:
    when = r.committed_at.strftime("%Y-%m-%d %H:%M")
    authors = ", ".join(r.authors) or "unknown"
    head = f"{r.sha[:12]}  {when}  {r.title or '(no title)'}  [{authors}]"
    if r.is_baseline:
        head += "  (baseline)"
    return [head, *change_lines(changes)]


def outcome_text(o: PollOutcome) -> list[str]:
    where = f"{o.repo_id}@{o.branch}"
    if o.failed:
        return [f"{where}: FAILED: {o.error}"]
    if not o.revisions:
        return [f"{where}: unchanged ({(o.head_sha or '')[:12]})"]
    lines = [f"{where}: {len(o.revisions)} new revision(s)"]
    for r in o.revisions:
        lines.append(f"  {r.sha[:12]}  {r.title}")
        lines.append(f"    -> {r.event_title}")
        lines.extend(change_lines(r.changes, indent="      "))
    return lines


def watch_text(w: Watch) -> str:
    state = f"at {w.last_sha[:12]}" if w.last_sha else "not polled yet"
    if w.last_error:
        state += f"; last error: {w.last_error}"
    return f"{w.repo_id}@{w.branch}  every {w.interval_s}s  ({w.source})  {state}"
