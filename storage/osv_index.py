"""What the OSV-compatible API and the offline OSV database read: hubwatch's own records by id, by repo and
by modification time, each repo's commit graph as stored (sha -> the revision it was diffed against), which
repos hold a commit, and the upstream OSV advisories linked to the revisions that introduced the records.

Reads only; the rows are written by the advisory check (storage/advisories.py). Every method answers many
keys in one query, so a batch of a thousand purls costs a handful of queries, not thousands.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from storage.models import AdvisoryLink, OwnAdvisory, Revision
from storage.sessions import EngineStore

# Bound parameters per IN list: under SQLite's default limit (32,766) with room for the rest of the query.
IN_CHUNK = 5000


def _chunks(values: Iterable[str | int]) -> Iterable[list]:
    items = sorted(set(values), key=str)
    for start in range(0, len(items), IN_CHUNK):
        yield items[start : start + IN_CHUNK]


@dataclass(frozen=True)
class OwnRange:
    """What matching a query needs of an own record, read as columns and two keys of the record (`modified`,
    `withdrawn`), never the whole document: a batch over ten thousand records parses no JSON. An own record has
    one GIT range, introduced at the row's `sha` and, once closed, fixed at its `fixed_sha` (tracker/advisories/
    own.py writes both from the same values): `events` is that range."""

    id: str
    repo_id: str
    revision_id: int
    sha: str
    fixed_sha: str | None
    modified: str
    withdrawn: bool

    @property
    def events(self) -> list[dict[str, str]]:
        return [{"introduced": self.sha}, *([{"fixed": self.fixed_sha}] if self.fixed_sha else [])]


@dataclass(frozen=True)
class StoredOwn:
    """An own record with the columns that say whose it is and what it is about."""

    id: str
    repo_id: str
    revision_id: int
    sha: str
    fixed_sha: str | None
    class_id: str
    severity: str
    record: dict[str, Any]


class OsvIndexStore(EngineStore):
    """Reads of own records and the commit graph for OSV queries and exports."""

    def own_by_id(self, record_id: str) -> StoredOwn | None:
        return self.own_by_ids([record_id]).get(record_id)

    def own_by_ids(self, record_ids: Iterable[str]) -> dict[str, StoredOwn]:
        out: dict[str, StoredOwn] = {}
        with self.session() as s:
            for chunk in _chunks(record_ids):
                out.update((row.id, row) for row in self._stored(s, col(OwnAdvisory.id).in_(chunk)))
        return out

    def own_ranges(self, repo_ids: Iterable[str]) -> dict[str, list[OwnRange]]:
        """repo id -> what matching needs of each of its own records, ordered by id (repos without any absent)."""
        record = col(OwnAdvisory.record)
        columns = (OwnAdvisory.id, OwnAdvisory.repo_id, OwnAdvisory.revision_id, OwnAdvisory.sha, OwnAdvisory.fixed_sha,
                   record["modified"].as_string(), record["withdrawn"].as_string())
        out: dict[str, list[OwnRange]] = {}
        with self.session() as s:
            for chunk in _chunks(repo_ids):
                query = select(*columns).where(col(OwnAdvisory.repo_id).in_(chunk)).order_by(OwnAdvisory.id)
                for rid, repo, revision_id, sha, fixed, modified, withdrawn in s.exec(query):
                    out.setdefault(repo, []).append(OwnRange(rid, repo, revision_id, sha, fixed, modified or "", bool(withdrawn)))
        return out

    def own_modified_since(self, since: datetime | None = None) -> list[StoredOwn]:
        """Every own record written at or after `since` (all without it), ordered by id. A row's `modified_at` is
        when it was last written, never before its record's `modified`: the set is a superset of the records
        whose `modified` is at or after `since`, for the caller to narrow."""
        with self.session() as s:
            return self._stored(s, col(OwnAdvisory.modified_at) >= since if since is not None else sa.true())

    @staticmethod
    def _stored(session: Session, where: Any) -> list[StoredOwn]:
        """Rows as plain values (columns, not ORM objects: ten thousand of them in an export)."""
        columns = (OwnAdvisory.id, OwnAdvisory.repo_id, OwnAdvisory.revision_id, OwnAdvisory.sha, OwnAdvisory.fixed_sha,
                   OwnAdvisory.class_id, OwnAdvisory.severity, OwnAdvisory.record)
        return [StoredOwn(*row) for row in session.exec(select(*columns).where(where).order_by(OwnAdvisory.id))]

    def commit_graphs(self, repo_ids: Iterable[str]) -> dict[str, dict[str, str | None]]:
        """repo id -> {sha: the sha of the revision it was diffed against (None for a baseline)}, every stored
        revision of every branch."""
        out: dict[str, dict[str, str | None]] = {}
        with self.session() as s:
            for chunk in _chunks(repo_ids):
                query = select(Revision.repo_id, Revision.sha, Revision.parent_sha).where(col(Revision.repo_id).in_(chunk))
                for repo_id, sha, parent in s.exec(query):
                    out.setdefault(repo_id, {})[sha] = parent
        return out

    def repos_at(self, shas: Iterable[str]) -> dict[str, set[str]]:
        """sha -> the repos that hold a stored revision at that commit."""
        out: dict[str, set[str]] = {}
        with self.session() as s:
            for chunk in _chunks(shas):
                for repo_id, sha in s.exec(select(Revision.repo_id, Revision.sha).where(col(Revision.sha).in_(chunk))):
                    out.setdefault(sha, set()).add(repo_id)
        return out

    def upstream_links(self, revision_ids: Iterable[int]) -> dict[int, list[AdvisoryLink]]:
        """revision id -> the upstream OSV advisories that affect it and concern the model (relevant links of
        status `affected`), ordered by advisory key."""
        out: dict[int, list[AdvisoryLink]] = {}
        with self.session() as s:
            for chunk in _chunks(revision_ids):
                query = (
                    select(AdvisoryLink)
                    .where(col(AdvisoryLink.revision_id).in_(chunk), AdvisoryLink.status == "affected",
                           col(AdvisoryLink.relevant).is_(True))
                    .order_by(AdvisoryLink.revision_id, AdvisoryLink.advisory_key)
                )
                for link in s.exec(query):
                    out.setdefault(link.revision_id, []).append(link)
        return out
