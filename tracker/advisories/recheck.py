"""Checking stored revisions again: the scheduled re-check of every watched head, the retry of revisions
ingested while OSV could not be asked, and the back-fill of revisions stored before advisories existed.

A re-check sends one querybatch per 1,000 distinct package versions and fetches details only for ids
new or modified; an `advisory.published` event for every advisory new or modified since the repo was
last told is written in the same transaction as the state that remembers it (so an event is never lost
nor sent twice; event ids are stable). Revisions whose result did not change are not written again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import structlog

from storage.advisories import AdvisoryStore, NewAdvisoryCheck, Told
from storage.errors import RevisionNotStored
from storage.front import Storage
from storage.models import Revision
from tracker.advisories.advice import loader_advice
from tracker.advisories.check import RevisionCheck
from tracker.advisories.events import osv_advisory_event
from tracker.advisories.facts import RepoFacts, extract_facts, model_of
from tracker.advisories.lookup import (
    Lookup,
    OsvLookup,
    advice_notes,
    matches,
    pending_reason,
    queries,
    relevant,
    told_state,
    untold,
)
from tracker.advisories.records import AdvisoryIndex
from tracker.advisories.rules import Rule
from tracker.revision.snapshot import Snapshot
from tracker.revision.stored import load_snapshot

log = structlog.get_logger(__name__)


@dataclass
class RecheckOutcome:
    repos: int = 0
    revisions: int = 0
    queries: int = 0
    querybatch_requests: int = 0
    detail_fetches: int = 0
    events: list[str] = field(default_factory=list)
    pending_cleared: int = 0
    error: str | None = None
    duration_ms: int = 0


@dataclass(frozen=True)
class _Target:
    repo_id: str
    revision_id: int
    sha: str
    head: bool


class Rechecker:
    """Re-checks, pending retries and back-fills for one store; `check` is the ingest-time check that a
    back-fill runs on each revision it reads from the store."""

    def __init__(
        self, store: Storage, db: AdvisoryStore, lookup: OsvLookup, *, rules: Sequence[Rule] | None,
        clock: Callable[[], datetime], check: Callable[..., RevisionCheck],
    ) -> None:
        self.store = store
        self.db = db
        self.lookup = lookup
        self.rules = rules
        self.clock = clock
        self.check = check

    def recheck(self, repo_ids: Iterable[str] | None = None) -> RecheckOutcome:
        """Re-query every watched head (and every pending revision): new or modified advisories are
        announced with `advisory.published`, even though the repo did not change."""
        heads = self.db.heads(repo_ids)
        targets = [_Target(h.repo_id, h.revision_id, h.sha, True) for h in heads]
        seen = {t.revision_id for t in targets}
        targets += [t for t in self._pending_targets() if t.revision_id not in seen]
        return self._check_stored(targets, emit=True)

    def recheck_due_at(self, interval_s: int) -> datetime:
        """When the next scheduled re-check is due: `interval_s` after the last one that reached OSV, or
        now if none did (so a daemon restarted more often than the interval still re-checks)."""
        done = [r.checked_at for r in self.db.rechecks().values() if r.error is None]
        return max(done) + timedelta(seconds=interval_s) if done else self.clock()

    def retry_pending(self) -> RecheckOutcome:
        """Ask OSV again about revisions ingested while it could not be asked."""
        return self._check_stored(self._pending_targets(), emit=True)

    def backfill(self, repo_ids: Iterable[str] | None = None) -> int:
        """Check stored revisions that have no facts yet, oldest first; no events (history is not news),
        but own records are made and the re-check state is seeded. Returns how many were checked."""
        wanted = list(repo_ids) if repo_ids is not None else self.store.history.repo_ids()
        done = 0
        for repo_id in wanted:
            revisions = list(reversed(self.store.history.list_revisions(repo_id)))
            have = self.db.facts(r.id for r in revisions if r.id is not None)
            for revision in revisions:
                if revision.id in have:
                    continue
                snapshot = load_snapshot(self.store, revision)
                parent = self._parent_snapshot(revision)
                changes = self.store.history.changes_by_revision([revision.id])[revision.id]  # type: ignore[list-item,index]
                check = self.check(repo_id, revision.sha, snapshot, parent, changes, revision.title)
                quiet = NewAdvisoryCheck(**{**check.new.__dict__, "events": []})
                self.db.write(revision.id, quiet)  # type: ignore[arg-type]
                done += 1
        return done

    def _pending_targets(self) -> list[_Target]:
        heads = {h.revision_id for h in self.db.heads()}
        out = []
        for row in self.db.pending():
            revision = self.db.revision(row.revision_id)
            if revision is not None:
                out.append(_Target(revision.repo_id, row.revision_id, revision.sha, row.revision_id in heads))
        return out

    def _parent_snapshot(self, revision: Revision) -> Snapshot | None:
        if revision.parent_sha is None:
            return None
        try:
            return load_snapshot(self.store, self.store.history.find_revision(revision.repo_id, revision.parent_sha))
        except RevisionNotStored:
            return None

    def _facts(self, targets: list[_Target], stored: Mapping[int, Any]) -> dict[int, RepoFacts]:
        """Each target's stored facts; read from its snapshot if it was ingested before advisories existed,
        or its facts were stored before model facts were read (they are written back with the re-check)."""
        facts: dict[int, RepoFacts] = {}
        for target in targets:
            row = stored.get(target.revision_id)
            read = RepoFacts.from_dict(row.facts) if row is not None else None
            if read is not None and read.model_facts:
                facts[target.revision_id] = read
            elif read is not None:
                revision = self.db.revision(target.revision_id)
                model = model_of(load_snapshot(self.store, revision))  # type: ignore[arg-type]
                facts[target.revision_id] = replace(read, **model)
            else:
                revision = self.db.revision(target.revision_id)
                facts[target.revision_id] = extract_facts(load_snapshot(self.store, revision))  # type: ignore[arg-type]
        return facts

    def _check_stored(self, targets: list[_Target], emit: bool) -> RecheckOutcome:
        started = time.monotonic()
        outcome = RecheckOutcome(repos=len({t.repo_id for t in targets}), revisions=len(targets))
        before = self.lookup.counts()
        stored = self.db.facts(t.revision_id for t in targets)
        facts = self._facts(targets, stored)
        wanted = queries(facts.values())
        outcome.queries = len(wanted)
        lookup = self.lookup.ask(wanted, find_withdrawn=True)
        after = self.lookup.counts()
        outcome.querybatch_requests, outcome.detail_fetches = after[0] - before[0], after[1] - before[1]
        if lookup.error is not None:
            outcome.error = lookup.error
            for repo_id in {t.repo_id for t in targets if t.head}:
                self.db.record_recheck(repo_id, None, lookup.error)
            log.warning("advisory_recheck_failed", error=lookup.error, repos=outcome.repos)
            outcome.duration_ms = int((time.monotonic() - started) * 1000)
            return outcome
        self._write_rechecks(targets, facts, stored, lookup, emit, outcome)
        outcome.duration_ms = int((time.monotonic() - started) * 1000)
        log.info("advisory_recheck_finished", repos=outcome.repos, revisions=outcome.revisions,
                 queries=outcome.queries, querybatch=outcome.querybatch_requests,
                 details=outcome.detail_fetches, events=len(outcome.events), duration_ms=outcome.duration_ms)
        return outcome

    def _write_rechecks(
        self, targets: list[_Target], facts: Mapping[int, RepoFacts], stored: Mapping[int, Any],
        lookup: Lookup, emit: bool, outcome: RecheckOutcome,
    ) -> None:
        """The rows of every target whose result changed (or that was pending), in one transaction."""
        index = self.lookup.index(lookup)
        self.db.save_osv_records(lookup.fetched)
        told = self.db.told({t.repo_id for t in targets})
        told_repos = {repo for repo, _ in told}
        pending_before = {p.revision_id for p in self.db.pending()}
        links = self.db.links_by_revision(t.revision_id for t in targets)
        checks: list[tuple[int, NewAdvisoryCheck]] = []
        for target in targets:
            quiet = not emit or (target.repo_id not in told_repos and self._is_baseline(target.revision_id))
            row = stored.get(target.revision_id)
            check = self._recheck_one(target, facts[target.revision_id], row, lookup, index, told, emit=not quiet)
            if target.revision_id in pending_before or not _same(check, row, links[target.revision_id], told):
                checks.append((target.revision_id, check))
            outcome.events += [e.event_id for e in check.events]
            if target.revision_id in pending_before and check.pending_reason is None:
                outcome.pending_cleared += 1
        self.db.write_many(checks, rechecked=[(t.repo_id, t.revision_id) for t in targets if t.head])

    def _is_baseline(self, revision_id: int) -> bool:
        revision = self.db.revision(revision_id)
        return revision is not None and revision.is_baseline

    def _recheck_one(
        self, target: _Target, facts: RepoFacts, stored: Any, lookup: Lookup, index: AdvisoryIndex,
        told: Mapping[tuple[str, str], Told], emit: bool,
    ) -> NewAdvisoryCheck:
        """The rows of one re-checked revision; its events (new or modified advisories the repo was not
        told about) are written with the state that remembers them, in one transaction."""
        found = matches(facts, lookup.answer, index, self.rules)
        advice = loader_advice(index, facts, self.rules, advice_notes(lookup))
        told_about = relevant(found, advice, index) if target.head else []
        news = untold(target.repo_id, told_about, told) if emit else []
        return NewAdvisoryCheck(
            repo_id=target.repo_id,
            facts=facts.to_dict(),
            fact_changes=stored.fact_changes if stored is not None else [],
            advice=advice.to_dict(),
            links=[m.link() for m in found],
            state=told_state(told_about),
            events=[osv_advisory_event(target.repo_id, target.sha, a, why, self.rules) for a, why in news],
            pending_reason=pending_reason(lookup),
        )


def _same(check: NewAdvisoryCheck, stored: Any, links: Sequence[Any], told: Mapping[tuple[str, str], Told]) -> bool:
    """Whether a re-check found exactly what is stored (then nothing needs writing)."""
    if stored is None or check.events or check.pending_reason or stored.advice != check.advice:
        return False
    if stored.facts != check.facts:
        return False
    if any(told.get((check.repo_id, key)) != Told(modified, substance) for key, modified, substance in check.state):
        return False

    def keyed(rows: Iterable[Any]) -> set[tuple[Any, ...]]:
        return {(r.advisory_key, r.package, r.version, r.status, r.reason, r.verdict, r.modified, r.relevant,
                 r.relevance) for r in rows}
    return check.links is not None and keyed(check.links) == keyed(links)
