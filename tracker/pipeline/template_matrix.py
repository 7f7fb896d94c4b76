"""Per revision, the chat template in every runtime (`differs.template_engines`), stored and cached.

A matrix is a JSON document in the blob store; a `file_scan` row of format "template_matrix", keyed by
`template_engines.matrix_key` (the templates' text, bos/eos, the matrix version), names its blob. So a
revision whose templates did not change finds its matrix by key and nothing is rendered again; `show`
and `diff` find it the same way from the stored snapshot. A failure to build one is logged and leaves
the revision without a matrix: the rest of the revision is unaffected.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from storage.blobs import git_blob_oid
from storage.front import Storage
from storage.history import NewFileScan
from tracker.config import Settings
from tracker.differs import template_engines
from tracker.differs.render import DEFAULT_LIMITS, RenderLimits
from tracker.revision.changes import Change
from tracker.revision.snapshot import Snapshot

log = structlog.get_logger(__name__)

FORMAT = "template_matrix"
KEEP = 64  # matrices held in memory between revisions of a poll (a daemon's Ingestor lives long)


def render_limits(settings: Settings) -> RenderLimits:
    """The limits each chat template render runs under: `[poll] chat_template_timeout_s` of time, the rest hubwatch's."""
    return replace(DEFAULT_LIMITS, time_s=settings.poll.chat_template_timeout_s)


@dataclass
class MatrixStore:
    """Matrices by key: this poll's (written with the revision), then the stored ones, then rendered."""

    store: Storage
    limits: RenderLimits = DEFAULT_LIMITS  # each render's ([poll] chat_template_timeout_s sets the time)
    known: dict[str, dict[str, Any]] = field(default_factory=dict)
    renders: int = 0  # how many matrices were rendered (not found): the benchmarks count it

    def find(self, snapshot: Snapshot) -> tuple[str | None, dict[str, Any] | None]:
        """The key and stored matrix of a snapshot; (key, None) when none is stored, (None, None) without templates."""
        key = template_engines.matrix_key(snapshot)
        if key is None or key in self.known:
            return key, self.known.get(key) if key else None
        row = self.store.history.read_file_scans([key]).get(key)
        if row is not None and row.format == FORMAT and row.scanned_oid:
            data = self.store.history.read_blobs([row.scanned_oid]).get(row.scanned_oid)
            if data is not None:
                self.known[key] = json.loads(data)
                return key, self.known[key]
        return key, None

    def _held(self, key: str | None) -> bool:
        """Whether the matrix of `key` needs no writing: no template (None), held here, or stored."""
        if key is None or key in self.known:
            return True
        row = self.store.history.read_file_scans([key]).get(key)
        return row is not None and row.format == FORMAT and bool(row.scanned_oid)

    def get(self, snapshot: Snapshot) -> tuple[dict[str, Any] | None, list[NewFileScan], dict[str, bytes]]:
        """A snapshot's matrix, and the rows and blobs to write when it was rendered now."""
        key, found = self.find(snapshot)
        if key is None or found is not None:
            return found, [], {}
        try:
            built = template_engines.matrix(snapshot, limits=self.limits)
        except Exception:  # a matrix is extra: its failure never stops the revision
            log.exception("template_matrix_failed", repo_id=snapshot.repo_id, sha=snapshot.sha)
            return None, [], {}
        self.renders += 1
        if built is None:
            return None, [], {}
        if len(self.known) >= KEEP:
            self.known.clear()
        self.known[key] = built
        data = json.dumps(built, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        oid = git_blob_oid(data)
        scan = NewFileScan(key, FORMAT, {"engines": [e["engine"] for e in built["template_engines"]]}, len(data), scanned_oid=oid)
        return built, [scan], {oid: data}

    def changes(self, old: Snapshot | None, new: Snapshot) -> tuple[list[Change], list[NewFileScan], dict[str, bytes]]:
        """The engines a revision breaks or fixes, and what to store for it (and for its parent, if missing)."""
        key = template_engines.matrix_key(new)
        same = old is not None and template_engines.matrix_key(old) == key
        if same and self._held(key):
            return [], [], {}  # the parent's matrix is the new one's, stored already: not read back nor decoded
        after, scans, blobs = self.get(new)
        if old is None or same:
            return [], scans, blobs
        before, old_scans, old_blobs = self.get(old)
        return template_engines.compare(before, after), scans + old_scans, {**blobs, **old_blobs}


def json_fields(matrix: dict[str, Any] | None) -> dict[str, Any]:
    """`template_engines` and `template_samples` as `show`/`diff --json` give them ([] without a template)."""
    matrix = matrix or {}
    return {"template_engines": matrix.get("template_engines", []), "template_samples": matrix.get("template_samples", [])}
