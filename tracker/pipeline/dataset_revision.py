"""The seam where a dataset revision is summarised: the ingest hands each revision of a dataset repo (its file
tree, its card, and its parent's) to "the dataset summary", whose changes join the revision's.

The summary (tracker/revision/dataset_summary.py) reads nothing of the data: the Parquet footers and the JSON
Lines/CSV first ranges were scanned with the snapshot (once per content id, tracker/formats), the card was
downloaded with it. At the branch head the viewer's conversion (`refs/convert/parquet`) is read too: its commit,
its files, and their footers the same way, once per content id.

The summary is stored with the revision (dataset_store.py); the parent's is read back (or, for a parent stored
before summaries existed, made again from its stored snapshot), and tracker/differs/dataset.py compares the two.
Each change of notice or above is also an event of its own `dataset.*` kind (`dataset_events`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from storage.errors import RevisionNotStored
from storage.history import NewEvent, NewFileScan
from storage.kinds import split_repo_key
from tracker.differs import dataset as dataset_differ
from tracker.formats.dataset_card import CardFacts, read_card
from tracker.pipeline.dataset_store import load_summary, summary_rows
from tracker.pipeline.snapshot_io import Gate, gate_mode, scan_files
from tracker.revision.changes import Change, ChangeKind, Severity
from tracker.revision.classify import MODEL_CARD
from tracker.revision.dataset_summary import Conversion, is_data_file, summarize
from tracker.revision.dataset_table import dataset_table
from tracker.revision.events import change_event

if TYPE_CHECKING:
    from storage.front import Storage
    from storage.models import Revision
    from tracker.hub.client import HubClient
    from tracker.pipeline.snapshot_io import FetchedSnapshot
    from tracker.revision.snapshot import FileEntry, Snapshot


@dataclass(frozen=True)
class DatasetRevision:
    """One dataset revision as the summary gets it, before the revision's one write: the Hub client (Parquet
    footers by range: `hub.open_range(repo_id, sha, path, size)`; the viewer's conversion:
    `hub.conversion_commit(repo_id)`, its files by that sha), the store (what was read before, by blob), the
    fetched snapshot (its files, the card's bytes; `fetched.new_blobs` and `new_file_scans` take what is to be
    written with the revision) and the parent's snapshot (None for a baseline). `gated`: the Hub's gate as the
    head said it; `at_head`: this commit is the branch head (its conversion is read), committed at
    `committed_at`; `requires_latest`: the watch's `licence_requires_latest`."""

    hub: HubClient
    store: Storage
    fetched: FetchedSnapshot
    parent: Snapshot | None
    gated: Any = None
    at_head: bool = False
    committed_at: datetime | None = None
    requires_latest: bool = False

    @property
    def repo_id(self) -> str:
        """The dataset's key, `datasets/org/name`."""
        return self.fetched.snapshot.repo_id

    @property
    def hub_id(self) -> str:
        """The dataset's id on the Hub, `org/name`."""
        return split_repo_key(self.repo_id)[1]

    @property
    def sha(self) -> str:
        return self.fetched.snapshot.sha

    @property
    def files(self) -> dict[str, FileEntry]:
        """The revision's file tree: path -> its blob oid, size and LFS sha256."""
        return self.fetched.snapshot.files

    @property
    def card(self) -> bytes | None:
        """The card (README.md) at this revision; None when the repo has none or it could not be read (then
        `fetched.snapshot.unavailable` says why)."""
        return _card(self.fetched.snapshot)

    @property
    def parent_card(self) -> bytes | None:
        return _card(self.parent) if self.parent is not None else None


def _card(snapshot: Snapshot) -> bytes | None:
    if MODEL_CARD not in snapshot.files or MODEL_CARD in snapshot.unavailable:
        return None
    return snapshot.contents.get(MODEL_CARD)


