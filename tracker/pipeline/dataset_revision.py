"""The dataset summary of one ingested revision and its changes: the seam the ingest hands a dataset revision's
files, scans and card to. Reads nothing of the data: the footers were scanned with the snapshot (once per content
id), the card downloaded with it; the viewer's conversion, when asked for, is read the same way at its own commit.

The summary is stored with the revision (dataset_store.py); the parent's is read back (or, for a parent stored
before summaries existed, made again from its stored snapshot), and tracker/differs/dataset.py compares the two.
Each change of notice or above is also an event of its own `dataset.*` kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from storage.history import NewEvent, NewFileScan
from tracker.differs import dataset as dataset_differ
from tracker.formats.dataset_card import read_card
from tracker.pipeline.dataset_store import load_summary, summary_rows
from tracker.revision.changes import Change, Severity
from tracker.revision.dataset_summary import Conversion, summarize
from tracker.revision.events import change_event
from tracker.revision.snapshot import Snapshot

CARD = "README.md"


@dataclass
class DatasetRevision:
    """What a dataset revision adds to its ingest: its summary, its changes and events, the rows to write."""

    summary: dict[str, Any]
    changes: list[Change] = field(default_factory=list)
    events: list[NewEvent] = field(default_factory=list)
    file_scans: list[NewFileScan] = field(default_factory=list)
    blobs: dict[str, bytes] = field(default_factory=dict)


def summary_of(snapshot: Snapshot, gated: Any = None, conversion: Conversion | None = None) -> dict[str, Any]:
    """A snapshot's dataset summary (`snapshot.repo_id` a dataset's key, `datasets/org/name`)."""
    card = read_card(snapshot.contents[CARD] if CARD in snapshot.contents else None)
    name = snapshot.repo_id.rsplit("/", 1)[-1]
    return summarize(name, snapshot.files.values(), snapshot.scans, card, gated, conversion)


def dataset_revision(store: Any, snapshot: Snapshot, parent: Snapshot | None, gated: Any = None,
                     conversion: Conversion | None = None, requires_latest: bool = False,
                     parent_gated: Any = None) -> DatasetRevision:
    """Summarize `snapshot`, compare it with its parent's summary (stored, or made from `parent` when none was
    stored), and give what to write. `gated`: the Hub's gate now; `parent_gated`: as it was for a parent whose
    summary was not stored (None: unknown, no gate change said)."""
    key = snapshot.repo_id
    summary = summary_of(snapshot, gated, conversion)
    old = None
    if parent is not None:
        old = load_summary(store, key, parent.sha) or summary_of(parent, parent_gated)
    hub_id = key.split("/", 1)[1] if key.startswith("datasets/") else key
    changes = dataset_differ.diff(old, summary, hub_id, requires_latest)
    events = [change_event(key, snapshot.sha, c.detail["event"], c, c.path) for c in changes
              if c.severity >= Severity.NOTICE]
    row, blobs = summary_rows(key, snapshot.sha, summary)
    return DatasetRevision(summary, changes, events, [row], blobs)
