"""Asking OSV about the packages revisions name, and matching its answer against their facts.

`OsvLookup` is the network part: a querybatch, then the details of ids new or modified since cached
(and, for re-checks, of cached records OSV stopped returning, to learn they were withdrawn); after OSV
failed to answer, ingests stop asking it for a while. The functions below it are pure: which advisories
match which dependency (`matches`), which of them a repo is told about (`relevant`, `untold`), and what
a look-up's failure means for the advice and the pending reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from storage.advisories import AdvisoryStore, NewLink, Told
from tracker.advisories.advice import LoaderAdvice, advice_packages
from tracker.advisories.facts import RepoFacts
from tracker.advisories.osv import (
    BatchAnswer,
    OsvBadAnswer,
    OsvClient,
    OsvError,
    OsvUnavailable,
    PackageQuery,
)
from tracker.advisories.records import (
    AFFECTED,
    UNKNOWN,
    Advisory,
    AdvisoryIndex,
    parse_version,
)
from tracker.advisories.rules import Judgement, Rule, judge
from tracker.advisories.scope import Relevance, ScopeTable, relevance, scope_of

UNREACHABLE_COOL_DOWN_S = 300


@dataclass(frozen=True)
class Match:
    """An OSV advisory that matches a package version the revision names."""

    advisory: Advisory
    package: str
    version: str  # as the repo wrote it
    status: str  # affected | unknown
    reason: str | None
    judgement: Judgement
    relevance: Relevance = Relevance(True, "")  # whether it concerns this model (scope.py), and why

    def link(self) -> NewLink:
        a = self.advisory
        return NewLink(a.key, self.package, self.version, self.status, self.reason, self.judgement.verdict,
                       self.judgement.rule, a.ids, a.modified, a.summary, self.relevance.relevant,
                       self.relevance.reason or None)


@dataclass
class Lookup:
    """What OSV said for a set of queries (or why it could not say)."""

    answer: BatchAnswer | None = None
    fetched: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None  # set: the look-up failed as a whole
    disabled: bool = False  # OSV is off by configuration: nothing to ask again later
    unreachable: bool = False  # OSV did not answer (time-outs, 429, 5xx after the client's retries)
    notes: list[str] = field(default_factory=list)  # partial failures: paging cut, a bad record


def queries(facts_list: Iterable[RepoFacts]) -> list[PackageQuery]:
    """Distinct queries: every (package, version) named, plus every version of the advice packages."""
    wanted: set[PackageQuery] = set()
    for facts in facts_list:
        wanted.update(PackageQuery(package, version) for package, version in facts.versions())
        wanted.update(PackageQuery(package) for package in advice_packages(facts))
    return sorted(wanted, key=lambda q: (q.name, q.version or ""))


class OsvLookup:
    """OSV look-ups against the records cached in storage (None as client: OSV is off)."""

    def __init__(self, client: OsvClient | None, db: AdvisoryStore) -> None:
        self.client = client
        self.db = db
        # After OSV failed to answer, ingests stop asking it for a while: each revision of a poll would
        # otherwise pay the client's retries again. Re-checks and pending retries always ask.
        self._unreachable: tuple[datetime, str] | None = None

    def ask_unless_unreachable(self, wanted: list[PackageQuery], now: datetime) -> Lookup:
        """An ingest's look-up: not sent while OSV is known to be down (the revision is marked pending
        with the reason, and the pending retry asks again)."""
        if self._unreachable is not None and now < self._unreachable[0]:
            lookup = Lookup()
            lookup.error = f"not asked: {self._unreachable[1]} (until {self._unreachable[0]:%H:%M:%S}Z)"
            return lookup
        lookup = self.ask(wanted)
        if lookup.unreachable:
            self._unreachable = (now + timedelta(seconds=UNREACHABLE_COOL_DOWN_S), f"OSV unreachable: {lookup.error}")
        else:
            self._unreachable = None
        return lookup

    def ask(self, wanted: list[PackageQuery], find_withdrawn: bool = False) -> Lookup:
        """querybatch, then the details of ids new or modified since cached (the network part)."""
        lookup = Lookup()
        if self.client is None:
            lookup.error, lookup.disabled = "OSV look-ups are off ([osv] enabled = false)", True
            return lookup
        if not wanted:
            lookup.answer = BatchAnswer()
            return lookup
        try:
            answer = self.client.querybatch(wanted)
            cached = self.db.osv_modified()
            refs = {ref.id: ref.modified for found in answer.results.values() for ref in found}
            ids = sorted(i for i, modified in refs.items() if cached.get(i) != modified or not modified)
            if find_withdrawn:
                ids += self._vanished(answer, refs)
            for vuln_id in ids:
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

    def index(self, lookup: Lookup) -> AdvisoryIndex:
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

    def counts(self) -> tuple[int, int]:
        """Requests sent so far: (querybatch, vuln details)."""
        return (self.client.counts.querybatch, self.client.counts.vulns) if self.client is not None else (0, 0)


def matches(
    facts: RepoFacts, answer: BatchAnswer | None, index: AdvisoryIndex, rules: Sequence[Rule] | None,
    scopes: ScopeTable | None = None,
) -> list[Match]:
    """The advisories OSV matched to the facts' package versions, with hubwatch's own range evaluation,
    each saying whether it concerns this model (an affected version is listed either way)."""
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
            judgement = judge(advisory, dep.package, rules)
            concerns = relevance(scope_of(advisory, dep.package, judgement.rule, scopes), facts, judgement.requires)
            out[(advisory.key, dep.package)] = Match(advisory, dep.package, dep.version, status, reason,
                                                     judgement, concerns)
    return sorted(out.values(), key=lambda m: (m.package, m.advisory.key))


def relevant(found: list[Match], advice: LoaderAdvice, index: AdvisoryIndex) -> list[tuple[Advisory, str]]:
    """Advisories a repo is told about: its version matches one that concerns this model, and those
    behind its loader advice. One about other models is listed with the matches, never announced; one
    counted only because the revision's model is unknown (an unreadable config) is not announced either."""
    told: dict[str, tuple[Advisory, str]] = {}
    for m in found:
        if not m.relevance.relevant or m.relevance.assumed:
            continue
        why = f"matches {m.package} {m.version} ({m.judgement.verdict})"
        if m.relevance.scoped:
            why += f"; {m.relevance.reason}"
        told.setdefault(m.advisory.key, (m.advisory, why))
    for package in advice.packages:
        for because in package.because + package.unfixed:
            advisory = index.by_id.get(because.key)
            if advisory is not None and not because.assumed:
                why = f"a repo can trigger it while loading ({because.trigger}): {package.package} {because.floor}"
                told.setdefault(advisory.key, (advisory, why))
    return sorted(told.values(), key=lambda p: p[0].key)


