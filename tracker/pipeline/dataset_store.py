"""Dataset summaries kept in the history: each ingested dataset revision's summary (tracker/revision/
dataset_summary.py), so the next revision is compared with what was read then (the gate, the viewer's
conversion) without reading anything again.

A summary is a JSON document in the blob store (an unchanged dataset's summaries are one blob); a `file_scan`
row of format "dataset_summary", keyed by `summary_key` (the repo's key and the commit, hashed), names it: the
shape tokenizer behaviours are kept in (behaviour_store.py), so no table of its own.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from storage.blobs import git_blob_oid
from storage.front import Storage
from storage.history import NewFileScan

FORMAT = "dataset_summary"
VERSION = 1  # bump when the summary's shape changes: older summaries are then read again from their snapshots


def summary_key(repo_key: str, sha: str) -> str:
    """The `file_scan` key of a revision's summary (sha256 hex)."""
    inputs = {"format": FORMAT, "version": VERSION, "repo": repo_key, "sha": sha}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def summary_rows(repo_key: str, sha: str, summary: dict[str, Any]) -> tuple[NewFileScan, dict[str, bytes]]:
    """The row and blob to write with the revision."""
    data = json.dumps(summary, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    oid = git_blob_oid(data)
    result = {"configs": sorted(summary.get("configs") or {}), "files": len(summary.get("shards") or {})}
    return NewFileScan(summary_key(repo_key, sha), FORMAT, result, len(data), scanned_oid=oid), {oid: data}


def load_summary(store: Storage, repo_key: str, sha: str | None) -> dict[str, Any] | None:
    """The stored summary of a revision; None when it has none (not a dataset, ingested before summaries)."""
    if sha is None:
        return None
    row = store.history.read_file_scans([summary_key(repo_key, sha)]).get(summary_key(repo_key, sha))
    if row is None or row.format != FORMAT or not row.scanned_oid:
        return None
    data = store.history.read_blobs([row.scanned_oid]).get(row.scanned_oid)
    try:
        value = json.loads(data) if data is not None else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
