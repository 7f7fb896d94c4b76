"""The advisory check of one revision being ingested, and `AdvisoryService`, the object the app holds.

`check_revision(...)` does all the network work for one new revision (OSV querybatch, detail fetches for
ids new or modified since cached) and returns a `RevisionCheck` whose `write` is an extra write for
`HistoryStore.save_revision`: the advisory rows land in the revision's own transaction. When OSV fails (down,
malformed, paging forever) the facts, own advisories and advice from cached records still land and the
revision is marked pending with the reason; `retry_pending()` asks again later.

The service's other entry points hand over to their own modules: re-checks, pending retries and
back-fills to recheck.py, re-judging stored pickle scans to rejudging.py, the CLI's report and export to
report.py; OSV look-ups and matching live in
lookup.py, and the advisory events are composed in events.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from storage.advisories import (
    NewAdvisoryCheck,
    NewOwnAdvisory,
)
from storage.event_log import NewEvent
from storage.front import Storage
from storage.models import Revision
from tracker.advisories import report as reports
from tracker.advisories.advice import LoaderAdvice, loader_advice
from tracker.advisories.check import RevisionCheck
from tracker.advisories.events import osv_advisory_event, own_advisory_event
from tracker.advisories.facts import RepoFacts, diff_facts, extract_facts
from tracker.advisories.lookup import (
    OsvLookup,
    advice_notes,
    matches,
    pending_reason,
    queries,
    relevant,
    told_state,
    untold,
)
from tracker.advisories.osv import OsvClient
from tracker.advisories.own import close_record, own_records
from tracker.advisories.recheck import Rechecker, RecheckOutcome
from tracker.advisories.rejudging import RejudgeOutcome, rejudge_stored
from tracker.advisories.rules import Rule
from tracker.config import Settings
from tracker.formats.pickle_rules import BUILTIN
from tracker.formats.pickle_rules import Rules as PickleRules
from tracker.revision.snapshot import Snapshot

log = structlog.get_logger(__name__)


class AdvisoryService:
    def __init__(
        self,
        store: Storage,
        client: OsvClient | None,
        *,
        hub_url: str,
        clock: Callable[[], datetime] | None = None,
        rules: Sequence[Rule] | None = None,
        pickle_rules: PickleRules | Callable[[], PickleRules] = BUILTIN,
    ) -> None:
        self.store = store
        self.pickle_rules = pickle_rules
        self.db = store.advisories
        self.client = client
        self.hub_url = hub_url.rstrip("/")
        self.clock = clock or store.clock
        self.rules = rules
        self.lookup = OsvLookup(client, self.db)
        self.rechecker = Rechecker(store, self.db, self.lookup, rules=rules, clock=self.clock,
                                   check=self.check_revision)

    @classmethod
    def from_settings(
        cls, settings: Settings, store: Storage, clock: Callable[[], datetime] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> AdvisoryService:
        osv = settings.osv
        client = None
        if osv.enabled:
            client = OsvClient(osv.api_url, timeout_s=osv.timeout_s, max_attempts=osv.max_attempts,
                               backoff_s=osv.backoff_s, max_backoff_s=osv.max_backoff_s, max_pages=osv.max_pages,
                               sleep=sleep)
        return cls(store, client, hub_url=settings.hub.endpoint, clock=clock or store.clock,
                   pickle_rules=lambda: settings.scan.rules)  # the operator's file as last saved

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
        except Exception as err:
            log.exception("advisory_check_failed", repo_id=repo_id, sha=sha)
            reason = f"advisory check failed: {type(err).__name__}: {err}"
            facts = RepoFacts()
            new = NewAdvisoryCheck(repo_id=repo_id, facts=facts.to_dict(), pending_reason=reason)
            return RevisionCheck(repo_id, sha, facts, LoaderAdvice(notes=(reason,)), [], [], new, now)

    def _check(
        self, repo_id: str, sha: str, snapshot: Snapshot, parent: Snapshot | None, changes: list[Any],
        commit_title: str, now: datetime,
    ) -> RevisionCheck:
        facts = extract_facts(snapshot)
        fact_changes = diff_facts(extract_facts(parent) if parent is not None else None, facts)
        lookup = self.lookup.ask_unless_unreachable(queries([facts]), now)
        index = self.lookup.index(lookup)
        found = matches(facts, lookup.answer, index, self.rules)
        advice = loader_advice(index, facts, self.rules, advice_notes(lookup))
        own: list[dict[str, Any]] = []
        events: list[NewEvent] = []
        if parent is not None:
            own = own_records(repo_id, sha, changes, hub_url=self.hub_url, published_at=now, commit_title=commit_title)
            events += [own_advisory_event(repo_id, sha, r) for r in own]
        closed = [c for o in self.db.open_own(repo_id) if (c := close_record(o.record, snapshot, self.hub_url, now))]
        events += [own_advisory_event(repo_id, sha, r) for r in closed]
        told_about = relevant(found, advice, index)
        told = self.db.told([repo_id])
        if parent is not None and lookup.error is None and told:  # never told anything: seed, do not flood
            news = untold(repo_id, told_about, told)
            events += [osv_advisory_event(repo_id, sha, advisory, why, self.rules) for advisory, why in news]
        new = NewAdvisoryCheck(
            repo_id=repo_id,
            facts=facts.to_dict(),
            fact_changes=fact_changes,
            advice=advice.to_dict(),
            osv_records=lookup.fetched,
            links=[m.link() for m in found] if lookup.answer is not None else None,
            own=[_own_row(repo_id, r) for r in own + closed],
            state=told_state(told_about) if lookup.error is None else [],
            events=events,
            pending_reason=pending_reason(lookup),
        )
        log.info("advisories_checked", repo_id=repo_id, sha=sha, matches=len(found), own=len(own),
                 pending=new.pending_reason is not None)
        return RevisionCheck(repo_id, sha, facts, advice, found, own + closed, new, now)

    # -- stored revisions (recheck.py) and reading for the CLI (report.py) -----------------------------------

    def recheck(self, repo_ids: Iterable[str] | None = None) -> RecheckOutcome:
        """Re-query every watched head and every pending revision (see Rechecker.recheck)."""
        return self.rechecker.recheck(repo_ids)

    def recheck_due_at(self, interval_s: int) -> datetime:
        """When the next scheduled re-check is due (see Rechecker.recheck_due_at)."""
        return self.rechecker.recheck_due_at(interval_s)

    def retry_pending(self) -> RecheckOutcome:
        """Ask OSV again about revisions ingested while it could not be asked."""
        return self.rechecker.retry_pending()

    def backfill(self, repo_ids: Iterable[str] | None = None) -> int:
        """Check stored revisions that have no facts yet; returns how many were checked."""
        return self.rechecker.backfill(repo_ids)

    def rejudge_pickles(self) -> RejudgeOutcome:
        """Judge stored pickle scans again under today's rules; announce verdicts that changed (rejudging.py)."""
        rules = self.pickle_rules() if callable(self.pickle_rules) else self.pickle_rules
        return rejudge_stored(self.store, rules, hub_url=self.hub_url, clock=self.clock)

    def report(self, repo_id: str, revision: Revision) -> dict[str, Any]:
        """Everything known about one stored revision (see report.report)."""
        return reports.report(self.db, repo_id, revision)

    def export(self, directory: Path | str) -> list[Path]:
        """hubwatch's own records as an OSV database directory (see export.py)."""
        return reports.export(self.db, directory)


def _own_row(repo_id: str, record: Mapping[str, Any]) -> NewOwnAdvisory:
    ours = record["database_specific"]["hubwatch"]
    return NewOwnAdvisory(id=record["id"], repo_id=repo_id, sha=ours["introduced_sha"], class_id=ours["class"],
                          severity=ours["severity"], record=dict(record), fixed_sha=ours.get("fixed_sha"))
