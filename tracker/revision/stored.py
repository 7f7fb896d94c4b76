"""A stored revision read back as a Snapshot, entirely from the database: its files, the contents held, the
weight manifests and the scans (pickle verdicts as stored, or as today's rules judge them). A new commit's
snapshot is built from the Hub by tracker/pipeline/snapshot_io.py."""

from __future__ import annotations

import posixpath
from collections.abc import Callable

from storage.front import Storage
from storage.history import NewTensor, NewWeightFile
from storage.kinds import repo_type_of
from storage.models import Revision
from tracker.formats import FileScan
from tracker.formats.manifest import TensorInfo, WeightManifest
from tracker.formats.pickle_rules import Rules, rejudge
from tracker.formats.registry import scanner_for
from tracker.formats.torch_manifest import to_weight_manifest
from tracker.revision.classify import TRAINING_STATE, is_safetensors
from tracker.revision.snapshot import FileEntry, Snapshot

DEFER_BYTES = 64 * 1024  # a stored file larger than this is read from the database when first asked for


def pickle_manifest(scan: FileScan, path: str = "") -> WeightManifest | None:
    """The tensor manifest a torch checkpoint's pickle scan derived, as safetensors headers give one (None
    for other scans, pickles holding no tensors, and training state such as optimizer.pt: not the model)."""
    if posixpath.basename(path).startswith(TRAINING_STATE):
        return None
    tensors = scan.result.get("tensors") if scan.format == "pickle" else None
    return to_weight_manifest(tensors) if tensors else None


def current(scan: FileScan, rules: Rules | None) -> FileScan:
    """A stored pickle scan judged by `rules` (from its stored imports, no bytes needed) when it was judged
    by other rules; other scans as they are. The stored row is re-judged and announced by rejudging.py."""
    if rules is None or scan.format != "pickle" or scan.rules_version == rules.version or "imports" not in scan.result:
        return scan
    return FileScan(scan.format, rejudge(scan.result, rules), scan.bytes_read, scan.note, rules.version,
                    scan.scanned_oid)


def load_scans(store: Storage, content_ids: set[str], rules: Rules | None = None) -> dict[str, FileScan]:
    """The stored scans of these contents, as FileScans: as stored, or pickle verdicts as `rules` judge them."""
    return {
        cid: current(FileScan(row.format, dict(row.result or {}), row.bytes_read, row.note, row.rules_version,
                              row.scanned_oid), rules)
        for cid, row in store.history.read_file_scans(content_ids).items()
    }


def to_new_weight_file(content_id: str, manifest: WeightManifest) -> NewWeightFile:
    return NewWeightFile(
        sha256=content_id,
        tensors=tuple(NewTensor(t.name, t.dtype, t.shape, t.parameters) for t in manifest.tensors),
        metadata=manifest.metadata or None,
        error=manifest.error,
    )


def load_manifests(store: Storage, content_ids: set[str]) -> dict[str, WeightManifest]:
    return {
        sha: WeightManifest(tensors=tuple(TensorInfo(name, dtype, shape) for name, dtype, shape in row.tensors),
                            metadata=dict(row.metadata or {}), error=row.error)
        for sha, row in store.history.read_manifests(content_ids).items()
    }


def load_snapshot(store: Storage, revision: Revision, rules: Rules | None = None) -> Snapshot:
    """A stored revision as a Snapshot, entirely from the database (pickle verdicts as stored, or as `rules`
    judge them when given: the ingest diffs a new revision against its parent under today's rules)."""
    assert revision.id is not None
    rows = store.history.revision_files(revision.id)
    snapshot = Snapshot(
        repo_id=revision.repo_id,
        sha=revision.sha,
        files={
            r.path: FileEntry(path=r.path, oid=r.oid, size=r.size, lfs_sha256=r.lfs_sha256, lfs_size=r.lfs_size)
            for r in rows
        },
    )
    # Small files are read at once (one query); a large one (a tokenizer.json) when first asked for: a move that
    # does not touch it never reads nor decompresses it. Both are known to be stored before the snapshot says held.
    large = {r.oid for r in rows if r.held and r.size > DEFER_BYTES}
    stored = store.history.known_blobs(large)
    blobs = store.history.read_blobs(r.oid for r in rows if r.held and r.oid not in large)
    for r in rows:
        if r.held and r.oid in blobs:
            snapshot.contents[r.path] = blobs[r.oid]
        elif r.held and r.oid in stored:
            snapshot.contents.defer(r.path, _blob_reader(store, r.oid))  # type: ignore[attr-defined]
        elif r.note:
            snapshot.unavailable[r.path] = r.note
    weights = [f for f in snapshot.files.values() if is_safetensors(f.path)]
    manifests = load_manifests(store, {f.content_id for f in weights})
    for entry in weights:
        if entry.content_id in manifests:
            snapshot.manifests[entry.path] = manifests[entry.content_id]
    scanned = [f for f in snapshot.files.values() if scanner_for(f.path, repo_type_of(snapshot.repo_id)) is not None]
    scans = load_scans(store, {f.content_id for f in scanned}, rules)
    for entry in scanned:
        if entry.content_id in scans:
            snapshot.scans[entry.path] = scans[entry.content_id]
            if (manifest := pickle_manifest(scans[entry.content_id], entry.path)) is not None:
                snapshot.manifests[entry.path] = manifest
    return snapshot


def _blob_reader(store: Storage, oid: str) -> Callable[[], bytes]:
    def read() -> bytes:
        found = store.history.read_blobs([oid]).get(oid)
        if found is None:  # blobs are never deleted: a database that lost one is broken, not a missing file
            raise LookupError(f"blob {oid} is listed as stored but cannot be read")
        return found
    return read
