"""The events of advisories published: OSV's, and hubwatch's own records, with their stable ids."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from storage.event_log import NewEvent
from storage.kinds import ADVISORY_PUBLISHED
from tracker.advisories.own import own_classes
from tracker.advisories.records import Advisory
from tracker.advisories.rules import REPO, Rule, judge
from tracker.revision.changes import Severity
from tracker.revision.events import event_id

# hubwatch's own record classes (data/own_classes.json) rate themselves like CVSS; their events are louder.
OWN_EVENT_SEVERITY = {"critical": Severity.CRITICAL, "high": Severity.CRITICAL, "medium-high": Severity.WARNING,
                      "medium": Severity.WARNING}


def osv_advisory_event(
    repo_id: str, sha: str, advisory: Advisory, why: str, rules: Sequence[Rule] | None
) -> NewEvent:
    """An OSV advisory a repo is told about: a warning when a repo can trigger it while loading. Its id
    names the repo and the advisory's version, not the revision it was found at."""
    name = repo_id.split("/", 1)[-1]
    repo_triggered = any(judge(advisory, p, rules).verdict == REPO for p in advisory.packages())
    return NewEvent(
        event_id=event_id(repo_id, None, ADVISORY_PUBLISHED, f"{advisory.key}@{advisory.modified}"),
        kind=ADVISORY_PUBLISHED,
        title=f"{name}: advisory {advisory.key}: {advisory.summary[:120]}",
        severity=(Severity.WARNING if repo_triggered else Severity.NOTICE).value,
        security=True,
        payload={"advisory": advisory.key, "ids": list(advisory.ids), "modified": advisory.modified,
                 "summary": advisory.summary, "why": why, "sha": sha, "source": "osv"},
    )


def own_advisory_event(repo_id: str, sha: str, record: Mapping[str, Any]) -> NewEvent:
    """One of hubwatch's own records, published, fixed or withdrawn at this revision (a fix or a withdrawal is a
    notice)."""
    ours = record["database_specific"]["hubwatch"]
    name = repo_id.split("/", 1)[-1]
    fixed = f" (fixed at {ours['fixed_sha'][:12]})" if ours.get("fixed_sha") else ""
    if record.get("withdrawn"):  # the rules that gave it were wrong: rejudging.py
        fixed = f" (withdrawn: {ours.get('withdrawn_reason', 'judged again')})"
    return NewEvent(
        # a withdrawal is its own event, even within the second the record was published in
        event_id=event_id(repo_id, sha, ADVISORY_PUBLISHED,
                          f"{record['id']}@{record['modified']}" + (" withdrawn" if record.get("withdrawn") else "")),
        kind=ADVISORY_PUBLISHED,
        title=f"{name}: {record['id']}: {own_classes()[ours['class']].title}{_about(ours)}{fixed}",
        severity=(Severity.NOTICE if fixed else OWN_EVENT_SEVERITY.get(ours["severity"], Severity.WARNING)).value,
        security=True,
        payload={"advisory": record["id"], "class": ours["class"], "modified": record["modified"],
                 "summary": record["summary"], "sha": sha, "source": "hubwatch"},
    )


def _about(ours: Mapping[str, Any]) -> str:
    """` (model.pt: os.system)`: the file and the callables of a pickle record; "" for other classes."""
    callables, paths = ours.get("callables") or [], ours.get("paths") or []
    return f" ({paths[0] if paths else '?'}: {', '.join(callables[:3])})" if callables else ""
