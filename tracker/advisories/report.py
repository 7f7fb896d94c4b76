"""Reading what the advisories pipeline stored, for the CLI: one revision's report (a JSON-ready dict,
whose keys the `advisories` command and its `--json` output rely on) and the export of hubwatch's own
records as an OSV database directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from storage.advisories import AdvisoryStore
from storage.kinds import repo_purl
from storage.models import Revision
from tracker.advisories.export import export_records


def report(db: AdvisoryStore, repo_id: str, revision: Revision) -> dict[str, Any]:
    """Everything known about one stored revision: advice, OSV matches, own records, facts."""
    assert revision.id is not None
    facts_row = db.facts([revision.id]).get(revision.id)
    pending = next((p for p in db.pending() if p.revision_id == revision.id), None)
    return {
        "repo_id": repo_id,
        "sha": revision.sha,
        "committed_at": revision.committed_at.isoformat().replace("+00:00", "Z"),
        "checked_at": facts_row.checked_at.isoformat().replace("+00:00", "Z") if facts_row else None,
        "advice": facts_row.advice if facts_row else None,
        "osv_matches": [
            {"advisory": lk.advisory_key, "ids": lk.ids, "package": lk.package, "version": lk.version,
             "status": lk.status, "verdict": lk.verdict, "rule": lk.rule, "reason": lk.reason,
             "summary": lk.summary, "modified": lk.modified, "relevant": lk.relevant,
             "relevance": lk.relevance}
            for lk in db.links(revision.id)
        ],
        "own_advisories": [o.record for o in db.own(repo_id)],
        "facts": facts_row.facts if facts_row else None,
        "fact_changes": facts_row.fact_changes if facts_row else [],
        "pending": pending.reason if pending else None,
    }


def export(db: AdvisoryStore, directory: Path | str) -> list[Path]:
    """hubwatch's own records as an OSV database directory (see export.py)."""
    return export_records([with_purl(o.record) for o in db.own()], Path(directory))


def with_purl(record: dict[str, Any]) -> dict[str, Any]:
    """The record with the model revision's package URL (`database_specific.hubwatch.purl`,
    pkg:huggingface/<org>/<name>@<sha>) beside its repo id and commit."""
    ours = (record.get("database_specific") or {}).get("hubwatch") or {}
    if not ours.get("repo_id") or not ours.get("introduced_sha"):
        return record
    hubwatch = {**ours, "purl": repo_purl(str(ours["repo_id"]), str(ours["introduced_sha"]))}
    return {**record, "database_specific": {**record["database_specific"], "hubwatch": hubwatch}}