def untold(
    repo_id: str, found: list[tuple[Advisory, str]], told: Mapping[tuple[str, str], Told]
) -> list[tuple[Advisory, str]]:
    """Those relevant advisories the repo was not told about: new to it, or changed in substance since
    (ranges, severity, aliases, withdrawal). A `modified` that moved alone is no news."""
    return [(advisory, why) for advisory, why in found if is_news(told.get((repo_id, advisory.key)), advisory)]


def is_news(told: Told | None, advisory: Advisory) -> bool:
    """Whether telling a repo about this version of an advisory says anything new to it."""
    if told is None:
        return True
    if told.modified == advisory.modified:
        return False
    return told.substance is None or told.substance != advisory.substance  # None: told before digests


def told_state(found: list[tuple[Advisory, str]]) -> list[tuple[str, str, str]]:
    """The re-check state a check leaves: (key, modified, substance) of every advisory the repo is told about."""
    return [(a.key, a.modified, a.substance) for a, _ in found]


def advice_notes(lookup: Lookup) -> list[str]:
    """What the loader advice says about how complete the look-up was."""
    notes = list(lookup.notes)
    if lookup.error is not None:
        notes.insert(0, f"from cached advisories only: {lookup.error}")
    return notes


def pending_reason(lookup: Lookup) -> str | None:
    """Why the revision must be asked about again (None: it need not, or OSV is off)."""
    if lookup.disabled:
        return None
    if lookup.error is not None:
        return lookup.error
    return "; ".join(lookup.notes) or None
