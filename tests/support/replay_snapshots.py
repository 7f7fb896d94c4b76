"""Snapshots of the bundled replay histories' commits, built in-process from the history files (no server): every
small file's bytes, and each safetensors file's header as its manifest, as an ingest would read them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from tracker.formats.manifest import TensorInfo, WeightManifest
from tracker.revision.snapshot import FileEntry, Snapshot
from tracker.standins.replay.history import RepoHistory, load_repo

HISTORIES = Path(__file__).resolve().parents[2] / "tracker" / "standins" / "replay" / "histories"
HELD_BYTES = 32 * 1024 * 1024  # files above this are left unread, as [poll] max_file_mb would


def replay_history(repo_id: str) -> RepoHistory:
    return load_repo(HISTORIES / repo_id)


def replay_snapshots(repo_id: str) -> Iterator[tuple[str, Snapshot]]:
    """(commit folder name, snapshot) for each commit of the bundled history of ``repo_id``, oldest first."""
    history = replay_history(repo_id)
    for commit in history.commits:
        yield commit.dirname, snapshot_of(history, commit.sha)


def snapshot_of(history: RepoHistory, sha: str) -> Snapshot:
    tree = history.trees[sha]
    snapshot = Snapshot(history.repo_id, sha)
    for path, entry in tree.items():
        blob = entry.blob
        snapshot.files[path] = FileEntry(path, blob.oid, blob.size)
        if entry.safetensors is not None:
            tensors = tuple(TensorInfo(name, spec["dtype"], tuple(spec["shape"]))
                            for name, spec in entry.safetensors.items() if name != "__metadata__")
            snapshot.manifests[path] = WeightManifest(tensors)
        elif entry.missing:
            snapshot.unavailable[path] = "missing upstream"
        elif blob.size <= HELD_BYTES and not path.endswith((".bin", ".pt", ".pth", ".onnx", ".h5", ".msgpack")):
            snapshot.contents[path] = blob.read()
        else:
            snapshot.unavailable[path] = "not read"
    return snapshot
