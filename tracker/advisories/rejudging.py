"""Verdicts that age: stored pickle scans judged again when the rules change, without a Hub request.

Every pickle scan is stored with the version of the rules that judged it (`file_scan.rules_version`) and its
imports. When the rules are not those any more (a hubwatch with longer built-in lists, an operator's rules
file that changed: its version carries the file's digest), each stale scan is judged again from its stored
imports (`pickle_rules.rejudge`). A verdict that became dangerous or unknown is announced once per watched
repo whose head carries the file: one of hubwatch's own records (pickle-dangerous-import,
pickle-unknown-import) and its `advisory.published` event, whose webhooks go out through the outbox, as
advisories for unchanged models are. A verdict that became safe (or less severe) withdraws each open own record
it no longer supports (the OSV schema's `withdrawn`: the record was wrong, no commit fixed anything), announced
once the same way. The re-judged scans are written in the same transaction as the announcements, so running
again with the same rules finds nothing stale and announces nothing. `run` re-judges at start and every
`[scan] rejudge_interval`, with the operator's rules file as last saved (`rejudge_job`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog

from storage.advisories import Announcement, NewOwnAdvisory, Rejudged
from storage.front import Storage
from tracker.advisories.events import own_advisory_event
from tracker.advisories.own import ChangeView, osv_time, own_id, own_records
from tracker.differs.pickle_verdicts import pickle_verdict
from tracker.formats import FileScan
from tracker.formats.pickle_rules import DANGEROUS, ORDER, UNKNOWN, Rules, rejudge

log = structlog.get_logger(__name__)
ANNOUNCED = (DANGEROUS, UNKNOWN)
# own record classes about a pickle's verdict, and the verdict each stands for
VERDICT_CLASSES = {"pickle-dangerous-import": DANGEROUS, "pickle-unknown-import": UNKNOWN}


@dataclass
class RejudgeOutcome:
    rules_version: str
    scans: int = 0  # stale scans judged again
    changed: list[str] = field(default_factory=list)  # content ids whose verdict changed
    withdrawn: list[str] = field(default_factory=list)  # own records the new verdicts no longer support
    events: list[str] = field(default_factory=list)
    records: list[str] = field(default_factory=list)
    duration_ms: int = 0


def rejudge_stored(store: Storage, rules: Rules, *, hub_url: str, clock: Callable[[], datetime]) -> RejudgeOutcome:
    """Judge every stored pickle scan that other rules judged; announce each verdict that changed to
    dangerous or unknown on the watched heads carrying the file, and withdraw each open own record that the
    new verdicts no longer support. Reads and writes the database only."""
    started = time.monotonic()
    outcome = RejudgeOutcome(rules.version)
    stale = store.history.stale_file_scans("pickle", rules.version)
    rejudged, changed = [], {}
    for row in stale:
        result = dict(row.result or {})
        if "imports" not in result:  # nothing was judged (an empty or failed scan): only the version moves
            rejudged.append(Rejudged(row.content_id, result, rules.version))
            continue
        new = rejudge(result, rules)
        rejudged.append(Rejudged(row.content_id, new, rules.version))
        if new["verdict"] != result.get("verdict"):
            changed[row.content_id] = (result, FileScan(row.format, new, row.bytes_read, row.note, rules.version,
                                                        row.scanned_oid))
    outcome.scans, outcome.changed = len(rejudged), sorted(changed)
    now = clock()
    announcements = _announcements(store, changed, rules, hub_url, now) + _withdrawals(store, changed, rules, now)
    store.advisories.write_rejudged(rejudged, announcements)
    outcome.events = [e.event_id for a in announcements for e in a.events]  # unless another worker was first
    outcome.records = [r.id for a in announcements for r in a.own if not r.record.get("withdrawn")]
    outcome.withdrawn = [r.id for a in announcements for r in a.own if r.record.get("withdrawn")]
    outcome.duration_ms = int((time.monotonic() - started) * 1000)
    if rejudged:
        log.info("pickle_scans_rejudged", rules_version=rules.version, scans=outcome.scans,
                 changed=len(outcome.changed), events=len(outcome.events), withdrawn=len(outcome.withdrawn),
                 duration_ms=outcome.duration_ms)
    return outcome


def rejudge_job(rejudge: Callable[[], RejudgeOutcome], rules_problem: Callable[[], str | None]) -> Callable[[], RejudgeOutcome]:
    """`run`'s periodic re-judging (`rejudge`: AdvisoryService.rejudge_pickles, by the operator's rules file as
    last saved), with a warning once each time that file becomes unusable (the last good rules are kept)."""
    told: list[str | None] = [None]

    def job() -> RejudgeOutcome:
        problem = rules_problem()
        if problem != told[0]:
            told[0] = problem
            if problem:
                log.warning("pickle_rules_unusable", problem=problem)
        return rejudge()

    return job


def _announcements(
    store: Storage, changed: dict[str, tuple[dict[str, Any], FileScan]], rules: Rules, hub_url: str, now: datetime
) -> list[Announcement]:
    if not changed:
        return []
    out = []
    for head in store.advisories.heads():
        views, cids = [], []
        for f in store.history.revision_files(head.revision_id):
            cid = f.lfs_sha256 or f.oid
            if cid not in changed:
                continue
            before, scan = changed[cid]
            if scan.result.get("verdict") not in ANNOUNCED:
                continue
            verdict = pickle_verdict(scan)
            summary = (f"{f.path}: judged again under pickle rules {rules.version} (was {before.get('verdict')} "
                       f"under {before.get('rules_version')}): {verdict.text}")
            detail = {"status": "rejudged", "format": "pickle", "pickle_scan": verdict.detail,
                      "previous_verdict": before.get("verdict"), "sha256": cid}
            views.append(ChangeView("weights", f.path, summary, verdict.severity.value, True, detail))
            cids.append(cid)
        if not views:
            continue
        records = own_records(head.repo_id, head.sha, views, hub_url=hub_url, published_at=now,
                              commit_title=f"re-judged under pickle rules {rules.version}")
        own, events = [], []
        for record in records:
            ours = record["database_specific"]["hubwatch"]
            record["id"] = own_id(head.repo_id, head.sha, f"{ours['class']}@rules {rules.version}")
            ours["rules_version"] = rules.version
            own.append(NewOwnAdvisory(id=record["id"], repo_id=head.repo_id, sha=head.sha, class_id=ours["class"],
                                      severity=ours["severity"], record=record))
            events.append(own_advisory_event(head.repo_id, head.sha, record))
        out.append(Announcement(head.repo_id, head.revision_id, own, events, tuple(cids)))
    return out


def _withdrawals(
    store: Storage, changed: dict[str, tuple[dict[str, Any], FileScan]], rules: Rules, now: datetime
) -> list[Announcement]:
    """Each open pickle record whose files are all judged less severe than its class now: withdrawn, announced."""
    improved = {cid for cid, (before, scan) in changed.items()
                if ORDER.get(scan.result.get("verdict"), -1) < ORDER.get(before.get("verdict"), -1)}
    if not improved:
        return []
    out = []
    for own in store.advisories.own():
        bar = VERDICT_CLASSES.get(own.class_id)
        if bar is None or own.fixed_sha or own.record.get("withdrawn"):
            continue
        files = {f.path: f.lfs_sha256 or f.oid for f in store.history.revision_files(own.revision_id)}
        paths = [str(p) for p in own.record.get("database_specific", {}).get("hubwatch", {}).get("paths") or []]
        cids = [files.get(p) for p in paths]
        touched = [c for c in cids if c in improved]
        if not touched or None in cids:
            continue  # not about a re-judged file, or about one this revision does not list: left as it is
        stored = store.history.read_file_scans(c for c in cids if c not in changed)
        verdicts = {c: changed[c][1].result.get("verdict") if c in changed
                    else (stored[c].result or {}).get("verdict") if c in stored else None for c in cids}
        if any(v is None or ORDER.get(v, -1) >= ORDER[bar] for v in verdicts.values()):
            continue  # a file still warrants the record (or one has no stored verdict to go by)
        now_said = ", ".join(f"{p}: {verdicts[c]}" for p, c in zip(paths, cids, strict=True))
        record = withdrawn_record(own.record, rules.version, now_said, now)
        row = NewOwnAdvisory(id=own.id, repo_id=own.repo_id, sha=own.sha, class_id=own.class_id,
                             severity=own.severity, record=record)
        out.append(Announcement(own.repo_id, own.revision_id, [row], [own_advisory_event(own.repo_id, own.sha, record)],
                                tuple(dict.fromkeys(touched))))
    return out


def withdrawn_record(record: dict[str, Any], rules_version: str, now_said: str, at: datetime) -> dict[str, Any]:
    """The record withdrawn (OSV's `withdrawn` time): the rules that judged it were wrong about these files."""
    out = json.loads(json.dumps(record))
    when = osv_time(at)
    out["modified"] = out["withdrawn"] = when
    ours = out["database_specific"]["hubwatch"]
    ours["withdrawn_reason"] = f"judged again under pickle rules {rules_version}: {now_said}"
    ours["withdrawn_rules_version"] = rules_version
    out["details"] += f"\n\nWithdrawn {when}: {ours['withdrawn_reason']}."
    return out
