"""`hubwatch outdated`: for each pinned revision, what changed on its branch upstream since: the changes
of every later revision, and the advisories announced at them (kind `advisories`).

Each repo becomes a watch; its history from the head back to the pinned commit is ingested once by the
daemon's own pipeline (same differs, same storage) and every later run reads it from the database: an
unchanged repo costs one head check, a stored one nothing more.
"""

from __future__ import annotations

from collections import Counter
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from storage.errors import WatchExists
from storage.front import Storage
from storage.kinds import ADVISORY_PUBLISHED, SEVERITY_RANK, is_repo_key
from storage.models import Revision, Watch
from tracker.errors import HubError, RepoDisabled, RepoGated, RepoGone, RevisionNotFound
from tracker.hub.client import HubClient, RepoHead
from tracker.pins.cache import Pin
from tracker.pins.pin_forms import is_short_dataset_key
from tracker.pipeline.ingest import Ingestor

if TYPE_CHECKING:
    from tracker.pins.base_lineage import BaseComparison

WATCH_SOURCE = "outdated"
ADVISORIES = "advisories"  # the kind advisory events are counted under in a report
ADVISORY_PREFIX = ADVISORY_PUBLISHED.split(".", 1)[0] + "."  # advisory.published and any later advisory.* event


@dataclass(frozen=True)
class SinceChange:
    """One change on the branch after the pinned revision."""

    sha: str
    kind: str
    path: str
    summary: str
    severity: str
    security: bool = False
    behaviour: bool = False  # what the model does changed (tokenizer ids, stop set, a runtime's template): at least warning


def behaviour_changing(kind: str, detail: Any) -> bool:
    """A change of what the model does, not only of its files: corpus ids (or special ids) that changed, the
    stop-token set or the template's end of turn, or a runtime the chat template broke in or now renders in."""
    detail = detail if isinstance(detail, dict) else {}
    tokenizer = detail.get("tokenizer_behaviour")
    if kind == "tokenizer" and isinstance(tokenizer, dict):
        return tokenizer.get("compared") is True and tokenizer.get("changed") is not False
    return kind == "stop_tokens" or (kind == "chat_template" and detail.get("change") in ("engine_broken", "engine_fixed"))


def since_change(sha: str, change: Any) -> SinceChange:
    """A stored change after a pin; a behaviour-changing one is at least `warning` there, whatever its own severity."""
    behaviour = behaviour_changing(change.kind, change.detail)
    severity = change.severity
    if behaviour and SEVERITY_RANK[severity] < SEVERITY_RANK["warning"]:
        severity = "warning"
    return SinceChange(sha, change.kind, change.path, change.summary, severity, change.security, behaviour)


def behaviour_since(store: Storage, repo_id: str, pinned_sha: str, head_sha: str) -> list[SinceChange] | None:
    """The behaviour-changing changes after `pinned_sha` up to `head_sha` as stored (None when the stored
    history does not join them)."""
    chain = stored_chain(store.history.list_revisions(repo_id), head_sha, pinned_sha)
    if chain is None:
        return None
    found: list[SinceChange] = []
    for revision, changes in _changes_of(store, chain):
        found += [c for c in (since_change(revision.sha, x) for x in changes) if c.behaviour]
    return found


# The statuses that are the repo's state on the Hub (tracker/pipeline/repo_state.py): each says what to do, and
# `outdated` exits 3 for them when nothing else failed.
STATE_STATUSES = ("gone", "disabled", "gated", "branch_missing", "moved")
# What to do about a pin whose repo is in each state.
PIN_ADVICE = {
    "gone": "the pinned revision cannot be fetched: if the repo was made private, set the token variable to a token "
            "with access; if it was deleted, replace the model (a copy you keep, or another repo)",
    "disabled": "the Hub disabled the repo: the pinned revision cannot be fetched until it restores it; replace the model",
    "gated": "request access on the repo's Hub page and set the token variable to a token that was granted it",
    "branch_missing": "the pin's branch no longer exists: pin another branch of the repo",
}


