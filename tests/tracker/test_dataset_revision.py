"""The dataset seam of the ingest: a revision's summary from its snapshot (footers scanned, card held), compared
with the parent's stored summary or, without one, the parent's snapshot; events of notice and above."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from tests.support.dataset_cards import glue_card
from tests.support.parquet_files import data_file, glue_files
from tracker.pipeline.dataset_revision import dataset_events, dataset_revision
from tracker.pipeline.dataset_store import FORMAT, load_summary, summary_key
from tracker.revision.snapshot import FileEntry, Snapshot

KEY = "datasets/nyu-mll/glue"


@dataclass
class History:
    """The two reads of storage.history the seam makes, over rows a test hands it (what save_revision would write)."""

    scans: dict = field(default_factory=dict)
    blobs: dict = field(default_factory=dict)

    def read_file_scans(self, ids):
        return {i: self.scans[i] for i in ids if i in self.scans}

    def read_blobs(self, oids):
        return {o: self.blobs[o] for o in oids if o in self.blobs}

    def keep(self, revision) -> None:
        for row in revision.file_scans:
            self.scans[row.content_id] = SimpleNamespace(format=row.format, scanned_oid=row.scanned_oid)
        self.blobs.update(revision.blobs)


def snapshot(sha: str, counts: dict, card_counts: dict | None = None, licence: str = "other") -> Snapshot:
    pairs = [data_file(path, data) for path, data in glue_files(counts).items()]
    card = glue_card(card_counts or counts, licence).encode()
    files = {e.path: e for e, _ in pairs} | {"README.md": FileEntry("README.md", "1" * 40, len(card))}
    snap = Snapshot(repo_id=KEY, sha=sha, files=files)
    snap.contents["README.md"] = card
    snap.scans.update({e.path: s for e, s in pairs})
    return snap


def test_the_summary_is_kept_and_the_next_revision_compared_with_it():
    """The first revision's summary row is keyed by repo and sha; the second compares with it and gives events."""
    store = SimpleNamespace(history=History())
    first = dataset_revision(store, snapshot("a" * 40, {"cola": {"train": 10}}), None, gated=False)
    assert first.changes == []
    assert [(r.content_id, r.format) for r in first.file_scans] == [(summary_key(KEY, "a" * 40), FORMAT)]
    store.history.keep(first)
    assert load_summary(store, KEY, "a" * 40) == first.summary
    # the parent snapshot handed in says 10 rows and no gate: the stored summary (gated False) is what counts
    second = dataset_revision(store, snapshot("b" * 40, {"cola": {"train": 8}}, licence="mit"),
                              snapshot("a" * 40, {"cola": {"train": 10}}), gated="auto")
    assert [(c.detail["event"], c.severity.value) for c in second.changes] == [
        ("dataset.licence_changed", "warning"), ("dataset.gating_changed", "warning"), ("dataset.rows_removed", "warning")]
    events = dataset_events(KEY, "b" * 40, second.changes)
    assert [e.kind for e in events] == ["dataset.licence_changed", "dataset.gating_changed", "dataset.rows_removed"]
    assert events[2].title.endswith(": config cola, split train: 2 rows removed (10 -> 8) (warning)")
    assert events[2].payload["detail"]["before"] == 10 and "dataset" not in events[2].payload
    # with the revision's table (what pages, feeds and webhooks show), each event carries it
    carried = dataset_events(KEY, "b" * 40, second.changes, second.table)
    assert all(e.payload["dataset"] == second.table for e in carried)
    assert second.table["splits"] == [{"config": "cola", "split": "train", "before": 10, "after": 8, "delta": -2,
                                       "state": "same", "columns": second.table["splits"][0]["columns"]}]


def test_a_parent_without_a_stored_summary_is_summarized_from_its_snapshot():
    """A parent ingested before summaries were kept: its snapshot stands in (its gate unknown: no gate change)."""
    store = SimpleNamespace(history=History())
    revision = dataset_revision(store, snapshot("b" * 40, {"cola": {"train": 12}}),
                                snapshot("a" * 40, {"cola": {"train": 10}}), gated="manual")
    assert [c.detail["event"] for c in revision.changes] == ["dataset.rows_added"]


def test_info_changes_are_not_events_of_their_own():
    """A re-upload (info) is in the revision's changes, not an event of its own."""
    store = SimpleNamespace(history=History())
    old = snapshot("a" * 40, {"cola": {"train": 10}})
    new = snapshot("b" * 40, {"cola": {"train": 10}})
    entry = new.files["cola/train-00000-of-00001.parquet"]
    new.files[entry.path] = FileEntry(entry.path, "2" * 40, entry.size, "f" * 64, entry.lfs_size)  # rewritten
    revision = dataset_revision(store, new, old)
    assert [(c.detail["event"], c.severity.value) for c in revision.changes] == [("dataset.reuploaded", "info")]
    assert dataset_events(KEY, "b" * 40, revision.changes) == []
