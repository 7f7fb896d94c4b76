"""A repo renamed on the Hub: its history moves to the new name, in the caller's transaction, and the old name
becomes an alias that readers answer under. Never into an unrelated history: when anything is stored under the
new name already, nothing moves and the reason comes back.

    moved = move_history(session, "org/old", "org/new", uid, now)   # the caller commits
    moved.refused    # None, or why nothing moved
    RenameStore(engine).current_name("org/old")   # "org/new" while nothing is stored under "org/old" again
    RenameStore(engine).record_short_name("datasets/wikitext", "datasets/Salesforce/wikitext")  # the Hub's redirect
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from storage.models import RepoAlias, Watch
from storage.sessions import EngineStore


@dataclass(frozen=True)
class HistoryMove:
    """What a move did: rows moved per table, or `refused` (why nothing moved)."""

    old: str
    new: str
    moved: dict[str, int] = field(default_factory=dict)
    refused: str | None = None


def _columns() -> list[tuple[str, Any]]:
    """Every column that holds a repo's id as its own (table name, column), loading the tables on first use. A
    derivative's own `repo_id` is the base's listing of it and stays: the next pass lists it by its new name."""
    from storage.models import (
        AdvisoryRecheck,
        AdvisoryState,
        Derivative,
        DerivativeFollow,
        Event,
        OwnAdvisory,
        RepoStateChange,
        RepoSummaryRow,
        Revision,
    )

    return [
        ("watch", Watch.repo_id), ("revision", Revision.repo_id), ("event", Event.repo_id),
        ("repo_summary", RepoSummaryRow.repo_id), ("repo_state_change", RepoStateChange.repo_id),
        ("own_advisory", OwnAdvisory.repo_id), ("advisory_state", AdvisoryState.repo_id),
        ("advisory_recheck", AdvisoryRecheck.repo_id), ("derivative_follow", DerivativeFollow.base_repo_id),
        ("derivative", Derivative.base_repo_id),
    ]


def stored_under(session: Session, repo_id: str) -> list[str]:
    """The tables holding rows of `repo_id` (a watch, revisions, events...): empty when nothing is stored under it."""
    found = []
    for table, column in _columns():
        if session.execute(sa.select(column).where(column == repo_id).limit(1)).first() is not None:
            found.append(table)
    return found


def move_history(session: Session, old: str, new: str, uid: str | None, now: datetime) -> HistoryMove:
    """Move every row of `old` to `new` in the caller's transaction (the caller commits), and keep `old` as an alias
    of `new` (aliases that named `old` name `new` now). Refused, with nothing changed, when anything is stored under
    `new` already: another watch of it, or another repo's history, is never merged into this one."""
    if old == new:
        return HistoryMove(old, new, refused="the same name")
    session.flush()  # the caller's pending rows (the move's event) move with the rest
    there = stored_under(session, new)
    if there:
        return HistoryMove(old, new, refused=f"hubwatch already holds {', '.join(there)} rows under {new}: "
                                              "not merged into that history")
    moved = {}
    for table, column in _columns():
        result = session.execute(sa.update(column.class_).where(column == old).values({column.key: new})
                                 .execution_options(synchronize_session="fetch"))
        if result.rowcount:
            moved[table] = result.rowcount
    moved_subs = _subscriptions(session, old, new)
    if moved_subs:
        moved["subscription"] = moved_subs
    session.execute(sa.update(RepoAlias).where(col(RepoAlias.repo_id) == old).values(repo_id=new))
    session.execute(sa.delete(RepoAlias).where(col(RepoAlias.old_repo_id).in_([old, new])))
    session.add(RepoAlias(old_repo_id=old, repo_id=new, uid=uid, moved_at=now))
    return HistoryMove(old, new, moved)


def _subscriptions(session: Session, old: str, new: str) -> int:
    """Subscriptions made through the API that name `old` exactly name `new` beside it (a pattern such as `org/*`
    is left as written; the config file's are the file's, synced from it)."""
    from storage.models import Subscription

    count = 0
    for sub in session.exec(select(Subscription).where(Subscription.source != "config")):
        if old in sub.repos and new not in sub.repos:
            sub.repos = [*sub.repos, new]
            session.add(sub)
            count += 1
    return count


class RenameStore(EngineStore):
    """The names renamed repos had: what readers asked for an old name answer with."""

    def current_name(self, repo_id: str) -> str | None:
        """The name `repo_id`'s history moved to, while nothing is stored under `repo_id` again; else None."""
        with self.session() as s:
            alias = s.get(RepoAlias, repo_id)
            if alias is None or stored_under(s, repo_id):
                return None
            return alias.repo_id

    def record_short_name(self, short: str, key: str) -> bool:
        """A dataset's canonical short name (`datasets/wikitext`, no org) the Hub was seen to redirect to `key`
        (`datasets/Salesforce/wikitext`), kept as an alias of it, so readers asked for the short name (the Renovate
        datasource, the pages) answer with the org name's history. Nothing is ever stored under a short name; a
        later redirect elsewhere replaces the alias. True when it was new or changed. ValueError for a `short` that
        is not a short dataset key or a `key` that is not a dataset's ORG/NAME key."""
        from storage.kinds import is_repo_key, repo_type_of, short_dataset_name

        if not short.startswith("datasets/") or short_dataset_name(short) is None:
            raise ValueError(f"{short!r} is not a dataset's short name key (datasets/NAME)")
        if not is_repo_key(key) or repo_type_of(key) != "dataset":
            raise ValueError(f"{key!r} is not a dataset's key (datasets/ORG/NAME)")
        with self.session() as s:
            alias = s.get(RepoAlias, short)
            if alias is not None and alias.repo_id == key:
                return False
            if alias is None:
                s.add(RepoAlias(old_repo_id=short, repo_id=key, uid=None, moved_at=self.clock()))
            else:
                alias.repo_id, alias.moved_at = key, self.clock()
                s.add(alias)
            try:
                s.commit()
            except sa.exc.IntegrityError:  # another process recorded it first: theirs stands
                s.rollback()
                return False
            return True

    def old_names(self, repo_id: str) -> list[str]:
        """The names the repo had before, oldest move first."""
        with self.session() as s:
            query = select(RepoAlias).where(RepoAlias.repo_id == repo_id).order_by(col(RepoAlias.moved_at))
            return [a.old_repo_id for a in s.exec(query)]
