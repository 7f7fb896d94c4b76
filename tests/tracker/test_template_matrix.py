"""MatrixStore.changes: a revision whose chat template inputs are its parent's, with the matrix stored, reads nothing
of it back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from storage.blobs import git_blob_oid
from storage.event_log import NewEvent
from storage.front import Storage
from storage.history import NewFileScan, NewRevision
from tests.support.databases import migrated_storage
from tracker.differs import template_engines
from tracker.pipeline.template_matrix import FORMAT, MatrixStore
from tracker.revision.snapshot import FileEntry, Snapshot

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

TEMPLATE = Path(__file__).resolve().parents[1] / "fixtures" / "chat_templates" / "Qwen-Qwen2-7B-Instruct" / "chat_template.jinja"
T0 = datetime(2024, 7, 23, 15, 0, tzinfo=UTC)


@pytest.fixture
def store(database_url: str) -> Iterator[Storage]:
    with migrated_storage(database_url, T0) as storage:
        yield storage


def _snapshot(sha: str, config: dict) -> Snapshot:
    files = {"tokenizer_config.json": {"eos_token": "<|im_end|>", "chat_template": TEMPLATE.read_text()}, "config.json": config}
    snap = Snapshot("org/model", sha)
    for path, value in files.items():
        data = json.dumps(value).encode()
        snap.files[path] = FileEntry(path, git_blob_oid(data), len(data))
        snap.contents[path] = data
    return snap


def _store_matrix(store: Storage, key: str) -> None:
    """A matrix row for `key` as MatrixStore writes one (its document in the blob store)."""
    data = json.dumps({"template_engines": [], "template_samples": []}).encode()
    oid = git_blob_oid(data)
    store.history.save_revision(NewRevision(
        repo_id="org/model", sha="0" * 40, parent_sha=None, branch="main", committed_at=T0, title="t", message="",
        authors=[], is_baseline=True, files=[], blobs={oid: data}, weight_files=[], changes=[],
        events=[NewEvent(event_id="ev-0", kind="revision.ingested", title="t", severity="info")],
        file_scans=[NewFileScan(key, FORMAT, {"engines": []}, len(data), scanned_oid=oid)]))


def test_a_stored_matrix_the_parent_shares_is_not_read_back(store: Storage, monkeypatch: pytest.MonkeyPatch) -> None:
    """A config.json move under the same template: no change, nothing to write, and the matrix's blob not read."""
    old, new = _snapshot("1" * 40, {"rope_theta": 1.0}), _snapshot("2" * 40, {"rope_theta": 2.0})
    key = template_engines.matrix_key(new)
    assert key is not None and key == template_engines.matrix_key(old)
    _store_matrix(store, key)
    read: list[str] = []
    original = store.history.read_blobs

    def counted(oids):
        oids = list(oids)
        read.extend(oids)
        return original(oids)

    monkeypatch.setattr(store.history, "read_blobs", counted)
    matrices = MatrixStore(store)
    assert matrices.changes(old, new) == ([], [], {})
    assert read == [] and matrices.renders == 0
    assert matrices.find(new)[1] == {"template_engines": [], "template_samples": []} and len(read) == 1  # it is there