@dataclass
class ModelReport:
    """Where one pin stands. `status`: up_to_date | behind | rewritten | not_in_history | gone | disabled | gated |
    branch_missing | moved | unavailable. `moved`: the repo was renamed on the Hub to `moved_to`; it is compared
    under that name (commits behind and changes as for `behind`). `lineage`: for a followed derivative, the base
    changes its pinned copy misses."""

    pin: Pin
    status: str
    head_sha: str | None = None
    commits_behind: int | None = None
    changes: list[SinceChange] = field(default_factory=list)
    message: str | None = None
    lineage: BaseComparison | None = None
    moved_to: str | None = None

    @property
    def checked(self) -> bool:
        """Whether upstream could be compared at all (the repo answered as itself, or under its new name; a gated
        one by what stays readable, `commits_behind` then known)."""
        if self.status == "gated":
            return self.commits_behind is not None
        return self.status not in ("gone", "disabled", "branch_missing", "unavailable")

    @property
    def repo_state(self) -> str | None:
        """The repo's state on the Hub when the report is one (gone, disabled, gated, branch_missing, moved)."""
        return self.status if self.status in STATE_STATUSES else None

    @property
    def advice(self) -> str | None:
        """What to do about the pin, for a repo in a state."""
        if self.status == "moved":
            return (f"renamed on the Hub: update the pin's repo id to {self.moved_to} (the old name redirects only "
                    "until another repo takes it)")
        return PIN_ADVICE.get(self.status)

    @property
    def max_severity(self) -> str | None:
        return max((c.severity for c in self.changes), key=SEVERITY_RANK.__getitem__, default=None)

    def summary(self) -> dict[str, dict[str, int]]:
        """Changes counted by kind, then severity: {"chat_template": {"warning": 1}}."""
        out: dict[str, Counter[str]] = {}
        for change in self.changes:
            out.setdefault(change.kind, Counter())[change.severity] += 1
        return {kind: dict(sorted(counts.items(), key=lambda kv: SEVERITY_RANK[kv[0]])) for kind, counts in sorted(out.items())}

    def reaches(self, severity: str) -> bool:
        """Whether any change since the pin is at or above `severity`; a derivative's copy behind its base on
        a behaviour part is a `warning`-level finding."""
        behind = self.lineage is not None and self.lineage.behind and SEVERITY_RANK["warning"] >= SEVERITY_RANK[severity]
        return behind or any(SEVERITY_RANK[c.severity] >= SEVERITY_RANK[severity] for c in self.changes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo_id": self.pin.repo_id,
            "branch": self.pin.branch,
            "entry": self.pin.entry,
            "detached": self.pin.detached,
            "pinned_sha": self.pin.sha,
            "head_sha": self.head_sha,
            "status": self.status,
            "commits_behind": self.commits_behind,
            "max_severity": self.max_severity,
            "summary": self.summary(),
            "changes": [c.__dict__ for c in self.changes],
            "message": self.message,
            "repo_state": self.repo_state,
            "moved_to": self.moved_to,
            "what_to_do": self.advice,
        } | ({"base_lineage": self.lineage.to_dict()} if self.lineage is not None else {})


class OutdatedCheck:
    """Compares pins with their branches upstream, through the daemon's store, Hub client and ingestor."""

    def __init__(self, store: Storage, hub: HubClient, ingestor: Ingestor, interval_s: int) -> None:
        self.store, self.hub, self.ingestor, self.interval_s = store, hub, ingestor, interval_s

    def check(self, pin: Pin) -> ModelReport:
        """One pin's report; a repo in a state (gone, disabled, gated, without the branch, renamed) or unreachable
        is a status, never an exception. A renamed repo is compared under its new name, reported `moved`."""
        try:
            head = self.hub.head(pin.repo_id, pin.branch)
        except RepoGone as err:
            return ModelReport(pin, "gone", message=f"{err}{_short_name_hint(pin.repo_id)}")
        except RepoDisabled as err:
            return ModelReport(pin, "disabled", message=str(err))
        except RepoGated as err:
            return ModelReport(pin, "gated", message=str(err))
        except RevisionNotFound:
            return ModelReport(pin, "branch_missing", message=f"{pin.repo_id} has no branch {pin.branch} any more")
        except HubError as err:
            return ModelReport(pin, "unavailable", message=str(err))
        moved_to = head.repo_id if head.repo_id and head.repo_id.casefold() != pin.repo_id.casefold() else None
        if moved_to is not None and is_short_dataset_key(pin.repo_id) and is_repo_key(moved_to):
            with suppress(ValueError):  # an answer that is not a dataset's ORG/NAME is not kept
                self.store.renames.record_short_name(pin.repo_id, moved_to)  # the Renovate datasource answers it too
        report = self._compare(pin if moved_to is None else self._follow(pin, moved_to, head), head)
        if moved_to is None:
            return report
        report.pin, report.moved_to = pin, moved_to
        if not report.checked:
            return report
        report.status = "moved"
        report.message = "; ".join(filter(None, [f"{pin.repo_id} was renamed to {moved_to} on the Hub", report.message]))
        return report

    def _follow(self, pin: Pin, new: str, head: RepoHead) -> Pin:
        """The pin under its repo's new name. A watch still under the old name is polled first: with on_move =
        "follow" its history moves to the new name, and the comparison reads it there."""
        old_watch = self.store.watches.get_watch(pin.repo_id, pin.branch)
        if old_watch is not None:
            self.ingestor.poll(old_watch, head=head)
        return replace(pin, repo_id=new)

    def _compare(self, pin: Pin, head: RepoHead) -> ModelReport:
        """The pin against the branch head `head`, through the stored history (ingested up to the head first)."""
        if head.sha == pin.sha:
            return ModelReport(pin, "up_to_date", head.sha, 0)
        outcome = self.ingestor.poll(self.watch_of(pin), head=head, reach=pin.sha)
        if outcome.failed:
            status = outcome.repo_state if outcome.repo_state in STATE_STATUSES else "gated" if head.gated else "unavailable"
            return ModelReport(pin, status, head.sha, message=outcome.error)
        chain = None if outcome.reach_missed else stored_chain(self.store.history.list_revisions(pin.repo_id), head.sha, pin.sha)
        if chain is None:
            report = self._off_history(pin, head.sha, known_missing=outcome.reach_missed)
        else:
            records = [(revision, c) for revision, cs in _changes_of(self.store, chain) for c in cs]
            changes = [since_change(r.sha, c) for r, c in records]
            changes += _advisories_of(self.store, chain)
            rewritten = any(pin.sha in (c.detail or {}).get("dropped", ()) for _, c in records)
            message = f"{pin.sha[:12]} was dropped from {pin.branch} by a force-push" if rewritten else None
            report = ModelReport(pin, "rewritten" if rewritten else "behind", head.sha, len(chain), changes, message)
        if outcome.repo_state == "gated":  # followed through what stays readable: a state to act on all the same
            unread = f" (not read: {', '.join(outcome.unread[:5])})" if outcome.unread else ""
            report.status = "gated"
            report.message = "; ".join(filter(None, [
                f"{pin.repo_id} is gated ({head.gated}): its files are refused to this token, so the changes since the "
                f"pin are those the file list, sizes and LFS hashes show{unread}", report.message]))
        return report

    def watch_of(self, pin: Pin) -> Watch:
        """The watch the pin is checked through (added, source `outdated`, on first use)."""
        watch = self.store.watches.get_watch(pin.repo_id, pin.branch)
        if watch is not None:
            return watch
        try:
            return self.store.watches.add_watch(pin.repo_id, pin.branch, self.interval_s, source=WATCH_SOURCE)
        except WatchExists:  # another process added it a moment ago
            return self.store.watches.get_watch(pin.repo_id, pin.branch)  # type: ignore[return-value]

    def _off_history(self, pin: Pin, head_sha: str, known_missing: bool) -> ModelReport:
        """The pinned commit is not in the stored chain from the head: not on the branch (rewritten), or
        older than the history hubwatch stored for it (listed, not ingested)."""
        if not known_missing:
            walk = self.hub.walk_commits(pin.repo_id, head_sha, stop_at=set(), until=pin.sha)
            if walk.reached_until:
                message = f"{pin.sha[:12]} is older than the history hubwatch stored for {pin.branch}: changes not diffed"
                return ModelReport(pin, "not_in_history", head_sha, len(walk.commits) - 1, message=message)
        rewrite = SinceChange(
            head_sha, "repo", "", f"history rewritten: {pin.sha[:12]} is no longer on {pin.branch}", "warning", True
        )
        return ModelReport(pin, "rewritten", head_sha, None, [rewrite], f"{pin.sha[:12]} is not on {pin.branch} (history rewritten)")


