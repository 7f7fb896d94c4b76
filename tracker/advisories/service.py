"""The advisories pipeline: facts -> OSV -> matches, loader advice, own records -> storage.

- `check_revision(...)` does all the network work for one new revision (OSV querybatch, detail fetches
  for ids new or modified since cached) and returns a `RevisionCheck` whose `write` is an extra write
  for `Store.save_revision`: the advisory rows land in the revision's own transaction. When OSV fails
  (down, malformed, paging forever) the facts, own advisories and advice from cached records still land
  and the revision is marked pending with the reason; `retry_pending()` asks again later.
- `recheck()` re-queries every watched head (default daily): one querybatch per 1,000 distinct package
  versions, details only for ids new or modified, and an `advisory.published` event for every advisory
  new or modified since the repo was last told, written in the same transaction as the state that
  remembers it (so an event is never lost nor sent twice; event ids are stable).
- `backfill()` checks stored revisions that have no facts yet (ingested before advisories existed).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import structlog

from storage.advisories import (
    AdvisoryStore,
    NewAdvisoryCheck,
    NewLink,
    NewOwnAdvisory,
    write_check,
)
from storage.kinds import ADVISORY_PUBLISHED
from storage.models import Revision
from storage.errors import RevisionNotStored
from storage.store import NewEvent, Store
from tracker.advisories.advice import LoaderAdvice, advice_packages, loader_advice
from tracker.advisories.facts import RepoFacts, diff_facts, extract_facts
from tracker.advisories.osv import (
    BatchAnswer,
    OsvBadAnswer,
    OsvClient,
    OsvError,
    OsvUnavailable,
    PackageQuery,
)
from tracker.advisories.own import close_record, own_classes, own_records
from tracker.advisories.records import (
    AFFECTED,
    UNKNOWN,
    Advisory,
    AdvisoryIndex,
    parse_version,
)
from tracker.advisories.rules import REPO, Judgement, Rule, judge
from tracker.config import Settings
from tracker.events import event_id
from tracker.snapshot import Snapshot
from tracker.snapshot_io import load_snapshot

log = structlog.get_logger(__name__)

UNREACHABLE_COOL_DOWN_S = 300
OWN_EVENT_SEVERITY = {"critical": "critical", "high": "critical", "medium-high": "warning", "medium": "warning"}


@dataclass(frozen=True)
class Match:
    """An OSV advisory that matches a package version the revision names."""

    advisory: Advisory
    package: str
    version: str  # as the repo wrote it
    status: str  # affected | unknown
    reason: str | None
    judgement: Judgement

    def link(self) -> NewLink:
        a = self.advisory
        return NewLink(a.key, self.package, self.version, self.status, self.reason, self.judgement.verdict,
                       self.judgement.rule, a.ids, a.modified, a.summary)  # fmt: skip


@dataclass
class Lookup:
    """What OSV said for a set of queries (or why it could not say)."""

    answer: BatchAnswer | None = None
    fetched: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None  # set: the look-up failed as a whole
    disabled: bool = False  # OSV is off by configuration: nothing to ask again later
    unreachable: bool = False  # OSV did not answer (time-outs, 429, 5xx after the client's retries)
    notes: list[str] = field(default_factory=list)  # partial failures: paging cut, a bad record


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
        """An extra write for Store.save_revision: the rows join the revision's transaction."""
        assert revision.id is not None
        write_check(session, revision.id, self.new, self.checked_at)

    def summary(self) -> dict[str, Any]:
        """A small JSON summary, e.g. for the revision event's payload."""
        return {
            "advice": self.advice.sentence,
            "osv_matches": sorted({m.advisory.key for m in self.matches}),
            "own_advisories": [r["id"] for r in self.own],
            "pending": self.pending,
        }


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


