"""Listing state: author (org/user) watches and the high-water mark of each listing scope.

The listing pass (tracker/polling/listing.py) reads the Hub's models sorted by last modification back to the
mark stored here; an author watch turns every model the listing shows for that author into a Watch
(source "author") the first time it is seen.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, func, select

from storage.errors import WatchExists
from storage.models import AuthorWatch, ListingState, Watch
from storage.sessions import EngineStore

ALL_MODELS = "*"  # the scope of the listing of every model (no author filter)
ALL_DATASETS = "datasets:*"  # the scope of the listing of every dataset (the individually watched datasets)
DATASET_PREFIX = "datasets/"  # a dataset's watch is keyed datasets/org/name (storage.kinds.repo_key)
AUTHOR_SOURCE = "author"  # Watch.source of the watches an author watch made


def author_scope(author: str) -> str:
    return f"author:{author}"


class ListingStore(EngineStore):
    """Author watches, the watches they discover, and the listing high-water marks."""

    # -- author watches ---------------------------------------------------------------------------

    def add_author_watch(self, author: str, interval_s: int, source: str = "cli") -> AuthorWatch:
        with self.session() as s:
            if s.exec(select(AuthorWatch).where(AuthorWatch.author == author)).first() is not None:
                raise WatchExists(f"{author}/* is already watched")
            watch = AuthorWatch(author=author, interval_s=interval_s, source=source, created_at=self.clock())
            s.add(watch)
            try:
                s.commit()
            except IntegrityError as err:  # another process added it a moment ago
                raise WatchExists(f"{author}/* is already watched") from err
            return watch

    def list_author_watches(self) -> list[AuthorWatch]:
        with self.session() as s:
            return list(s.exec(select(AuthorWatch).order_by(AuthorWatch.author)))

    def remove_author_watch(self, author: str) -> int:
        """Stop following the author: its author watch and the watches it made go (history stays).
        Returns how many watches went, the author watch included; 0 when it was not watched."""
        with self.session() as s:
            found = s.exec(select(AuthorWatch).where(AuthorWatch.author == author)).first()
            if found is None:
                return 0
            made = list(
                s.exec(
                    select(Watch).where(Watch.source == AUTHOR_SOURCE, col(Watch.repo_id).startswith(f"{author}/", autoescape=True))
                )
            )
            for row in [found, *made]:
                s.delete(row)
            state = s.get(ListingState, author_scope(author))
            if state is not None:
                s.delete(state)
            s.commit()
            return 1 + len(made)

    def add_discovered_watches(self, author: str, repo_ids: Iterable[str], branch: str = "main") -> list[str]:
        """Watch each of the author's repos not watched yet on `branch` (at the author watch's interval);
        returns the repo ids added. Repos another process added meanwhile are skipped, not errors."""
        with self.session() as s:
            followed = s.exec(select(AuthorWatch).where(AuthorWatch.author == author)).first()
            if followed is None:
                return []
            wanted = sorted({r for r in repo_ids if r.startswith(f"{author}/")})
            known = set(s.exec(select(Watch.repo_id).where(Watch.branch == branch, col(Watch.repo_id).in_(wanted))))
            interval_s = followed.interval_s
        added = []
        for repo_id in wanted:
            if repo_id in known:
                continue
            with self.session() as s:
                s.add(
                    Watch(repo_id=repo_id, branch=branch, interval_s=interval_s, source=AUTHOR_SOURCE, created_at=self.clock())
                )
                try:
                    s.commit()
                except IntegrityError:
                    continue
            added.append(repo_id)
        return added

    def mark_author_listed(self, author: str, at: datetime) -> None:
        with self.session() as s:
            found = s.exec(select(AuthorWatch).where(AuthorWatch.author == author)).first()
            if found is not None:
                found.last_listed_at = at
                s.add(found)
                s.commit()

    def mark_authors_listed(self, authors: Iterable[str], at: datetime) -> None:
        """Several authors listed at once (read from the listing of every model): one UPDATE."""
        wanted = sorted(set(authors))
        if not wanted:
            return
        table = AuthorWatch.__table__  # type: ignore[attr-defined]
        with self.engine.begin() as conn:
            for start in range(0, len(wanted), 500):
                conn.execute(sa.update(table).where(table.c.author.in_(wanted[start : start + 500])).values(last_listed_at=at))

    # -- watches the listing looks at ------------------------------------------------------------

    def watches_of(self, repo_ids: Iterable[str]) -> list[Watch]:
        """The watches (every branch) of the named repos: a listing pass reads only those it saw move."""
        wanted = sorted(set(repo_ids))
        out: list[Watch] = []
        with self.session() as s:
            for start in range(0, len(wanted), 500):
                out += s.exec(select(Watch).where(col(Watch.repo_id).in_(wanted[start : start + 500])))
        return out

    def watches_to_retry(self) -> list[tuple[str, str]]:
        """(repo_id, branch) of the watches whose last poll failed and whose retry is due now: a move the
        listing reported once is not reported again, so the listing job retries them itself."""
        now = self.clock()
        query = select(Watch.repo_id, Watch.branch).where(
            Watch.error_count > 0, sa.or_(col(Watch.next_retry_at).is_(None), col(Watch.next_retry_at) <= now)
        )
        with self.session() as s:
            return [(repo_id, branch) for repo_id, branch in s.exec(query)]

    def wake_parked(self, repo_ids: Iterable[str]) -> int:
        """The watches of these repos parked in a gone or disabled state (storage/kinds.py PARKED_STATES): due again
        now, as the listing or a Hub webhook shows the repo again. Returns how many were woken."""
        from storage.kinds import PARKED_STATES

        wanted = sorted(set(repo_ids))
        if not wanted:
            return 0
        query = sa.update(Watch).where(col(Watch.repo_id).in_(wanted), col(Watch.repo_state).in_(PARKED_STATES),
                                       col(Watch.next_retry_at).is_not(None)).values(next_retry_at=None)
        with self.engine.begin() as conn:
            return conn.execute(query).rowcount

    def watch_count(self, except_authors: Iterable[str] = (), datasets: bool | None = None) -> int:
        """How many watches there are, not counting repos of `except_authors`; `datasets` True: only those of datasets
        (`datasets/org/name`), False: only those of models, None: both."""
        query = select(func.count()).select_from(Watch)
        for author in except_authors:
            query = query.where(~col(Watch.repo_id).startswith(f"{author}/", autoescape=True))
        if datasets is not None:
            of_dataset = col(Watch.repo_id).startswith(DATASET_PREFIX, autoescape=True)
            query = query.where(of_dataset if datasets else ~of_dataset)
        with self.session() as s:
            return int(s.exec(query).one())

    # -- high-water marks -------------------------------------------------------------------------

    def listing_state(self, scope: str) -> ListingState | None:
        with self.session() as s:
            return s.get(ListingState, scope)

    def listing_states(self) -> list[ListingState]:
        with self.session() as s:
            return list(s.exec(select(ListingState).order_by(ListingState.scope)))

    def record_listing_pass(
        self, scope: str, high_water_at: datetime | None, high_water_ids: Iterable[str], error: str | None = None,
        pages: int | None = None,
    ) -> ListingState:
        """A pass over `scope` finished: its new mark (a mark never moves back), or, with `error`, the
        reason it was cut (the mark then stays where it was); `pages`: the Hub pages it read (None: left as
        it was, for a scope read from another scope's pass)."""
        now = self.clock()
        with self.session() as s:
            state = s.get(ListingState, scope) or ListingState(scope=scope, high_water_ids=[])
            if error is None and high_water_at is not None:
                ids = sorted(set(high_water_ids))
                if state.high_water_at is None or high_water_at > state.high_water_at:
                    state.high_water_at, state.high_water_ids = high_water_at, ids
                elif high_water_at == state.high_water_at:
                    state.high_water_ids = sorted(set(state.high_water_ids) | set(ids))
            state.passes += 1
            if pages is not None:
                state.pages = pages
            state.last_pass_at = now
            state.last_error = error
            s.add(state)
            s.commit()
            return state
