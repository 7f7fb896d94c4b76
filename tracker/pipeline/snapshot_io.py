"""Building a new commit's Snapshot from the Hub (network); a stored one is read back by
tracker/revision/stored.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from storage.blobs import git_blob_oid
from storage.front import Storage
from storage.history import NewFileScan, NewWeightFile
from storage.kinds import repo_type_of
from tracker.errors import RepoGated
from tracker.formats import FileScan
from tracker.formats.pickle_rules import BUILTIN, Rules
from tracker.formats.registry import run_scan, scanner_for
from tracker.hub.client import HubClient, MissingFile
from tracker.revision.classify import is_safetensors, should_download
from tracker.revision.snapshot import Contents, FileEntry, Snapshot
from tracker.revision.stored import load_manifests, load_scans, pickle_manifest, to_new_weight_file

T = TypeVar("T")


class _Refused(Exception):
    """A file the gate kept from being asked for (or the Hub just refused): recorded as unread, the fetch goes on."""


@dataclass
class Gate:
    """A gated repo followed through what stays readable, for one poll: the first `/resolve/` the Hub refuses
    (`GatedRepo`) closes it, and no other file is asked for in this poll (the refused endpoint is not hammered).
    Whatever was not read is noted on its file and listed in `unread`. `mode`: the gate's (auto, manual), as the
    head said it."""

    mode: str = "unknown"
    refusal: RepoGated | None = None
    unread: list[str] = field(default_factory=list)  # every file of this poll not read, in order, once each
    reads: int = 0  # files the Hub served in this poll: a gated watch is restored only by a file read

    @property
    def closed(self) -> bool:
        return self.refusal is not None

    @property
    def note(self) -> str:
        return f"gated ({self.mode}): not read, the Hub refuses its files to this token"

    def read(self, path: str, call: Callable[[], T]) -> T:
        """`call()` (one file's read) unless the gate is closed; a refusal closes it. Raises _Refused for both."""
        if self.refusal is None:
            try:
                result = call()
            except RepoGated as err:
                self.refusal = err
            else:
                self.reads += 1
                return result
        if path not in self.unread:
            self.unread.append(path)
        raise _Refused(path)


def gate_mode(gated: Any) -> str:
    """The gate's mode as model info's `gated` says it (auto, manual), "unknown" when it names none."""
    return gated if isinstance(gated, str) and gated else "unknown"


def gated_note(gate: Gate, paths: list[str]) -> str:
    """`gated (manual): 2 file(s) not read: config.json, model.safetensors`: what a revision could not read."""
    shown = ", ".join(paths[:8]) + (f" and {len(paths) - 8} more" if len(paths) > 8 else "")
    return f"gated ({gate.mode}): {len(paths)} file(s) not read: {shown}"


@dataclass
class FetchedSnapshot:
    """A snapshot fetched from the Hub, with what the store does not hold yet."""

    snapshot: Snapshot
    new_blobs: dict[str, bytes] = field(default_factory=dict)
    new_weight_files: list[NewWeightFile] = field(default_factory=list)
    new_file_scans: list[NewFileScan] = field(default_factory=list)
    gated: list[str] = field(default_factory=list)  # files of this commit not read: the gate refused them
    dataset_table: dict[str, Any] | None = None  # a dataset revision's table for its event (dataset_revision.py)


def fetch_snapshot(
    hub: HubClient, store: Storage, repo_id: str, sha: str, max_file_bytes: int, rules: Rules = BUILTIN,
    parent: Snapshot | None = None, gate: Gate | None = None,
) -> FetchedSnapshot:
    """List the commit's files, download tracked files whose oid is new, read new safetensors headers,
    scan new GGUF headers and pickles (judged by `rules`).

    `parent`: a snapshot in hand (judged by the same `rules`) whose contents, manifests and scans stand for
    the store's wherever a file is the same content: they are not read back from the database again.

    `gate`: a gated repo is followed through what stays readable: a file the Hub refuses (and, the gate closed,
    every later one) is recorded in `snapshot.unavailable` and `gated` instead of failing the revision. Without
    a gate the refusal propagates as RepoGated.

    Raises HubError subclasses for failures that should abort the revision (retry later); files that
    are too large or missing upstream are recorded in `snapshot.unavailable` instead."""
    files = hub.list_files(repo_id, sha)
    snapshot = Snapshot(repo_id=repo_id, sha=sha, files={f.path: f for f in files})
    fetched = FetchedSnapshot(snapshot)
    wanted = [f for f in files if should_download(f.path)]
    for entry in wanted:
        if entry.size > max_file_bytes:
            snapshot.unavailable[entry.path] = (
                f"{entry.path} is {_mb(entry.size)}, over the {_mb(max_file_bytes)} limit: "
                "not downloaded, compared by content id only"
            )
    from_parent = _held_contents(parent)
    held = store.history.known_blobs(f.oid for f in wanted if f.path not in snapshot.unavailable and f.oid not in from_parent)
    stored = store.history.read_blobs(held)
    for entry in wanted:
        if entry.path in snapshot.unavailable:
            continue
        if entry.oid in from_parent:  # the parent's bytes, read (if the parent has not yet) when first asked for
            snapshot.contents.defer(entry.path, from_parent[entry.oid])  # type: ignore[attr-defined]
            continue
        if entry.oid in stored:
            snapshot.contents[entry.path] = stored[entry.oid]
            continue
        if entry.oid in fetched.new_blobs:
            snapshot.contents[entry.path] = fetched.new_blobs[entry.oid]
            continue
        try:
            data = _read(gate, fetched, entry.path, lambda e=entry: hub.download(repo_id, sha, e.path, e.size))
        except MissingFile as err:
            snapshot.unavailable[entry.path] = str(err)
            continue
        except _Refused:
            continue
        if git_blob_oid(data) != entry.oid:
            snapshot.unavailable[entry.path] = (
                f"{entry.path}: downloaded bytes do not match the tree's oid {entry.oid[:12]}"
            )
            continue
        fetched.new_blobs[entry.oid] = data
        snapshot.contents[entry.path] = data
    _fill_manifests(hub, store, fetched, parent, gate)
    _fill_scans(hub, store, fetched, rules, parent, gate)
    return fetched


def _read(gate: Gate | None, fetched: FetchedSnapshot, path: str, call: Callable[[], T]) -> T:
    """One file's read through the gate (when there is one); a refused file is noted as unread and _Refused raised."""
    if gate is None:
        return call()
    try:
        return gate.read(path, call)
    except _Refused:
        fetched.snapshot.unavailable[path] = gate.note
        if path not in fetched.gated:
            fetched.gated.append(path)
        raise


def _held_contents(parent: Snapshot | None) -> dict[str, Callable[[], bytes]]:
    """What gives the parent's file bytes, by oid (the blob store's key); nothing is read now."""
    if parent is None:
        return {}
    contents = parent.contents
    assert isinstance(contents, Contents)  # Snapshot makes it one
    return {parent.files[path].oid: contents.loader(path) for path in contents if path in parent.files}


def _by_content(parent: Snapshot | None, held: dict[str, T], wanted: set[str]) -> dict[str, T]:
    """What the parent holds by path (`held`: its manifests or scans), by content id, for the `wanted` ones."""
    if parent is None:
        return {}
    out = {}
    for path, value in held.items():
        entry = parent.files.get(path)
        if entry is not None and entry.content_id in wanted:
            out[entry.content_id] = value
    return out


def _fill_manifests(hub: HubClient, store: Storage, fetched: FetchedSnapshot, parent: Snapshot | None,
                    gate: Gate | None = None) -> None:
    snapshot = fetched.snapshot
    weights = [f for f in snapshot.files.values() if is_safetensors(f.path)]
    wanted = {f.content_id for f in weights}
    held = {p: m for p, m in parent.manifests.items() if is_safetensors(p)} if parent is not None else {}
    known = _by_content(parent, held, wanted)
    known.update(load_manifests(store, wanted - set(known)))
    for entry in weights:
        manifest = known.get(entry.content_id)
        if manifest is None:
            try:
                manifest = _read(gate, fetched, entry.path,
                                 lambda e=entry: hub.safetensors_manifest(snapshot.repo_id, snapshot.sha, e.path))
            except _Refused:
                continue  # no header: the weights differ says its tensors were not compared
            known[entry.content_id] = manifest
            fetched.new_weight_files.append(to_new_weight_file(entry.content_id, manifest))
        snapshot.manifests[entry.path] = manifest


def scan_files(hub: HubClient, store: Storage, repo_id: str, sha: str, files: list[FileEntry],
               rules: Rules = BUILTIN, gate: Gate | None = None) -> FetchedSnapshot:
    """The scans of `files` at commit `sha` of `repo_id` (another ref than the one ingested: a dataset's Parquet
    conversion), each content read once ever as a snapshot's are: what was stored is loaded, the rest read by
    range; the rows and bytes to write come back in the FetchedSnapshot (a file the `gate` refused: unscanned,
    in its `gated`)."""
    fetched = FetchedSnapshot(Snapshot(repo_id=repo_id, sha=sha, files={f.path: f for f in files}))
    _fill_scans(hub, store, fetched, rules, None, gate)
    return fetched


def _fill_scans(hub: HubClient, store: Storage, fetched: FetchedSnapshot, rules: Rules, parent: Snapshot | None,
                gate: Gate | None = None) -> None:
    """Scan each file a scanner reads whose content was never scanned (read once per content id, however
    many revisions or repos carry it); take the parent's or load the stored scans of the others. A file's
    own failure is its scan's note; Hub errors propagate (the revision is retried)."""
    snapshot = fetched.snapshot
    repo_type = repo_type_of(snapshot.repo_id)  # a dataset's data files are read too (Parquet footers, first ranges)
    scanned = [f for f in snapshot.files.values() if scanner_for(f.path, repo_type) is not None]
    wanted = {f.content_id for f in scanned}
    known = _by_content(parent, parent.scans if parent is not None else {}, wanted)
    known.update(load_scans(store, wanted - set(known), rules))
    for entry in scanned:
        scan = known.get(entry.content_id)
        if scan is None:
            spec = scanner_for(entry.path, repo_type)
            assert spec is not None
            size = entry.lfs_size if entry.lfs_size is not None else entry.size
            source = hub.open_range(snapshot.repo_id, snapshot.sha, entry.path, size, spec.budget,
                                    first_block=spec.read_ahead, max_block=spec.read_ahead)
            try:
                scan, data = _read(gate, fetched, entry.path, lambda s=spec, src=source, e=entry: run_scan(s, src, e.path, rules))
            except _Refused:
                continue  # not scanned: its pickle or GGUF verdict says not checked
            if data:
                oid = git_blob_oid(data)
                fetched.new_blobs[oid] = data
                scan = FileScan(scan.format, scan.result, scan.bytes_read, scan.note, scan.rules_version, oid)
            known[entry.content_id] = scan
            fetched.new_file_scans.append(NewFileScan(entry.content_id, scan.format, scan.result, scan.bytes_read,
                                                      scan.note, scan.rules_version, scan.scanned_oid))
            if (manifest := pickle_manifest(scan, entry.path)) is not None:
                fetched.new_weight_files.append(to_new_weight_file(entry.content_id, manifest))
        snapshot.scans[entry.path] = scan
        if (manifest := pickle_manifest(scan, entry.path)) is not None:
            snapshot.manifests[entry.path] = manifest


def _mb(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"
