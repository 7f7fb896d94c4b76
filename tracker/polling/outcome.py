"""What one poll of one watch came to, as the pipeline reports it and the pollers act on it (the pipeline
builds it; polling reads it: the type lives here, below the pipeline, so polling never imports the ingest)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracker.revision.changes import Change


@dataclass
class IngestedRevision:
    """One revision a poll stored: its commit, its titles and the changes it carried."""

    sha: str
    title: str
    event_title: str
    changes: list[Change]
    is_baseline: bool


@dataclass
class PollOutcome:
    """What one poll of one watch did. `status`: unchanged | ingested | failed."""

    repo_id: str
    branch: str
    status: str
    head_sha: str | None = None
    revisions: list[IngestedRevision] = field(default_factory=list)
    error: str | None = None
    storage_error: str | None = None  # the database could not be written during this poll
    duration_ms: int = 0
    reach_missed: bool = False  # the commit asked to be reached is not on the branch (history rewritten)
    stamped: bool = False  # unchanged, recorded by one UPDATE: the watch given to `poll` is the stored row now
    repo_state: str = "active"  # what the Hub's answer told of the repo itself (storage/kinds.py REPO_STATES)
    previous_state: str = "active"  # the watch's state before this poll: a change is announced
    repo_meta: dict[str, Any] | None = None  # the head's private/gated, when the head was read
    answered_id: str | None = None  # the repo id the Hub's head answer named (another after a rename)
    notes: list[str] = field(default_factory=list)  # repo-level facts recorded without a commit (made private, gated)
    unread: list[str] = field(default_factory=list)  # files the Hub refused in this poll (a gated repo): not read
    history_moved_to: str | None = None  # a followed rename: the watch and its history are under this name now
    move_refused: str | None = None  # a followed rename whose history could not move (the new name holds another)

    @property
    def state_changed(self) -> bool:
        return self.repo_state != self.previous_state

    @property
    def failed(self) -> bool:
        return self.status == "failed"
