"""Tokenizer behaviours kept in the history, so a restart does not tokenize an unchanged tokenizer again.

A behaviour (`differs.tokenizer_behaviour`: the corpus's ids, round trips and special ids under one
tokenizer blob set) is a JSON document in the blob store; a `file_scan` row of format
"tokenizer_behaviour", keyed by `store_key` (the blob set, the corpus version and the worker's output
version, hashed), names its blob. The ingest loads the stored behaviours of a revision and its parent
into the differ's in-process cache before diffing, and writes the ones it computed with the revision.
A behaviour that could not be computed (a timeout, a malformed file) is not stored: it is retried.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from storage.blobs import git_blob_oid
from storage.errors import RevisionNotStored
from storage.front import Storage
from storage.history import NewFileScan
from tracker.corpus import load_corpus
from tracker.differs import tokenizer_behaviour
from tracker.differs.tokenizer_behaviour import CACHE, BehaviourCache, behaviour_key
from tracker.revision.snapshot import Snapshot

FORMAT = "tokenizer_behaviour"
SAVED_KEEP = 4096  # keys known to be stored, remembered between revisions (a daemon's Ingestor lives long)


def store_key(key: tuple[str, ...]) -> str:
    """The `file_scan` key of a behaviour: its blob set, the corpus and the worker's output version (sha256 hex)."""
    inputs = {"format": FORMAT, "version": tokenizer_behaviour.BEHAVIOUR_VERSION,
              "corpus": load_corpus()["version"], "blobs": list(key)}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


@dataclass
class BehaviourStore:
    """Stored behaviours in and out of the differ's cache (`tokenizer_behaviour.CACHE` unless given)."""

    store: Storage
    cache: BehaviourCache = CACHE
    saved: set[tuple[str, ...]] = field(default_factory=set)  # blob sets stored (or written with a revision)

    def load(self, *snapshots: Snapshot | None) -> int:
        """Put the stored behaviours of these snapshots into the cache; how many were found."""
        wanted = {key: store_key(key) for s in snapshots if s is not None and (key := behaviour_key(s)) is not None
                  and self.cache.get(key) is None}
        if not wanted:
            return 0
        rows = self.store.history.read_file_scans(wanted.values())
        oids = {key: row.scanned_oid for key, sk in wanted.items()
                if (row := rows.get(sk)) is not None and row.format == FORMAT and row.scanned_oid}
        blobs = self.store.history.read_blobs(oids.values())
        found = 0
        for key, oid in oids.items():
            behaviour = _parse(blobs.get(oid))
            if behaviour is not None:
                self.cache.put(key, behaviour)
                self._remember(key)
                found += 1
        return found

    def load_for_diff(self, old: Snapshot, new: Snapshot) -> int:
        """`load` for the differ's run from `old` to `new`: nothing when both hold the same tokenizer blobs (the
        differ runs nothing then: a config.json move does not read and decode the stored behaviour)."""
        if behaviour_key(old) == behaviour_key(new):
            return 0
        return self.load(old, new)

    def rows(self, *snapshots: Snapshot | None) -> tuple[list[NewFileScan], dict[str, bytes]]:
        """The rows and blobs to write for behaviours computed now (in the cache, not yet stored, no error)."""
        scans: list[NewFileScan] = []
        blobs: dict[str, bytes] = {}
        for snapshot in snapshots:
            key = behaviour_key(snapshot) if snapshot is not None else None
            if key is None or key in self.saved:
                continue
            behaviour = self.cache.get(key)
            if behaviour is None or "error" in behaviour:
                continue
            data = json.dumps(behaviour, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
            oid = git_blob_oid(data)
            result = {"file": behaviour.get("file"), "backend": behaviour.get("backend"),
                      "samples": len(behaviour.get("samples", {})), "digest": tokenizer_behaviour.digest(behaviour)}
            scans.append(NewFileScan(store_key(key), FORMAT, result, len(data), scanned_oid=oid))
            blobs[oid] = data
            self._remember(key)
        return scans, blobs

    def checked(self, old: Snapshot | None, new: Snapshot) -> dict[str, Any] | None:
        """`tokenizer_behaviour` for a revision whose stored changes carry none: "checked, unchanged" when its
        tokenizer blobs differ from its parent's and both stored behaviours give every sample the same ids;
        None when nothing was checked (same blobs, no tokenizer, or a behaviour not stored)."""
        if old is None:
            return None
        old_key, new_key = behaviour_key(old), behaviour_key(new)
        if old_key is None or new_key is None or old_key == new_key:
            return None
        self.load(old, new)
        before, after = self.cache.get(old_key), self.cache.get(new_key)
        if before is None or after is None or "error" in before or "error" in after:
            return None
        if tokenizer_behaviour.compare_behaviour(before, after) is not None:
            return None  # a difference is a change row of its own; this revision's row says it
        return tokenizer_behaviour.unchanged_value(before, after)

    def _remember(self, key: tuple[str, ...]) -> None:
        if len(self.saved) >= SAVED_KEEP:
            self.saved.clear()
        self.saved.add(key)


def _parse(data: bytes | None) -> dict[str, Any] | None:
    try:
        value = json.loads(data) if data is not None else None
    except ValueError:
        return None
    return value if isinstance(value, dict) and "samples" in value else None


def checked_revision(store: Storage, revision: Any, behaviours: BehaviourStore | None = None) -> dict[str, Any] | None:
    """`BehaviourStore.checked` for a stored revision against its stored parent (None without a parent)."""
    from tracker.revision.stored import load_snapshot  # snapshots are read only for revisions that touched a tokenizer

    if not revision.parent_sha:
        return None
    try:
        parent = store.history.find_revision(revision.repo_id, revision.parent_sha)
    except RevisionNotStored:
        return None
    behaviours = behaviours or BehaviourStore(store, BehaviourCache())
    return behaviours.checked(load_snapshot(store, parent), load_snapshot(store, revision))


def extras_reader(store: Storage) -> Any:
    """For the revision page: a stored revision -> its engine matrix as stored (never rendered for a page) and,
    when it changed a tokenizer, the "checked, unchanged" tokenizer value (feeds may not import the tracker)."""
    from tracker.pipeline.template_matrix import MatrixStore, json_fields
    from tracker.revision.stored import load_snapshot

    matrices = MatrixStore(store)

    def extras(revision: Any) -> dict[str, Any]:
        data = json_fields(matrices.find(load_snapshot(store, revision))[1])
        changes = store.history.changes_by_revision([revision.id])[revision.id]
        if any(c.kind == "tokenizer" for c in changes):  # its parent's snapshot is read only then
            data["tokenizer_behaviour"] = checked_revision(store, revision)
        return data

    return extras