def stored_chain(revisions: list[Revision], head_sha: str, pinned_sha: str) -> list[Revision] | None:
    """The stored revisions after `pinned_sha` up to `head_sha`, newest first, following each revision's
    parent; None when the chain from the head does not reach the pinned commit."""
    by_sha = {r.sha: r for r in revisions}
    chain: list[Revision] = []
    sha: str | None = head_sha
    while sha is not None and sha != pinned_sha and len(chain) <= len(by_sha):
        revision = by_sha.get(sha)
        if revision is None:
            return None
        chain.append(revision)
        sha = revision.parent_sha
    return chain if sha == pinned_sha else None


def _advisories_of(store: Storage, chain: list[Revision]) -> list[SinceChange]:
    """The advisories the repo was told about at the revisions since the pin (OSV matches and hubwatch's
    own records, `advisory.*` events), as changes of kind `advisories`, newest revision first like the rest."""
    queries = store.read_model
    out = []
    for revision in chain:
        if revision.id is None:
            continue
        for event in queries.events_for_revision(revision.id):
            if not event.kind.startswith(ADVISORY_PREFIX):
                continue
            extra = event.payload or {}
            summary = f"{extra['advisory']}: {extra.get('summary') or event.title}" if extra.get("advisory") else event.title
            out.append(SinceChange(event.sha or revision.sha, ADVISORIES, str(extra.get("advisory") or event.kind), summary,
                                   event.severity, event.security))
    return out


def _changes_of(store: Storage, chain: list[Revision]) -> list[tuple[Revision, list]]:
    by_revision = store.history.changes_by_revision(r.id for r in chain if r.id is not None)
    return [(r, by_revision.get(r.id, [])) for r in chain]  # type: ignore[arg-type]


def _short_name_hint(repo_id: str) -> str:
    """For a dataset pinned by its canonical short name (`datasets/wikitext`) the Hub no longer resolves: what to do."""
    from tracker.pins.pin_forms import is_short_dataset_key

    if not is_short_dataset_key(repo_id):
        return ""
    return ("; a dataset's canonical short name (no org) the Hub does not redirect: find the dataset's ORG/NAME on the "
            "Hub (the short names moved under orgs, wikitext to Salesforce/wikitext) and pin that")
