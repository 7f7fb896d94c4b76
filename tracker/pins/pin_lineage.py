"""`hubwatch outdated` on a pin (lock file entry or HF cache snapshot) of a followed derivative: which base
change the copy at the pinned revision misses, per behaviour part.

The copy's parts come, without a Hub request, from the first of: the derivative's stored check when the
pin is its checked head; the derivative's own stored history when it holds the pinned commit; the lock
file's recorded blob ids when the blob store holds those bytes; the pinned snapshot in the local HF cache
(read as hostile input, tracker/pins/local_copy.py). Failing those, and only when a Hub client is given, the
pinned commit's files are read from the Hub (its file list and the small files not in the blob store, as an
ingest reads them). Otherwise the copy is `not_compared`, named.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from storage.blobs import git_blob_oid
from storage.errors import RevisionNotStored
from storage.front import Storage
from tracker.errors import BadInput, HubwatchError
from tracker.family.lineage import PART_FILES, PartValue, lacking_parts, parts_of, parts_stale
from tracker.pins.base_lineage import BaseComparison, compare_with_base
from tracker.pins.cache import Pin
from tracker.pins.local_copy import read_copy
from tracker.revision.snapshot import FileEntry, Snapshot

if TYPE_CHECKING:
    from tracker.hub.client import HubClient

NOUN = "the pinned copy"


def check_pin_lineage(store: Storage, pin: Pin, cache_dir: str | None, hub: HubClient | None = None,
                      max_file_bytes: int = 0) -> BaseComparison | None:
    """Where the pinned copy stands against the base it is followed as a derivative of (None: it is not one).
    `hub`: read the pinned commit's files from the Hub when nothing here holds them (files over
    `max_file_bytes` are not read)."""
    rows = store.derivatives.rows_of(pin.repo_id)
    if not rows:
        return None
    row = rows[0]
    base = row.base_repo_id
    from_where = f"derivative of {base} ({row.relation})"
    notes: list[str] = []
    if row.head_sha == pin.sha and row.parts and not parts_stale(row.parts):
        mine = {k: PartValue.from_dict(v) for k, v in row.parts.items()}
        found = compare_with_base(store, base, from_where, mine, lacking_parts(row.sources), NOUN)
        return _noted(found, notes, store, pin)
    snapshot = (_from_history(store, pin) or _from_lock(store, pin) or _from_cache(pin, cache_dir, notes)
                or _from_hub(store, hub, pin, max_file_bytes, notes))
    if snapshot is None:
        where = f"the derivative's checked head is {row.head_sha[:12]}" if row.head_sha else "the derivative was not checked yet"
        return _noted(BaseComparison(base, from_where, "not_compared", lines=[
            f"the files of {pin.repo_id}@{pin.sha[:12]} are not known here ({where}; not in the blob store or the "
            "local HF cache): download the pinned revision, or check the family again (hubwatch poll)"]), notes)
    found = compare_with_base(store, base, from_where, parts_of(snapshot), lacking_parts(snapshot.files), NOUN)
    return _noted(found, notes, store, pin)


def _noted(found: BaseComparison, notes: list[str], store: Storage | None = None, pin: Pin | None = None) -> BaseComparison:
    found.lines += [f"note: {n}" for n in notes]
    if store is not None and pin is not None:
        found.records = records_at(store, pin.repo_id, pin.sha)
    return found


def records_at(store: Storage, repo_id: str, sha: str) -> list[str]:
    """The ids of hubwatch's OSV records saying the derivative at `sha` still carries a change its base made
    (tracker/family/derivative_records.py), as the OSV API matches them."""
    from storage.osv_index import Ask
    from tracker.family.derivative_records import CLASS_ID

    (found,) = store.osv_index.matching([Ask(repo_id, sha, 100)])
    ours = {o.id for o in store.advisories.own(repo_id) if o.class_id == CLASS_ID}
    return [r.id for r in found if r.id in ours]


def _from_history(store: Storage, pin: Pin) -> Snapshot | None:
    """The pinned commit as the derivative's own history stored it (its part files are held)."""
    from tracker.revision.stored import load_snapshot

    try:
        revision = store.history.find_revision(pin.repo_id, pin.sha)
    except RevisionNotStored:
        return None
    snapshot = load_snapshot(store, revision)
    return snapshot if any(p in snapshot.contents for p in PART_FILES) or snapshot.scans else None


def _from_hub(store: Storage, hub: HubClient | None, pin: Pin, max_file_bytes: int, notes: list[str]) -> Snapshot | None:
    """The pinned commit read from the Hub as an ingest reads it (nothing stored: a check, not a poll)."""
    if hub is None:
        return None
    from tracker.pipeline.snapshot_io import fetch_snapshot

    try:
        return fetch_snapshot(hub, store, pin.repo_id, pin.sha, max_file_bytes).snapshot
    except HubwatchError as err:
        notes.append(f"the files of {pin.repo_id}@{pin.sha[:12]} could not be read from the Hub: {err}")
        return None


def _from_lock(store: Storage, pin: Pin) -> Snapshot | None:
    """The lock file's part files, when it recorded them and the blob store holds every one."""
    wanted = {p: oid for p, oid in pin.files.items() if p in PART_FILES}
    if not wanted:
        return None
    held = store.history.read_blobs(wanted.values())
    if any(oid not in held for oid in wanted.values()):
        return None
    snapshot = Snapshot(repo_id=pin.repo_id, sha=pin.sha)
    for path, oid in wanted.items():
        data = held[oid]
        if git_blob_oid(data) != oid:
            return None
        snapshot.files[path] = FileEntry(path, oid, len(data))
        snapshot.contents[path] = data
    return snapshot


def _from_cache(pin: Pin, cache_dir: str | None, notes: list[str]) -> Snapshot | None:
    """The pinned snapshot's part files in the local HF cache (symlinks may reach the repo folder's blobs)."""
    if cache_dir is None:
        return None
    folder = Path(os.path.expanduser(cache_dir)) / ("models--" + pin.repo_id.replace("/", "--"))
    snapshot_dir = folder / "snapshots" / pin.sha
    if not snapshot_dir.is_dir():
        return None
    try:
        copy = read_copy(snapshot_dir, within=folder)
    except BadInput as err:
        notes.append(str(err))
        return None
    notes += copy.notes
    return copy.snapshot if copy.snapshot.files else None
