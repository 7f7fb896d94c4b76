"""Followed families: which bases have their derivatives followed, and each derivative as last checked.
Callers get detached rows back; events are written with the row changes they announce, in one transaction."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import col, select

from storage.event_log import NewEvent, write_events
from storage.models import Derivative, DerivativeFollow
from storage.sessions import EngineStore


@dataclass(frozen=True)
class CheckedDerivative:
    """What one pass learned of one derivative (`problem` set: what could not be checked, the rest kept)."""

    repo_id: str
    relation: str
    downloads: int
    head_sha: str | None
    sources: dict[str, str] = field(default_factory=dict)
    parts: dict[str, Any] = field(default_factory=dict)
    lineage: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None


class DerivativeStore(EngineStore):
    """Follows (one per base) and the derivatives each pass checked."""

    def follow(self, base_repo_id: str, relations: Iterable[str], max_derivatives: int, source: str = "cli") -> DerivativeFollow:
        """Follow the base's derivatives of `relations` (a follow already there takes the new settings)."""
        with self.session() as s:
            row = s.get(DerivativeFollow, base_repo_id)
            if row is None:
                row = DerivativeFollow(base_repo_id=base_repo_id, created_at=self.clock(), source=source)
            row.relations, row.max_derivatives = sorted(set(relations)), max_derivatives
            s.add(row)
            s.commit()
            return row

    def sync_config_follows(self, wanted: Iterable[tuple[str, tuple[str, ...], int]]) -> None:
        """Make the follows the config file declares exist with its settings."""
        for base, relations, limit in wanted:
            self.follow(base, relations, limit, source="config")

    def unfollow(self, base_repo_id: str) -> bool:
        with self.session() as s:
            row = s.get(DerivativeFollow, base_repo_id)
            if row is None:
                return False
            s.delete(row)
            s.commit()
            return True

    def get_follow(self, base_repo_id: str) -> DerivativeFollow | None:
        with self.session() as s:
            return s.get(DerivativeFollow, base_repo_id)

    def follows(self) -> list[DerivativeFollow]:
        with self.session() as s:
            return list(s.exec(select(DerivativeFollow).order_by(col(DerivativeFollow.base_repo_id))))

    def derivatives(self, base_repo_id: str, listed_only: bool = True) -> list[Derivative]:
        """The base's derivatives, most downloaded first."""
        with self.session() as s:
            query = select(Derivative).where(Derivative.base_repo_id == base_repo_id)
            if listed_only:
                query = query.where(col(Derivative.listed).is_(True))
            return list(s.exec(query.order_by(col(Derivative.downloads).desc(), col(Derivative.repo_id))))

    def rows_of(self, repo_id: str) -> list[Derivative]:
        """The rows that follow `repo_id` as a derivative (one per base whose family lists it), listed first."""
        with self.session() as s:
            query = select(Derivative).where(Derivative.repo_id == repo_id)
            rows = list(s.exec(query.order_by(col(Derivative.base_repo_id))))
        return sorted(rows, key=lambda r: not r.listed)

    def record_pass(
        self,
        base_repo_id: str,
        checked: list[CheckedDerivative],
        report: dict[str, Any],
        events: list[tuple[NewEvent, int | None, str | None]],
        announced_sha: str | None,
        error: str | None = None,
    ) -> None:
        """One pass, in one transaction: the derivatives checked (those no longer listed are kept, marked
        unlisted), the pass's report, the events it raised on the base's feed (each with the base revision id
        and sha it is about, or None), and the base revision announced through."""
        now = self.clock()
        with self.session() as s:
            follow = s.get(DerivativeFollow, base_repo_id)
            rows = {r.repo_id: r for r in s.exec(select(Derivative).where(Derivative.base_repo_id == base_repo_id))}
            seen = set()
            for item in checked:
                seen.add(item.repo_id)
                row = rows.get(item.repo_id) or Derivative(base_repo_id=base_repo_id, repo_id=item.repo_id,
                                                           relation=item.relation, first_seen_at=now)
                row.relation, row.downloads, row.listed, row.checked_at = item.relation, item.downloads, True, now
                row.problem = item.problem
                if item.head_sha is not None:
                    row.head_sha, row.sources, row.parts, row.lineage = item.head_sha, item.sources, item.parts, item.lineage
                row.sources, row.parts, row.lineage = row.sources or {}, row.parts or {}, row.lineage or {}
                s.add(row)
            for repo_id, row in rows.items():
                if repo_id not in seen and row.listed and error is None:
                    row.listed = False
                    s.add(row)
            if follow is not None:
                follow.last_pass_at, follow.last_error, follow.last_report = now, error, report
                if announced_sha is not None:
                    follow.announced_sha = announced_sha
                s.add(follow)
            for event, revision_id, sha in events:
                write_events(s, base_repo_id, [event], now, revision_id=revision_id, sha=sha)
            s.commit()

    def tree(self, base_repo_id: str) -> dict[str, Any] | None:
        """The base's family as `hubwatch tree` and the derivatives page show it (None: not followed): per
        derivative its relation, publisher, downloads, head and each part's lineage; the last pass's report."""
        follow = self.get_follow(base_repo_id)
        if follow is None:
            return None
        rows = []
        for d in self.derivatives(base_repo_id):
            rows.append({"repo_id": d.repo_id, "relation": d.relation, "publisher": d.repo_id.split("/", 1)[0],
                         "downloads": d.downloads, "head_sha": d.head_sha, "problem": d.problem,
                         "checked_at": d.checked_at, "parts": dict(d.lineage or {})})
        return {"base_repo_id": base_repo_id, "relations": list(follow.relations), "limit": follow.max_derivatives,
                "last_pass_at": follow.last_pass_at, "last_error": follow.last_error,
                "report": follow.last_report or {}, "derivatives": rows}
