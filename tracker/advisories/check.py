"""One revision's advisory check: what the ingest (service.py) and the re-check (recheck.py) both write."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from storage.advisories import NewAdvisoryCheck, write_check
from storage.models import Revision
from tracker.advisories.advice import LoaderAdvice
from tracker.advisories.facts import RepoFacts
from tracker.advisories.lookup import Match


@dataclass
class RevisionCheck:
    """One revision's advisory check, ready to be written (see `write`)."""

    repo_id: str
    sha: str
    facts: RepoFacts
    advice: LoaderAdvice
    matches: list[Match]
    own: list[dict[str, Any]]
    new: NewAdvisoryCheck
    checked_at: datetime

    @property
    def pending(self) -> str | None:
        """Why OSV could not be asked (the revision will be asked again), or None."""
        return self.new.pending_reason

    def write(self, session: Any, revision: Revision) -> None:
        """An extra write for Store.save_revision: the rows join the new revision's transaction."""
        assert revision.id is not None
        write_check(session, revision.id, self.new, self.checked_at, new_revision=True)

    def summary(self) -> dict[str, Any]:
        """A small JSON summary, e.g. for the revision event's payload."""
        return {
            "advice": self.advice.sentence,
            "osv_matches": sorted({m.advisory.key for m in self.matches}),
            "own_advisories": [r["id"] for r in self.own],
            "pending": self.pending,
        }
