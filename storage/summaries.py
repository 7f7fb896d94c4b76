"""Per-repo summaries kept on write: one row per repo with its counts and newest revision, updated in the
transaction that writes the revision or events, so that listings and totals never group or count over
the history tables.

Each update is one atomic upsert whose new values are computed by the database from the stored row
(`revisions = revisions + 1`, the newest revision by (committed_at, id)): two writers of one repo on
PostgreSQL queue on the row instead of losing an increment.
"""

from __future__ import annotations

import importlib
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session

from storage.models import RepoSummaryRow, Revision

_TABLE: sa.Table = RepoSummaryRow.__table__  # type: ignore[attr-defined]
_COUNTS = ("revisions", "changes", "events")


def add_revision(session: Session, revision: Revision, changes: int) -> None:
    """Count a new revision (with its `changes`) into its repo's summary; it becomes the repo's newest
    when it is, as the history orders revisions (committed_at, then id, newest first)."""
    assert revision.id is not None, "flush the revision first"
    session.execute(_statements(session)[0], {
        "repo_id": revision.repo_id, "revisions": 1, "changes": changes, "events": 0,
        "latest_revision_id": revision.id, "latest_sha": revision.sha,
        "last_committed_at": revision.committed_at, "last_ingested_at": revision.ingested_at,
    })


def add_events(session: Session, repo_id: str, count: int) -> None:
    """Count `count` new events of the repo into its summary."""
    if count:
        session.execute(_statements(session)[1], {"repo_id": repo_id, "revisions": 0, "changes": 0, "events": count})


_BUILT: dict[str, tuple[Any, Any]] = {}


def _statements(session: Session) -> tuple[Any, Any]:
    """The two upserts (a revision, events) for the session's database, built once: a statement built
    per call costs more in SQLAlchemy's cache-key work than the write itself."""
    dialect = session.get_bind().dialect.name
    if dialect not in _BUILT:
        if dialect not in ("sqlite", "postgresql"):
            raise NotImplementedError(f"repo summaries need an upsert: {dialect} is neither SQLite nor PostgreSQL")
        # the dialect's module, imported for the database in use only (PostgreSQL's costs 30 ms to import)
        insert: Any = importlib.import_module(f"sqlalchemy.dialects.{dialect}").insert
        _BUILT[dialect] = (_upsert(insert(_TABLE), _COUNTS, latest=True), _upsert(insert(_TABLE), ("events",), latest=False))
    return _BUILT[dialect]


def _upsert(stmt: Any, counts: tuple[str, ...], latest: bool) -> Any:
    """On a repo's first write its row as given; after, the counts added and the newest kept."""
    new, old = stmt.excluded, _TABLE.c
    update: dict[str, Any] = {k: old[k] + new[k] for k in counts}
    if latest:
        newer = sa.or_(
            old.last_committed_at.is_(None),
            new.last_committed_at > old.last_committed_at,
            sa.and_(new.last_committed_at == old.last_committed_at, new.latest_revision_id > old.latest_revision_id),
        )
        for key in ("latest_revision_id", "latest_sha", "last_committed_at"):
            update[key] = sa.case((newer, new[key]), else_=old[key])
        later = sa.or_(old.last_ingested_at.is_(None), new.last_ingested_at > old.last_ingested_at)
        update["last_ingested_at"] = sa.case((later, new.last_ingested_at), else_=old.last_ingested_at)
    return stmt.on_conflict_do_update(index_elements=[old.repo_id], set_=update)