# What the ingest calls for each dataset revision: its changes, joined to the revision's (a per-file verdict of
# its own for what cannot be read; it raises only for a Hub failure, which retries the revision as any does).
DatasetSummary = Callable[[DatasetRevision], "list[Change]"]


@dataclass
class DatasetRead:
    """A dataset revision's summary, its changes against its parent's, and the rows to write with it."""

    summary: dict[str, Any]
    changes: list[Change] = field(default_factory=list)
    file_scans: list[NewFileScan] = field(default_factory=list)
    blobs: dict[str, bytes] = field(default_factory=dict)
    table: dict[str, Any] = field(default_factory=dict)  # what pages, feeds and webhooks show (dataset_table.py)


def summarize_dataset(revision: DatasetRevision) -> list[Change]:
    """The dataset summary: the revision summarized (its conversion read at the head), compared with its parent's,
    and stored with it (the rows go into `revision.fetched`)."""
    conversion = read_conversion(revision) if revision.at_head else None
    read = dataset_revision(revision.store, revision.fetched.snapshot, revision.parent, revision.gated, conversion,
                            revision.requires_latest)
    fetched = revision.fetched
    fetched.new_file_scans.extend(read.file_scans)
    fetched.new_blobs.update(read.blobs)
    fetched.dataset_table = read.table
    return read.changes


def read_conversion(revision: DatasetRevision) -> Conversion | None:
    """The viewer's conversion as it stands: its commit, its Parquet files scanned (once per content id), tied to
    this revision when made after it was committed, else lagging. None when the dataset has no conversion."""
    hub, key = revision.hub, revision.repo_id
    fetched = revision.fetched
    if fetched.gated:  # the Hub refused this revision's files: the conversion's would be refused too
        return None
    commit = hub.conversion_commit(key)
    if commit is None:
        return None
    files = [f for f in hub.list_files(key, commit.sha) if is_data_file(f.path) and f.path.endswith(".parquet")]
    scanned = scan_files(hub, revision.store, key, commit.sha, files, gate=Gate(gate_mode(revision.gated)))
    known = {row.content_id for row in fetched.new_file_scans}
    fetched.new_file_scans.extend(row for row in scanned.new_file_scans if row.content_id not in known)
    fetched.new_blobs.update(scanned.new_blobs)
    lagging = revision.committed_at is not None and commit.created_at < revision.committed_at
    source = _made_from(revision, commit.created_at) if lagging else revision.sha
    return Conversion(commit.sha, files, scanned.snapshot.scans, source, lagging)


def _made_from(revision: DatasetRevision, made_at: datetime) -> str | None:
    """The stored revision a lagging conversion was made from: the newest committed before it (None: none stored)."""
    for stored in revision.store.history.list_revisions(revision.repo_id):  # newest first
        committed = stored.committed_at if stored.committed_at.tzinfo else stored.committed_at.replace(tzinfo=UTC)
        if committed <= made_at:
            return str(stored.sha)
    return None


def summary_of(snapshot: Snapshot, gated: Any = None, conversion: Conversion | None = None) -> dict[str, Any]:
    """A snapshot's dataset summary (`snapshot.repo_id` a dataset's key, `datasets/org/name`)."""
    if MODEL_CARD in snapshot.unavailable:  # refused by a gate, or too large: not read, so it declares nothing
        card = CardFacts(verdict="unread", notes=[f"README.md not read: {snapshot.unavailable[MODEL_CARD]}"])
    else:
        card = read_card(snapshot.contents[MODEL_CARD] if MODEL_CARD in snapshot.contents else None)
    name = snapshot.repo_id.rsplit("/", 1)[-1]
    return summarize(name, snapshot.files.values(), snapshot.scans, card, gated, conversion, snapshot.unavailable)


