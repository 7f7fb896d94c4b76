"""What the OSV-compatible API and the offline OSV database read: hubwatch's own records by id, by repo and
by modification time, the records whose GIT range holds a stored commit, and the upstream OSV advisories linked
to the revisions that introduced the records.

Reads only; the rows are written by the advisory check (storage/advisories.py). Every method answers many
keys in one query: a batch of a thousand purls is matched by one statement over the stored commit graph
(`matching`), not a query per purl, and reads the match index rather than the records.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from storage.models import AdvisoryLink, OwnAdvisory, Revision
from storage.sessions import EngineStore

RANGE_COLUMNS = (OwnAdvisory.id, OwnAdvisory.repo_id, OwnAdvisory.revision_id, OwnAdvisory.sha, OwnAdvisory.fixed_sha,
                 OwnAdvisory.modified, OwnAdvisory.withdrawn, OwnAdvisory.last_affected_sha)

# Bound parameters per IN list: under SQLite's default limit (32,766) with room for the rest of the query.
IN_CHUNK = 5000


# The asks travel as one JSON parameter, a list of [k, repo, sha, limit], read back as a table q(k, repo, at, lim):
# a thousand asks as a VALUES list would be four thousand bound parameters, which SQLAlchemy spends longer
# compiling than the database spends answering.
_ASKED = {
    "sqlite": "SELECT CAST(json_extract(value, '$[0]') AS INTEGER) AS k, json_extract(value, '$[1]') AS repo, "
              "json_extract(value, '$[2]') AS at, CAST(json_extract(value, '$[3]') AS INTEGER) AS lim FROM json_each(:asks)",
    "postgresql": "SELECT (v ->> 0)::int AS k, v ->> 1 AS repo, v ->> 2 AS at, (v ->> 3)::int AS lim "
                  "FROM json_array_elements(CAST(:asks AS json)) AS e(v)",
}


def _asked(asks: Sequence[tuple[int, Ask]], dialect: str) -> Any:
    """The asks as a table q(k, repo, at, lim), named in a WITH."""
    rows = json.dumps([[k, a.repo_id, a.sha, a.limit] for k, a in asks])
    text = sa.text(_ASKED[dialect]).bindparams(asks=rows)
    return text.columns(sa.column("k", sa.Integer), sa.column("repo", sa.String), sa.column("at", sa.String),
                        sa.column("lim", sa.Integer)).cte("q")


def _limited(rows: Any, order: Sequence[Any]) -> Any:
    """`rows` (k, lim, then RANGE_COLUMNS' names) cut to each ask's first `lim` by `order`, ordered by ask."""
    rank = sa.func.row_number().over(partition_by=rows.c.k, order_by=[rows.c[o] for o in order]).label("rn")
    numbered = select(*rows.c, rank).subquery("numbered")
    names = [c.key for c in RANGE_COLUMNS]
    return (select(numbered.c.k, *(numbered.c[n] for n in names)).where(numbered.c.rn <= numbered.c.lim)
            .order_by(numbered.c.k, *(numbered.c[o] for o in order)))


def _placed_query(asks: Sequence[tuple[int, Ask]], dialect: str) -> Any:
    """The records whose range holds each ask's commit (see OsvIndexStore.matching)."""
    q = _asked(asks, dialect)
    rev = Revision.__table__
    seed = (select(q.c.k, q.c.at, q.c.lim, rev.c.repo_id.label("repo"), rev.c.sha, rev.c.parent_sha.label("parent"))
            .join(rev, sa.and_(rev.c.sha == q.c.at, sa.or_(q.c.repo.is_(None), rev.c.repo_id == q.c.repo))))
    anc = seed.cte("anc", recursive=True)
    step = rev.alias("step")
    anc = anc.union(select(anc.c.k, anc.c.at, anc.c.lim, step.c.repo_id, step.c.sha, step.c.parent_sha)
                    .join(step, sa.and_(step.c.repo_id == anc.c.repo, step.c.sha == anc.c.parent)))
    own = OwnAdvisory.__table__
    fixed, last = anc.alias("fixed_at"), anc.alias("last_at")
    fixed_held = sa.exists().where(fixed.c.k == anc.c.k, fixed.c.repo == anc.c.repo, fixed.c.sha == own.c.fixed_sha)
    past_last = sa.exists().where(last.c.k == anc.c.k, last.c.repo == anc.c.repo, last.c.sha == own.c.last_affected_sha,
                                  own.c.last_affected_sha != anc.c.at)
    rows = (select(anc.c.k, anc.c.lim, *(own.c[c.key] for c in RANGE_COLUMNS))
            .join(own, sa.and_(own.c.repo_id == anc.c.repo, own.c.sha == anc.c.sha))
            .where(own.c.withdrawn.is_(False), ~fixed_held, ~past_last)).subquery("placed")
    return _limited(rows, ("repo_id", "id"))


def _listed_query(asks: Sequence[tuple[int, Ask]], dialect: str) -> Any:
    """Every record of each ask's repo."""
    q = _asked(asks, dialect)
    own = OwnAdvisory.__table__
    rows = (select(q.c.k, q.c.lim, *(own.c[c.key] for c in RANGE_COLUMNS))
            .join(own, own.c.repo_id == q.c.repo).where(own.c.withdrawn.is_(False))).subquery("listed")
    return _limited(rows, ("id",))


def _chunks(values: Iterable[str | int]) -> Iterable[list]:
    items = sorted(set(values), key=str)
    for start in range(0, len(items), IN_CHUNK):
        yield items[start : start + IN_CHUNK]


@dataclass(frozen=True)
class OwnRange:
    """What matching a query needs of an own record, read from its row's columns, never the record: a batch over
    ten thousand records parses no JSON. An own record has one GIT range, introduced at the row's `sha` and closed
    at its `fixed_sha` or, where no fix is known, its `last_affected_sha` (tracker/advisories/own.py writes the
    events and storage/advisories.py the columns from the same record): `events` is that range."""

    id: str
    repo_id: str
    revision_id: int
    sha: str
    fixed_sha: str | None
    modified: str
    withdrawn: bool
    last_affected_sha: str | None = None

    @property
    def events(self) -> list[dict[str, str]]:
        closed = [{"fixed": self.fixed_sha}] if self.fixed_sha else []
        closed += [{"last_affected": self.last_affected_sha}] if self.last_affected_sha else []
        return [{"introduced": self.sha}, *closed]


@dataclass(frozen=True)
class Ask:
    """One query to match: records of `repo_id` (None: every repo holding `sha`) whose range holds `sha` (None:
    every record of the repo), the first `limit` of them in (repo, id) order."""

    repo_id: str | None
    sha: str | None
    limit: int


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
        out: dict[str, list[OwnRange]] = {}
        with self.session() as s:
            for chunk in _chunks(repo_ids):
                query = select(*RANGE_COLUMNS).where(col(OwnAdvisory.repo_id).in_(chunk)).order_by(OwnAdvisory.id)
                for row in s.exec(query):
                    out.setdefault(row[1], []).append(OwnRange(*row))
        return out

    def matching(self, asks: Sequence[Ask]) -> list[list[OwnRange]]:
        """Per ask, in order: the records it finds, withdrawn ones left out, at most its `limit`, by (repo, id).

        Asks with a commit are answered by one query for all of them: each commit's stored ancestors (a recursive
        walk of `parent_sha` within its repo), joined to the records introduced at one of them on the match index,
        less those fixed at one of them or last affected at one before it. Asks without a commit (a repo's every
        record) by one more. Nothing is read per ask, and no record's JSON is read at all."""
        found: list[list[OwnRange]] = [[] for _ in asks]
        placed = [(k, a) for k, a in enumerate(asks) if a.sha is not None and a.limit > 0]
        listed = [(k, a) for k, a in enumerate(asks) if a.sha is None and a.repo_id is not None and a.limit > 0]
        dialect = self.engine.dialect.name
        statements = [_placed_query(placed, dialect) if placed else None, _listed_query(listed, dialect) if listed else None]
        with self.session() as s:
            for statement in (st for st in statements if st is not None):
                for k, *row in s.exec(statement):
                    found[k].append(OwnRange(*row))
        return found

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
