"""Verdicts that age: stored pickle scans judged again when the rules change, without a Hub request.

Every pickle scan is stored with the version of the rules that judged it (`file_scan.rules_version`) and its
imports. When the rules are not those any more (a hubwatch with longer built-in lists, an operator's rules
file that changed: its version carries the file's digest), each stale scan is judged again from its stored
imports (`pickle_rules.rejudge`). A verdict that became dangerous or unknown is announced once per watched
repo whose head carries the file: one of hubwatch's own records (pickle-dangerous-import,
pickle-unknown-import) and its `advisory.published` event, whose webhooks go out through the outbox, as
advisories for unchanged models are. The re-judged scans are written in the same transaction as the
announcements, so running again with the same rules finds nothing stale and announces nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog

from storage.advisories import Announcement, NewOwnAdvisory, Rejudged
from storage.front import Storage
from tracker.advisories.events import own_advisory_event
from tracker.advisories.own import ChangeView, own_id, own_records
from tracker.differs.pickle_verdicts import pickle_verdict
from tracker.formats import FileScan
from tracker.formats.pickle_rules import DANGEROUS, UNKNOWN, Rules, rejudge

log = structlog.get_logger(__name__)
ANNOUNCED = (DANGEROUS, UNKNOWN)


@dataclass
class RejudgeOutcome:
    rules_version: str
    scans: int = 0  # stale scans judged again
    changed: list[str] = field(default_factory=list)  # content ids whose verdict changed
    events: list[str] = field(default_factory=list)
    records: list[str] = field(default_factory=list)
    duration_ms: int = 0


def rejudge_stored(store: Storage, rules: Rules, *, hub_url: str, clock: Callable[[], datetime]) -> RejudgeOutcome:
    """Judge every stored pickle scan that other rules judged; announce each verdict that changed to
    dangerous or unknown on the watched heads carrying the file. Reads and writes the database only."""
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
    announcements = _announcements(store, changed, rules, hub_url, clock()) if changed else []
    store.advisories.write_rejudged(rejudged, announcements)
    outcome.events = [e.event_id for a in announcements for e in a.events]  # unless another worker was first
    outcome.records = [r.id for a in announcements for r in a.own]
    outcome.duration_ms = int((time.monotonic() - started) * 1000)
    if rejudged:
        log.info("pickle_scans_rejudged", rules_version=rules.version, scans=outcome.scans,
                 changed=len(outcome.changed), events=len(outcome.events), duration_ms=outcome.duration_ms)
    return outcome


def _announcements(
    store: Storage, changed: dict[str, tuple[dict[str, Any], FileScan]], rules: Rules, hub_url: str, now: datetime
) -> list[Announcement]:
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
