"""storage: what save_revision writes by Core inserts (files, changes), with a new revision's advisory check, and
read_manifests reads back, round trip."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from storage.advisories import NewAdvisoryCheck, NewLink, write_check
from storage.event_log import NewEvent
from storage.front import Storage
from storage.history import NewChange, NewFile, NewRevision, NewTensor, NewWeightFile
from storage.types import NUL_REPLACEMENT
from tests.support.databases import migrated_storage

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

T0 = datetime(2024, 7, 23, 15, 0, tzinfo=UTC)
SHARD = "a" * 64
BROKEN = "b" * 64


@pytest.fixture
def store(database_url: str) -> Iterator[Storage]:
    with migrated_storage(database_url, T0) as storage:
        yield storage


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


def _check(facts: dict, pending: str | None) -> NewAdvisoryCheck:
    link = NewLink("GHSA-xxxx", "transformers", "4.30.0", "affected", None, "matched", None, ("CVE-1",), "2024-01-01",
                   "a summary")
    return NewAdvisoryCheck(repo_id="org/model", facts=facts, advice={"sentence": "upgrade"}, links=[link],
                            pending_reason=pending)


@pytest.mark.parametrize("pending", [None, "OSV unreachable"])
def test_a_new_revisions_advisory_check_is_written_whole(store: Storage, pending: str | None) -> None:
    """Written with the revision it belongs to (nothing to look up or replace), the check's facts, advice, links
    and pending mark read back as written; a later re-check of the same revision replaces them."""
    check = _check({"dependencies": ["transformers"]}, pending)
    saved = store.history.save_revision(_revision([], []), extra_writes=[
        lambda s, revision: write_check(s, revision.id, check, T0, new_revision=True)])
    facts = store.advisories.facts([saved.id])[saved.id]
    assert facts.facts == {"dependencies": ["transformers"]} and facts.advice == {"sentence": "upgrade"}
    assert [link.advisory_key for link in store.advisories.links(saved.id)] == ["GHSA-xxxx"]
    assert [p.reason for p in store.advisories.pending()] == ([pending] if pending else [])
    store.advisories.write(saved.id, _check({"dependencies": []}, None))
    assert store.advisories.facts([saved.id])[saved.id].facts == {"dependencies": []}
    assert [link.advisory_key for link in store.advisories.links(saved.id)] == ["GHSA-xxxx"]
    assert store.advisories.pending() == []