def dataset_revision(store: Any, snapshot: Snapshot, parent: Snapshot | None, gated: Any = None,
                     conversion: Conversion | None = None, requires_latest: bool = False,
                     parent_gated: Any = None) -> DatasetRead:
    """Summarize `snapshot`, compare it with its parent's summary (stored, or made from `parent` when none was
    stored), and give what to write. `gated`: the Hub's gate now; `parent_gated`: as it was for a parent whose
    summary was not stored (None: unknown, no gate change said)."""
    key = snapshot.repo_id
    summary = summary_of(snapshot, gated, conversion)
    old = None
    if parent is not None:
        old = load_summary(store, key, parent.sha) or summary_of(parent, parent_gated)
    changes = dataset_differ.diff(old, summary, split_repo_key(key)[1], requires_latest)
    row, blobs = summary_rows(key, snapshot.sha, summary)
    return DatasetRead(summary, changes, [row], blobs, dataset_table(old, summary))


def stored_changes(store: Any, old: Snapshot, new: Snapshot, requires_latest: bool = False) -> list[Change]:
    """The dataset changes between two stored revisions (`hubwatch diff`): their stored summaries compared (a
    revision stored without one summarized from its snapshot); [] for a model."""
    if not is_dataset(new.repo_id):
        return []
    before = load_summary(store, old.repo_id, old.sha) or summary_of(old)
    after = load_summary(store, new.repo_id, new.sha) or summary_of(new)
    return dataset_differ.diff(before, after, split_repo_key(new.repo_id)[1], requires_latest)


def stored_table(store: Any, new: Revision, old: Revision | None = None) -> dict[str, Any] | None:
    """The dataset table (dataset_table.py) of a stored revision against `old`, or against its parent when `old`
    is None (a baseline: against nothing), from the revisions' stored summaries (a revision stored without one
    summarized from its stored snapshot): what the compare page shows, and the revision page for a revision
    ingested before its event carried a table. None for a model, and where it cannot be computed: a parent that
    is neither summarized nor stored."""
    if not is_dataset(new.repo_id):
        return None
    after = _stored_summary(store, new)
    if old is not None:
        before: dict[str, Any] | None = _stored_summary(store, old)
    elif new.is_baseline or not new.parent_sha:
        before = None
    else:
        before = load_summary(store, new.repo_id, new.parent_sha)
        if before is None:
            try:
                before = _stored_summary(store, store.history.find_revision(new.repo_id, new.parent_sha))
            except RevisionNotStored:
                return None
    return dataset_table(before, after)


def _stored_summary(store: Any, revision: Revision) -> dict[str, Any]:
    from tracker.revision.stored import load_snapshot

    return load_summary(store, revision.repo_id, revision.sha) or summary_of(load_snapshot(store, revision))


def tables_reader(store: Any) -> Callable[[Revision | None, Revision], dict[str, Any] | None]:
    """For the pages and the API (feeds may not import the tracker): (a stored revision or None, a stored
    revision) -> the dataset table of the second against the first (None: against its parent)."""

    def table(old: Revision | None, new: Revision) -> dict[str, Any] | None:
        return stored_table(store, new, old)

    return table


def dataset_events(repo_id: str, sha: str, changes: list[Change], table: dict[str, Any] | None = None) -> list[NewEvent]:
    """Each dataset change of notice or above as an event of its own `dataset.*` kind (told apart by its path);
    `table`: the revision's dataset table (dataset_table.py), carried by each as its payload's `dataset`, so a
    webhook subscribed to `dataset.*` kinds gets the rows and schema diff as the revision's event does."""
    events = [change_event(repo_id, sha, c.detail["event"], c, c.path) for c in changes
              if c.kind is ChangeKind.DATASET and c.severity >= Severity.NOTICE and "event" in c.detail]
    return [replace(e, payload={**e.payload, "dataset": table}) for e in events] if table else events


def is_dataset(repo_id: str) -> bool:
    """Whether a stored key names a dataset repo (`datasets/org/name`)."""
    return split_repo_key(repo_id)[0] == "dataset"
