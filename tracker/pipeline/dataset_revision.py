"""The seam where a dataset revision is summarised: the ingest hands each revision of a dataset repo (its file
tree, its card, and its parent's) to "the dataset summary", whose changes join the revision's.

What a dataset revision is beyond its files (the card's YAML, every Parquet footer read by range, rows, columns,
configs and splits; tracker/formats/parquet.py, tracker/formats/dataset_card.py, tracker/differs/dataset.py) is
the summary's business. Until it is wired in (`summarize_dataset`), a dataset revision stores its file tree and
its card (README.md, downloaded as a model card is), and the file-level changes apply.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from storage.kinds import split_repo_key
from tracker.revision.classify import MODEL_CARD

if TYPE_CHECKING:
    from storage.front import Storage
    from tracker.hub.client import HubClient
    from tracker.pipeline.snapshot_io import FetchedSnapshot
    from tracker.revision.changes import Change
    from tracker.revision.snapshot import FileEntry, Snapshot


@dataclass(frozen=True)
class DatasetRevision:
    """One dataset revision as the summary gets it, before the revision's one write: the Hub client (Parquet
    footers by range: `hub.open_range(repo_id, sha, path, size)`), the store (what was read before, by blob), the
    fetched snapshot (its files, the card's bytes; `fetched.new_blobs` and `new_file_scans` take what is to be
    written with the revision) and the parent's snapshot (None for a baseline)."""

    hub: HubClient
    store: Storage
    fetched: FetchedSnapshot
    parent: Snapshot | None

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


def summarize_dataset(revision: DatasetRevision) -> list[Change]:
    """The dataset summary: no changes beyond the file-level ones yet (tracker/differs/dataset.py fills this)."""
    return []


def is_dataset(repo_id: str) -> bool:
    """Whether a stored key names a dataset repo (`datasets/org/name`)."""
    return split_repo_key(repo_id)[0] == "dataset"
