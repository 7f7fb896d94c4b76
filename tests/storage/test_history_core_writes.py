"""storage: what save_revision writes by Core inserts (files, changes) and read_manifests reads back, round trip."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from storage.db import create_db_engine, migrate
from storage.event_log import NewEvent
from storage.front import Storage
from storage.history import NewChange, NewFile, NewRevision, NewTensor, NewWeightFile
from storage.types import NUL_REPLACEMENT

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

T0 = datetime(2024, 7, 23, 15, 0, tzinfo=UTC)
SHARD = "a" * 64
BROKEN = "b" * 64


@pytest.fixture
def store(database_url: str) -> Iterator[Storage]:
    engine = create_db_engine(database_url)
    migrate(engine)
    yield Storage(engine, clock=lambda: T0)
    engine.dispose()


def _revision(files: list[NewFile], changes: list[NewChange], weight_files: list[NewWeightFile] = ()) -> NewRevision:
    return NewRevision(
        repo_id="org/model", sha="1" * 40, parent_sha=None, branch="main", committed_at=T0, title="Upload",
        message="", authors=["someone"], is_baseline=True, files=files, blobs={}, weight_files=list(weight_files),
        changes=changes, events=[NewEvent(event_id="ev-1", kind="revision.ingested", title="t", severity="info")],
    )


def test_read_manifests_returns_what_was_written(store: Storage) -> None:
    """Tensors (sorted by name, shapes as tuples), metadata and a header's error come back as written; a weight
    file never stored is absent."""
    shard = NewWeightFile(SHARD, (NewTensor("model.norm.weight", "BF16", (4096,), 4096),
                                  NewTensor("lm_head.weight", "BF16", (128256, 4096), 128256 * 4096)),
                          metadata={"format": "pt"})
    broken = NewWeightFile(BROKEN, (), error="header is not valid JSON")
    store.history.save_revision(_revision([NewFile("model.safetensors", "c" * 40, 10, "weights", SHARD, 10)], [],
                                          [shard, broken]))
    found = store.history.read_manifests([SHARD, BROKEN, "d" * 64])
    assert set(found) == {SHARD, BROKEN}
    assert found[SHARD].tensors == [("lm_head.weight", "BF16", (128256, 4096)), ("model.norm.weight", "BF16", (4096,))]
    assert found[SHARD].metadata == {"format": "pt"} and found[SHARD].error is None
    assert found[BROKEN].tensors == [] and found[BROKEN].error == "header is not valid JSON"
    assert store.history.read_manifests([]) == {}


def test_nul_characters_are_scrubbed_from_files_and_changes(store: Storage) -> None:
    """A NUL in a file's note, a change's summary, path or detail (keys and nested values) is stored as U+2400,
    on SQLite as on PostgreSQL (whose text cannot hold it): the revision lands whole."""
    files = [NewFile("weird\x00name.json", "c" * 40, 3, "files", held=False, note="not read: \x00 in the name"),
             NewFile("config.json", "e" * 40, 2, "config", held=True)]
    changes = [NewChange("config", "config.json", "model_type: 'a\x00' -> 'b'", "notice",
                         detail={"old\x00key": ["x\x00", {"y": "z\x00"}], "n": 1})]
    saved = store.history.save_revision(_revision(files, changes))
    assert saved is not None
    stored = {f.path: f for f in store.history.revision_files(saved.id)}
    name = f"weird{NUL_REPLACEMENT}name.json"
    assert set(stored) == {name, "config.json"}
    assert stored[name].note == f"not read: {NUL_REPLACEMENT} in the name" and not stored[name].held
    assert stored["config.json"].held and stored["config.json"].note is None
    [change] = store.history.changes_by_revision([saved.id])[saved.id]
    assert change.summary == f"model_type: 'a{NUL_REPLACEMENT}' -> 'b'"
    assert change.detail == {f"old{NUL_REPLACEMENT}key": [f"x{NUL_REPLACEMENT}", {"y": f"z{NUL_REPLACEMENT}"}], "n": 1}
