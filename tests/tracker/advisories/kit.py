"""Helpers for the advisories tests: real fixture files, snapshots built from them, a hand-moved clock,
a sleep that records instead of sleeping."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tracker.formats.manifest import WeightManifest
from tracker.revision.snapshot import FileEntry, Snapshot

TESTS = Path(__file__).resolve().parents[2]
FIXTURES = TESTS / "fixtures"
DIFFERS = FIXTURES / "differs"
ADVISORY_FIXTURES = FIXTURES / "advisories"
HISTORIES = Path(__file__).resolve().parents[3] / "tracker" / "standins" / "replay" / "histories"
SCHEMA = FIXTURES / "osv" / "osv-schema.json"
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def real(path: str) -> bytes:
    """A real fixture file, relative to tests/fixtures (or to the replay histories with `histories/`)."""
    if path.startswith("histories/"):
        return (HISTORIES / path.removeprefix("histories/")).read_bytes()
    return (FIXTURES / path).read_bytes()


def blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def snapshot(
    contents: dict[str, bytes | str | Any] | None = None,
    *,
    lfs: dict[str, str] | None = None,
    manifests: dict[str, WeightManifest] | None = None,
    unavailable: dict[str, str] | None = None,
    sha: str = "a" * 40,
    repo_id: str = "org/model",
) -> Snapshot:
    """A Snapshot holding `contents` (bytes, text, or JSON values), LFS files by seed, unavailable files."""
    snap = Snapshot(repo_id, sha)
    for path, value in (contents or {}).items():
        data = value if isinstance(value, bytes) else value.encode() if isinstance(value, str) else json.dumps(value, indent=2).encode()
        snap.files[path] = FileEntry(path, blob_oid(data), len(data))
        snap.contents[path] = data
    for path, seed in (lfs or {}).items():
        sha256 = hashlib.sha256(seed.encode()).hexdigest()
        snap.files[path] = FileEntry(path, blob_oid(seed.encode()), 134, sha256, 1_000_000)
    for path, reason in (unavailable or {}).items():
        snap.files[path] = FileEntry(path, blob_oid(path.encode()), 10)
        snap.unavailable[path] = reason
    snap.manifests.update(manifests or {})
    return snap


class Clock:
    """A clock tests move by hand."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


class Sleeps:
    """Records the waits the OSV client asks for instead of sleeping."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def moved_fix(record: dict[str, Any], fixed: str) -> list[dict[str, Any]]:
    """The record's `affected` with the fix of its first range moved to `fixed` (a change of substance)."""
    affected = json.loads(json.dumps(record["affected"]))
    affected[0]["ranges"][0]["events"] = [e if "fixed" not in e else {"fixed": fixed}
                                          for e in affected[0]["ranges"][0]["events"]]
    return affected