class AdvisoryService:
    def __init__(
        self,
        store: Store,
        client: OsvClient | None,
        *,
        hub_url: str,
        clock: Callable[[], datetime] | None = None,
        rules: Sequence[Rule] | None = None,
    ) -> None:
        self.store = store
        self.db = AdvisoryStore(store)
        self.client = client
        self.hub_url = hub_url.rstrip("/")
        self.clock = clock or store.clock
        self.rules = rules
        # After OSV failed to answer, ingests stop asking it for a while: each revision of a poll would
        # otherwise pay the client's retries again. Re-checks and pending retries always ask.
        self._unreachable: tuple[datetime, str] | None = None

    @classmethod
    def from_settings(
        cls, settings: Settings, store: Store, clock: Callable[[], datetime] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> AdvisoryService:  # fmt: skip
        osv = settings.osv
        client = None
        if osv.enabled:
            client = OsvClient(osv.api_url, timeout_s=osv.timeout_s, max_attempts=osv.max_attempts,
                               backoff_s=osv.backoff_s, max_backoff_s=osv.max_backoff_s, max_pages=osv.max_pages,
                               sleep=sleep)  # fmt: skip
        return cls(store, client, hub_url=settings.hub.endpoint, clock=clock or store.clock)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()

    # -- one new revision ------------------------------------------------------------------------------

    def check_revision(
        self,
        repo_id: str,
        sha: str,
        snapshot: Snapshot,
        parent_snapshot: Snapshot | None = None,
        changes: Iterable[Any] = (),
        commit_title: str = "",
    ) -> RevisionCheck:
        """Facts, OSV matches, advice and own records of a revision being ingested; never raises for
        a failure of its own (it becomes the pending reason, and the revision still lands)."""
        now = self.clock()
        try:
            return self._check(repo_id, sha, snapshot, parent_snapshot, list(changes), commit_title, now)
        except Exception as err:  # noqa: BLE001 - an advisory bug must not lose the revision
            log.exception("advisory_check_failed", repo_id=repo_id, sha=sha)
            reason = f"advisory check failed: {type(err).__name__}: {err}"
            facts = RepoFacts()
            new = NewAdvisoryCheck(repo_id=repo_id, facts=facts.to_dict(), pending_reason=reason)
            return RevisionCheck(repo_id, sha, facts, LoaderAdvice(notes=(reason,)), [], [], new, now)

    def _check(
        self, repo_id: str, sha: str, snapshot: Snapshot, parent: Snapshot | None, changes: list[Any],
        commit_title: str, now: datetime,
    ) -> RevisionCheck:  # fmt: skip
        facts = extract_facts(snapshot)
        fact_changes = diff_facts(extract_facts(parent) if parent is not None else None, facts)
        lookup = self._lookup_unless_unreachable(self._queries([facts]), now)
        index = self._index(lookup)
        matches = self._matches(facts, lookup.answer, index)
        advice = loader_advice(index, facts, self.rules, self._advice_notes(lookup))
        own: list[dict[str, Any]] = []
        events: list[NewEvent] = []
        if parent is not None:
            own = own_records(repo_id, sha, changes, hub_url=self.hub_url, published_at=now, commit_title=commit_title)
            events += [self._own_event(repo_id, sha, r) for r in own]
        closed = [c for o in self.db.open_own(repo_id) if (c := close_record(o.record, snapshot, self.hub_url, now))]
        events += [self._own_event(repo_id, sha, r) for r in closed]
        relevant = self._relevant(matches, advice, index)
        told = self.db.told([repo_id])
        if parent is not None and lookup.error is None and told:  # never told anything: seed, do not flood
            events += [
                self._osv_event(repo_id, sha, advisory, why)
                for advisory, why in relevant
                if told.get((repo_id, advisory.key)) != advisory.modified
            ]
        new = NewAdvisoryCheck(
            repo_id=repo_id,
            facts=facts.to_dict(),
            fact_changes=fact_changes,
            advice=advice.to_dict(),
            osv_records=lookup.fetched,
            links=[m.link() for m in matches] if lookup.answer is not None else None,
            own=[_own_row(repo_id, r) for r in own + closed],
            state=[(a.key, a.modified) for a, _ in relevant] if lookup.error is None else [],
            events=events,
            pending_reason=self._pending_reason(lookup),
        )
        log.info("advisories_checked", repo_id=repo_id, sha=sha, matches=len(matches), own=len(own),
                 pending=new.pending_reason is not None)  # fmt: skip
        return RevisionCheck(repo_id, sha, facts, advice, matches, own + closed, new, now)

    # -- stored revisions: re-check, pending, back-fill ---------------------------------------------------

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
        wanted = list(repo_ids) if repo_ids is not None else self.store.repo_ids()
        done = 0
        for repo_id in wanted:
            revisions = list(reversed(self.store.list_revisions(repo_id)))
            have = self.db.facts(r.id for r in revisions if r.id is not None)
            for revision in revisions:
                if revision.id in have:
                    continue
                snapshot = load_snapshot(self.store, revision)
                parent = self._parent_snapshot(revision)
                changes = self.store.changes_by_revision([revision.id])[revision.id]  # type: ignore[list-item,index]
                check = self.check_revision(repo_id, revision.sha, snapshot, parent, changes, revision.title)
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
            return load_snapshot(self.store, self.store.find_revision(revision.repo_id, revision.parent_sha))
        except RevisionNotStored:
            return None

    def _check_stored(self, targets: list[_Target], emit: bool) -> RecheckOutcome:
        started = time.monotonic()
        outcome = RecheckOutcome(repos=len({t.repo_id for t in targets}), revisions=len(targets))
        before = _counts(self.client)
        stored = self.db.facts(t.revision_id for t in targets)
        facts: dict[int, RepoFacts] = {}
        for target in targets:
            row = stored.get(target.revision_id)
            if row is not None:
                facts[target.revision_id] = RepoFacts.from_dict(row.facts)
            else:  # ingested before advisories existed: read it from the store
                revision = self.db.revision(target.revision_id)
                facts[target.revision_id] = extract_facts(load_snapshot(self.store, revision))  # type: ignore[arg-type]
        queries = self._queries(facts.values())
        outcome.queries = len(queries)
        lookup = self._lookup(queries, find_withdrawn=True)
        after = _counts(self.client)
        outcome.querybatch_requests, outcome.detail_fetches = after[0] - before[0], after[1] - before[1]
        if lookup.error is not None:
            outcome.error = lookup.error
            for repo_id in {t.repo_id for t in targets if t.head}:
                self.db.record_recheck(repo_id, None, lookup.error)
            log.warning("advisory_recheck_failed", error=lookup.error, repos=outcome.repos)
            outcome.duration_ms = int((time.monotonic() - started) * 1000)
            return outcome
        index = self._index(lookup)
        self.db.save_osv_records(lookup.fetched)
        told = self.db.told({t.repo_id for t in targets})
        told_repos = {repo for repo, _ in told}
        pending_before = {p.revision_id for p in self.db.pending()}
        links = self.db.links_by_revision(t.revision_id for t in targets)
        checks: list[tuple[int, NewAdvisoryCheck]] = []
        for target in targets:
            quiet = not emit or (target.repo_id not in told_repos and self._is_baseline(target.revision_id))
            check = self._recheck_one(target, facts[target.revision_id], stored.get(target.revision_id), lookup,
                                      index, told, emit=not quiet)  # fmt: skip
            if target.revision_id in pending_before or not _same(check, stored.get(target.revision_id),
                                                                 links[target.revision_id], told):  # fmt: skip
                checks.append((target.revision_id, check))
            outcome.events += [e.event_id for e in check.events]
            if target.revision_id in pending_before and check.pending_reason is None:
                outcome.pending_cleared += 1
        self.db.write_many(checks, rechecked=[(t.repo_id, t.revision_id) for t in targets if t.head])
        outcome.duration_ms = int((time.monotonic() - started) * 1000)
        log.info("advisory_recheck_finished", repos=outcome.repos, revisions=outcome.revisions,
                 queries=outcome.queries, querybatch=outcome.querybatch_requests,
                 details=outcome.detail_fetches, events=len(outcome.events), duration_ms=outcome.duration_ms)  # fmt: skip
        return outcome

    def _is_baseline(self, revision_id: int) -> bool:
        revision = self.db.revision(revision_id)
        return revision is not None and revision.is_baseline

    def _recheck_one(
        self, target: _Target, facts: RepoFacts, stored: Any, lookup: Lookup, index: AdvisoryIndex,
        told: Mapping[tuple[str, str], str], emit: bool,
    ) -> NewAdvisoryCheck:  # fmt: skip
        """The rows of one re-checked revision; its events (new or modified advisories the repo was not
        told about) are written with the state that remembers them, in one transaction."""
        matches = self._matches(facts, lookup.answer, index)
        advice = loader_advice(index, facts, self.rules, self._advice_notes(lookup))
        relevant = self._relevant(matches, advice, index) if target.head else []
        events = [
            self._osv_event(target.repo_id, target.sha, advisory, why)
            for advisory, why in relevant
            if emit and told.get((target.repo_id, advisory.key)) != advisory.modified
        ]
        return NewAdvisoryCheck(
            repo_id=target.repo_id,
            facts=facts.to_dict(),
            fact_changes=stored.fact_changes if stored is not None else [],
            advice=advice.to_dict(),
            links=[m.link() for m in matches],
            state=[(a.key, a.modified) for a, _ in relevant],
            events=events,
            pending_reason=self._pending_reason(lookup),
        )

    # -- OSV -----------------------------------------------------------------------------------------------

    def _queries(self, facts_list: Iterable[RepoFacts]) -> list[PackageQuery]:
        """Distinct queries: every (package, version) named, plus every version of the advice packages."""
        wanted: set[PackageQuery] = set()
        for facts in facts_list:
            wanted.update(PackageQuery(package, version) for package, version in facts.versions())
            wanted.update(PackageQuery(package) for package in advice_packages(facts))
        return sorted(wanted, key=lambda q: (q.name, q.version or ""))

    def _lookup_unless_unreachable(self, queries: list[PackageQuery], now: datetime) -> Lookup:
        """An ingest's look-up: not sent while OSV is known to be down (the revision is marked pending
        with the reason, and the pending retry asks again)."""
        if self._unreachable is not None and now < self._unreachable[0]:
            lookup = Lookup()
            lookup.error = f"not asked: {self._unreachable[1]} (until {self._unreachable[0]:%H:%M:%S}Z)"
            return lookup
        lookup = self._lookup(queries)
        if lookup.unreachable:
            self._unreachable = (now + timedelta(seconds=UNREACHABLE_COOL_DOWN_S), f"OSV unreachable: {lookup.error}")
        else:
            self._unreachable = None
        return lookup

    def _lookup(self, queries: list[PackageQuery], find_withdrawn: bool = False) -> Lookup:
        """querybatch, then the details of ids new or modified since cached (the network part)."""
        lookup = Lookup()
        if self.client is None:
            lookup.error, lookup.disabled = "OSV look-ups are off ([osv] enabled = false)", True
            return lookup
        if not queries:
            lookup.answer = BatchAnswer()
            return lookup
        try:
            answer = self.client.querybatch(queries)
            cached = self.db.osv_modified()
            refs = {ref.id: ref.modified for found in answer.results.values() for ref in found}
            wanted = sorted(i for i, modified in refs.items() if cached.get(i) != modified or not modified)
            if find_withdrawn:
                wanted += self._vanished(answer, refs)
            for vuln_id in wanted:
                try:
                    lookup.fetched.append(self.client.vuln(vuln_id))
                except OsvBadAnswer as err:
                    lookup.notes.append(err.reason)
        except OsvError as err:
            lookup.error = err.reason
            lookup.unreachable = isinstance(err, OsvUnavailable)
            return lookup
        lookup.answer = answer
        lookup.notes += list(answer.incomplete.values())
        return lookup

    def _vanished(self, answer: BatchAnswer, returned: Mapping[str, str]) -> list[str]:
        """Cached live records of fully queried packages that OSV no longer returns: fetched again to
        learn whether they were withdrawn (querybatch leaves withdrawn records out)."""
        complete = {q.name for q in answer.results if q.version is None and q not in answer.incomplete}
        gone = []
        for advisory in AdvisoryIndex.build(r.record for r in self.db.osv_records()).advisories:
            if advisory.withdrawn or not advisory.packages() & complete:
                continue
            gone += [r["id"] for r in advisory.live if r["id"] not in returned]
        return sorted(gone)

    def _index(self, lookup: Lookup) -> AdvisoryIndex:
        """The advisories OSV returned this time (cached detail, or freshly fetched). When OSV could not
        be asked, every cached record, so advice still says what was known."""
        fetched = {r["id"]: r for r in lookup.fetched}
        cached = {r.id: r.record for r in self.db.osv_records()}
        if lookup.answer is None:
            return AdvisoryIndex.build({**cached, **fetched}.values())
        returned = {ref.id for found in lookup.answer.results.values() for ref in found}
        records = {i: fetched.get(i, cached.get(i)) for i in returned}
        records.update({i: r for i, r in fetched.items() if r.get("withdrawn")})
        return AdvisoryIndex.build(r for r in records.values() if r is not None)

    def _matches(self, facts: RepoFacts, answer: BatchAnswer | None, index: AdvisoryIndex) -> list[Match]:
        if answer is None:
            return []
        out: dict[tuple[str, str], Match] = {}
        for dep in facts.dependencies:
            parsed = parse_version(dep.version)
            if parsed.query_text is None:
                continue  # a Problem of the facts says why
            for ref in answer.results.get(PackageQuery(dep.package, parsed.query_text), ()):
                advisory = index.by_id.get(ref.id)
                if advisory is None or advisory.withdrawn or (advisory.key, dep.package) in out:
                    continue
                verdict = advisory.evaluate(dep.package, parsed)
                reason = verdict.reason
                status = UNKNOWN if verdict.status == UNKNOWN else AFFECTED
                if verdict.status not in (AFFECTED, UNKNOWN):
                    reason = "; ".join(filter(None, ["OSV matched it; hubwatch's range evaluation says not affected", reason]))
                where = ", ".join(dep.sources[:3])
                reason = "; ".join(filter(None, [f"{dep.package} {dep.version} ({where})", reason]))
                out[(advisory.key, dep.package)] = Match(advisory, dep.package, dep.version, status, reason,
                                                         judge(advisory, dep.package, self.rules))  # fmt: skip
        return sorted(out.values(), key=lambda m: (m.package, m.advisory.key))

    def _relevant(self, matches: list[Match], advice: LoaderAdvice, index: AdvisoryIndex) -> list[tuple[Advisory, str]]:
        """Advisories a repo is told about: its version matches, and those behind its loader advice."""
        found: dict[str, tuple[Advisory, str]] = {}
        for m in matches:
            found.setdefault(m.advisory.key, (m.advisory, f"matches {m.package} {m.version} ({m.judgement.verdict})"))
        for package in advice.packages:
            for because in package.because + package.unfixed:
                advisory = index.by_id.get(because.key)
                if advisory is not None:
                    why = f"a repo can trigger it while loading ({because.trigger}): {package.package} {because.floor}"
                    found.setdefault(advisory.key, (advisory, why))
        return sorted(found.values(), key=lambda p: p[0].key)

    @staticmethod
    def _advice_notes(lookup: Lookup) -> list[str]:
        notes = list(lookup.notes)
        if lookup.error is not None:
            notes.insert(0, f"from cached advisories only: {lookup.error}")
        return notes

    @staticmethod
    def _pending_reason(lookup: Lookup) -> str | None:
        if lookup.disabled:
            return None
        if lookup.error is not None:
            return lookup.error
        return "; ".join(lookup.notes) or None

    # -- events --------------------------------------------------------------------------------------------

    def _osv_event(self, repo_id: str, sha: str, advisory: Advisory, why: str) -> NewEvent:
        name = repo_id.split("/", 1)[-1]
        repo_triggered = any(judge(advisory, p, self.rules).verdict == REPO for p in advisory.packages())
        return NewEvent(
            event_id=event_id(repo_id, None, ADVISORY_PUBLISHED, f"{advisory.key}@{advisory.modified}"),
            kind=ADVISORY_PUBLISHED,
            title=f"{name}: advisory {advisory.key}: {advisory.summary[:120]}",
            severity="warning" if repo_triggered else "notice",
            security=True,
            payload={"advisory": advisory.key, "ids": list(advisory.ids), "modified": advisory.modified,
                     "summary": advisory.summary, "why": why, "sha": sha, "source": "osv"},
        )

    def _own_event(self, repo_id: str, sha: str, record: Mapping[str, Any]) -> NewEvent:
        ours = record["database_specific"]["hubwatch"]
        name = repo_id.split("/", 1)[-1]
        fixed = f" (fixed at {ours['fixed_sha'][:12]})" if ours.get("fixed_sha") else ""
        return NewEvent(
            event_id=event_id(repo_id, sha, ADVISORY_PUBLISHED, f"{record['id']}@{record['modified']}"),
            kind=ADVISORY_PUBLISHED,
            title=f"{name}: {record['id']}: {own_classes()[ours['class']].title}{fixed}",
            severity="notice" if ours.get("fixed_sha") else OWN_EVENT_SEVERITY.get(ours["severity"], "warning"),
            security=True,
            payload={"advisory": record["id"], "class": ours["class"], "modified": record["modified"],
                     "summary": record["summary"], "sha": sha, "source": "hubwatch"},
        )

    # -- reading, for the CLI ---------------------------------------------------------------------------------

    def report(self, repo_id: str, revision: Revision) -> dict[str, Any]:
        """Everything known about one stored revision: advice, OSV matches, own records, facts."""
        assert revision.id is not None
        facts_row = self.db.facts([revision.id]).get(revision.id)
        pending = next((p for p in self.db.pending() if p.revision_id == revision.id), None)
        return {
            "repo_id": repo_id,
            "sha": revision.sha,
            "committed_at": revision.committed_at.isoformat().replace("+00:00", "Z"),
            "checked_at": facts_row.checked_at.isoformat().replace("+00:00", "Z") if facts_row else None,
            "advice": facts_row.advice if facts_row else None,
            "osv_matches": [
                {"advisory": lk.advisory_key, "ids": lk.ids, "package": lk.package, "version": lk.version,
                 "status": lk.status, "verdict": lk.verdict, "rule": lk.rule, "reason": lk.reason,
                 "summary": lk.summary, "modified": lk.modified}
                for lk in self.db.links(revision.id)
            ],
            "own_advisories": [o.record for o in self.db.own(repo_id)],
            "facts": facts_row.facts if facts_row else None,
            "fact_changes": facts_row.fact_changes if facts_row else [],
            "pending": pending.reason if pending else None,
        }

    def export(self, directory: Path | str) -> list[Path]:
        """hubwatch's own records as an OSV database directory (see export.py)."""
        from tracker.advisories.export import export_records

        return export_records([o.record for o in self.db.own()], Path(directory))


def _own_row(repo_id: str, record: Mapping[str, Any]) -> NewOwnAdvisory:
    ours = record["database_specific"]["hubwatch"]
    return NewOwnAdvisory(id=record["id"], repo_id=repo_id, sha=ours["introduced_sha"], class_id=ours["class"],
                          severity=ours["severity"], record=dict(record), fixed_sha=ours.get("fixed_sha"))  # fmt: skip


def _same(check: NewAdvisoryCheck, stored: Any, links: Sequence[Any], told: Mapping[tuple[str, str], str]) -> bool:
    """Whether a re-check found exactly what is stored (then nothing needs writing)."""
    if stored is None or check.events or check.pending_reason or stored.advice != check.advice:
        return False
    if any(told.get((check.repo_id, key)) != modified for key, modified in check.state):
        return False
    def keyed(rows: Iterable[Any]) -> set[tuple[Any, ...]]:
        return {(r.advisory_key, r.package, r.version, r.status, r.reason, r.verdict, r.modified) for r in rows}
    return check.links is not None and keyed(check.links) == keyed(links)


def _counts(client: OsvClient | None) -> tuple[int, int]:
    return (client.counts.querybatch, client.counts.vulns) if client is not None else (0, 0)

