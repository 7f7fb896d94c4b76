"""The pipeline for one watch: head check, new commits oldest first, snapshot, diff, one write each.

All network I/O of a revision happens before its one write transaction; a failure aborts the revision
(nothing of it is written), is recorded on the watch with its next retry, and the next poll starts again
from the last revision stored. Whatever fails one watch's poll stays that watch's: a Hub fault, a
database that cannot be written (reported on the outcome, so the caller can pause polling) or a bug.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from estimator.cost import reprice
from storage.backoff import backoff_s
from storage.errors import RevisionNotStored
from storage.event_log import NewEvent
from storage.front import Storage
from storage.health import write_failure
from storage.history import NewChange, NewEstimate, NewFile, NewRevision
from storage.kinds import (
    COST_CHANGED,
    ESTIMATE_CHANGED,
    LINT_APPEARED,
    LINT_RESOLVED,
    PARKED_STATES,
    REPO_HISTORY_SQUASHED,
    REPO_VISIBILITY_CHANGED,
)
from storage.models import Revision, Watch
from tracker.advisories.service import AdvisoryService
from tracker.config import Settings
from tracker.differs import diff_snapshots
from tracker.differs.dataset import licence_said_once
from tracker.errors import HubwatchError, RateLimited, RepoMoved, RepoReplaced
from tracker.formats.pickle_rules import DANGEROUS, SAFE, UNKNOWN, UNREADABLE
from tracker.hub.client import CommitInfo, CommitWalk, HubClient, RepoHead
from tracker.pipeline.behaviour_store import BehaviourStore
from tracker.pipeline.cost_change import cost_change
from tracker.pipeline.dataset_revision import (
    DatasetRevision,
    DatasetSummary,
    dataset_events,
    is_dataset,
    summarize_dataset,
)
from tracker.pipeline.estimate_change import estimate_change, estimate_snapshot, should_estimate
from tracker.pipeline.repo_state import failed_state, gated_state, moved_state, restored_state, state_of
from tracker.pipeline.snapshot_io import FetchedSnapshot, Gate, fetch_snapshot, gate_mode, gated_note
from tracker.pipeline.template_matrix import MatrixStore, render_limits
from tracker.pipeline.verify import lint_changes, share_tokenizer_facts, should_verify, undecided, verify_snapshot
from tracker.polling.outcome import IngestedRevision, PollOutcome
from tracker.revision.changes import Change, ChangeKind, Severity
from tracker.revision.classify import is_pickle, kind_of
from tracker.revision.events import change_event, revision_event, revision_title
from tracker.revision.snapshot import Snapshot
from tracker.revision.stored import load_snapshot

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class IngestTarget:
    """A repo ingested without a watch row (a followed derivative, tracker/family/derivative_history.py): its progress
    is its stored revisions alone. `_ingest` takes it where it takes a Watch (`id` None: no row to move)."""

    repo_id: str
    branch: str = "main"
    id: None = None
    repo_meta: None = None


class Ingestor:
    def __init__(
        self, store: Storage, hub: HubClient, settings: Settings, advisories: AdvisoryService | None = None,
        dataset_summary: DatasetSummary = summarize_dataset,
    ) -> None:
        self.store = store
        self.dataset_summary = dataset_summary  # each dataset revision's changes beyond its files (dataset_revision.py)
        self.hub = hub
        self.settings = settings
        self.advisories = advisories
        self.max_file_bytes = settings.poll.max_file_mb * 1024 * 1024
        self.render_limits = render_limits(settings)
        self.matrices = MatrixStore(store, self.render_limits)  # chat template engine matrices, by the templates' key
        self.behaviours = BehaviourStore(store)  # tokenizer behaviours on the corpus, by the tokenizer's blobs

    def poll(
        self, watch: Watch, backfill: int | None = None, head: RepoHead | None = None, reach: str | None = None,
        cached: bool = False, head_sha: str | None = None,
    ) -> PollOutcome:
        """Bring one watch up to date with its branch. Never raises for a repo's own failure.

        `head`: the branch head the caller checked already (no second request). `reach`: on a first poll,
        backfill as far as this commit (stored as the baseline) instead of `backfill` commits; when it is
        not on the branch, the head alone is stored and `reach_missed` says so. `cached`: `watch` is the
        caller's copy from an earlier poll, trusted only to tell an unchanged head (one UPDATE, guarded by
        what the copy saw); a moved head reads the stored watch first. `head_sha`: the branch's head as a
        Hub webhook named it, taken in place of the head request only when the walk from it leads straight
        back to the watch's last commit; otherwise (another branch's commit, an old or unknown sha, a
        rewrite) the Hub is asked for the head as on any poll (`_walk_from_hint`)."""
        started = time.monotonic()
        started_at = datetime.now(UTC)  # on the line: where a Hub webhook's path to delivery spent its time
        outcome = PollOutcome(watch.repo_id, watch.branch, "unchanged")
        outcome.repo_state = outcome.previous_state = watch.repo_state or "active"
        try:
            self._poll(watch, outcome, watch.backfill if backfill is None else backfill, head, reach, cached, head_sha)
        except Exception as err:  # noqa: BLE001 - one watch's failure, whatever it is, is recorded on that watch
            self._fail(watch, outcome, err)
        outcome.duration_ms = int((time.monotonic() - started) * 1000)
        log_fields = dict(
            repo_id=watch.repo_id,
            branch=watch.branch,
            status=outcome.status,
            sha=outcome.head_sha,
            revisions=len(outcome.revisions),
            duration_ms=outcome.duration_ms,
            started_at=started_at.isoformat(),
        )
        if outcome.state_changed:
            log.warning("repo_state_changed", state=outcome.repo_state, previous=outcome.previous_state, **log_fields)
        if outcome.failed:
            log.warning("repo_poll_failed", error=outcome.error, repo_state=outcome.repo_state, **log_fields)
        else:
            log.info("repo_polled", **log_fields)
        return outcome

    def _fail(self, watch: Watch, outcome: PollOutcome, err: Exception) -> None:
        """Record the failure on the watch with its next retry. A Hub fault or a failing database is the
        world's (one log line, no traceback); anything else is a bug, logged once with its traceback."""
        outcome.status = "failed"
        if isinstance(err, HubwatchError):
            outcome.error = str(err)
        elif (reason := write_failure(err)) is not None:
            outcome.error = outcome.storage_error = f"storage failing: {reason}"
        else:
            outcome.error = f"internal error: {type(err).__name__}: {err}"[:500]
            log.error("repo_poll_crashed", repo_id=watch.repo_id, branch=watch.branch, exc_info=err)
        parked = _parks(watch, err, self.settings.poll.park_after)
        seen = failed_state(watch, err, outcome.repo_meta, parked) if state_of(err) and watch.id is not None else None  # type: ignore[arg-type]
        try:
            self.store.watches.record_poll_error(watch.id, outcome.error, self._next_retry(watch, err), seen)  # type: ignore[arg-type]
            if seen is not None:
                outcome.repo_state = seen.state
        except Exception as record_err:  # only a failing database is absorbed: anything else propagates
            reason = write_failure(record_err)
            if reason is None:
                raise
            outcome.storage_error = outcome.storage_error or f"storage failing: {reason}"

    def _poll(
        self, watch: Watch, outcome: PollOutcome, backfill: int, head: RepoHead | None, reach: str | None,
        cached: bool = False, head_sha: str | None = None,
    ) -> None:
        hinted = head is None and _hint_applies(watch, head_sha)
        head = head or (_hinted_head(watch, head_sha) if hinted else self.hub.head(watch.repo_id, watch.branch))  # type: ignore[arg-type]
        outcome.head_sha, outcome.repo_meta, outcome.answered_id = head.sha, head.meta(), head.repo_id
        known = (watch.repo_meta or {}).get("uid")
        if known and head.uid and head.uid != known:
            raise RepoReplaced(f"{watch.repo_id} does not exist on the Hub as it was watched: another repo (id {head.uid}, "
                               f"not {known}) now has the name; its commits are not merged into this history", head.uid)
        if self.settings.poll.on_move == "stop" and moved_state(watch, head.repo_id) is not None:
            raise RepoMoved(f"{watch.repo_id} was renamed to {head.repo_id} on the Hub: not followed ([poll] on_move = "
                            f"\"stop\"); watch the new name with `hubwatch watch add {head.repo_id}`", head.repo_id or "")
        if cached and head.sha != watch.last_sha:
            stored_watch = self.store.watches.get_watch(watch.repo_id, watch.branch)  # the copy may be behind another worker
            if stored_watch is None:
                return  # removed meanwhile
            watch = stored_watch
            if hinted and not _hint_applies(watch, head_sha):  # moved meanwhile: the Hub says where the head is
                return self._poll(watch, outcome, backfill, None, reach)
        if head.sha == watch.last_sha:
            # A repo-level fact seen without a new commit (made private, gated) becomes its own event,
            # written with the watch's new meta: the same transition at the same head is one event.
            facts = _repo_facts(watch, head, [])
            meta = head.meta()
            renamed = moved_state(watch, head.repo_id) is not None
            if not facts and not renamed and meta == watch.repo_meta and _clean(watch) and self.store.watches.stamp_unchanged_poll(watch):
                outcome.stamped = True  # the common case: one UPDATE, nothing read
                return
            events = [change_event(watch.repo_id, head.sha, REPO_VISIBILITY_CHANGED, fact, fact.summary) for fact in facts]
            outcome.notes.extend(fact.summary for fact in facts)
            self._record_ok(watch, outcome, meta, events=events, sha=head.sha)
            return
        revisions = self.store.history.list_revisions(watch.repo_id)  # newest first, read once per moved head
        stored = {r.sha for r in revisions}
        if watch.last_sha is None:
            if reach is not None:
                walk = self.hub.walk_commits(watch.repo_id, head.sha, stop_at=stored, until=reach)
                outcome.reach_missed = walk.stopped_at is None and not walk.reached_until
                newest_first = walk.commits[:1] if outcome.reach_missed else walk.commits
            else:
                walk = self.hub.walk_commits(watch.repo_id, head.sha, stop_at=stored, limit=backfill + 1)
                newest_first = walk.commits
            parent = walk.stopped_at
            dropped: list[str] = []
            squashed = False
        else:
            walk = self._walk_from_hint(watch, head.sha, stored) if hinted else self.hub.walk_commits(
                watch.repo_id, head.sha, stop_at=stored)
            if walk is None:  # the webhook's head is not a fast-forward of what is stored: poll as usual
                return self._poll(watch, outcome, backfill, None, reach)
            newest_first = walk.commits
            parent = watch.last_sha
            dropped = [] if walk.stopped_at == watch.last_sha else _dropped(watch, walk.stopped_at, revisions)
            squashed = bool(dropped) and walk.stopped_at is None and self._squashed(watch, walk)
            if dropped and walk.stopped_at is None and not squashed:
                # Nothing we stored is reachable any more: take the new head only, against what we saw.
                newest_first = walk.commits[:1]
        commits = list(reversed(newest_first))
        repo_facts = _repo_facts(watch, head, dropped, squashed)
        previous: Snapshot | None = None  # the snapshot just ingested: the next commit's parent
        gate = Gate(gate_mode(head.gated))  # a gated repo is followed through what stays readable
        for commit in commits:
            previous = self._ingest(watch, head, commit, parent, previous, repo_facts, outcome, gate=gate)
            parent = commit.sha
            repo_facts = []
        outcome.unread = list(gate.unread)
        if not commits and head.sha in stored:
            self.store.watches.move_watch(watch.id, head.sha, head.meta())  # type: ignore[arg-type]
        outcome.status = "ingested" if outcome.revisions else "unchanged"
        self._record_ok(watch, outcome, head.meta(), gate=gate)

    def _squashed(self, watch: Watch, walk: CommitWalk) -> bool:
        """Whether a branch whose stored commits are all gone was squashed: the new history's root holds exactly the
        files (by blob id) of the last revision stored, so every commit after it is stored against that. One tree
        request; a rewrite that changed content is not a squash."""
        root = walk.commits[-1] if walk.commits else None
        if root is None or watch.last_sha is None:
            return False
        try:
            stored = self.store.history.find_revision(watch.repo_id, watch.last_sha)
        except RevisionNotStored:
            return False
        files = {f.path: f.oid for f in self.store.history.revision_files(stored.id)}
        return files == {f.path: f.oid for f in self.hub.list_files(watch.repo_id, root.sha)}

    def _record_ok(self, watch: Watch, outcome: PollOutcome, meta: dict[str, Any], events: list[NewEvent] | None = None,
                   sha: str | None = None, gate: Gate | None = None) -> None:
        """Record a poll that succeeded; a watch in another state than active is restored with it (one event). A
        gated watch is restored only by a file the Hub served in this poll or the gate lifted, not by a head alone; a
        poll whose files the Hub refused (`gate` closed) makes it gated (one event)."""
        moved = None
        if gate is not None and gate.closed:
            seen = gated_state(watch, gate.mode, gate.unread, str(gate.refusal))
        else:
            read_files = gate.reads > 0 if gate is not None else bool(outcome.revisions)
            moved = moved_state(watch, outcome.answered_id)
            seen = moved or restored_state(watch, meta, read_files=read_files)
        move_to = outcome.answered_id if moved is not None and watch.id is not None else None
        result = self.store.watches.record_poll_ok(watch.id, meta, events=events or (), sha=sha, restored=seen,  # type: ignore[arg-type]
                                                   move_to=move_to)
        if seen is not None:
            outcome.repo_state = seen.state
        if result is not None:
            outcome.history_moved_to = None if result.refused else result.new
            outcome.move_refused = result.refused
            log.warning("repo_history_moved" if result.refused is None else "repo_history_not_moved", repo_id=result.old,
                        moved_to=result.new, rows=result.moved, reason=result.refused)

    def ingest_since(self, target: IngestTarget, head: RepoHead) -> tuple[PollOutcome, Snapshot | None]:
        """Bring a repo without a watch row up to `head`: its commits after the stored revision they descend
        from, oldest first, one write each; the head's snapshot comes back (None: stored already). The repo must
        have a stored revision (the caller stores its baseline with `ingest_commit`). Raises what fails: the
        revisions written before it stay, and the next call resumes after them."""
        outcome = PollOutcome(target.repo_id, target.branch, "unchanged", head.sha)
        revisions = self.store.history.list_revisions(target.repo_id)
        stored = {r.sha for r in revisions}
        if not revisions or head.sha in stored:
            return outcome, None
        walk = self.hub.walk_commits(target.repo_id, head.sha, stop_at=stored)
        newest_first, parent = walk.commits, walk.stopped_at
        dropped = [] if parent is not None else _dropped(target, None, revisions)  # type: ignore[arg-type]
        if parent is None:  # nothing stored is reachable any more: the new head alone, against what we saw
            newest_first, parent = walk.commits[:1], revisions[0].sha
        repo_facts = _repo_facts(target, head, dropped)  # type: ignore[arg-type]
        snapshot: Snapshot | None = None
        for commit in reversed(newest_first):
            snapshot = self._ingest(target, head, commit, parent, snapshot, repo_facts, outcome)  # type: ignore[arg-type]
            parent, repo_facts = commit.sha, []
        outcome.status = "ingested" if outcome.revisions else "unchanged"
        return outcome, snapshot

    def ingest_commit(self, target: IngestTarget, head: RepoHead, commit: CommitInfo, fetched: FetchedSnapshot) -> PollOutcome:
        """Store `commit` as the baseline of a repo without a watch row, from a snapshot the caller fetched."""
        outcome = PollOutcome(target.repo_id, target.branch, "unchanged", head.sha)
        self._ingest(target, head, commit, None, None, [], outcome, fetched)  # type: ignore[arg-type]
        outcome.status = "ingested" if outcome.revisions else "unchanged"
        return outcome

    def _walk_from_hint(self, watch: Watch, sha: str, stored: set[str]) -> CommitWalk | None:
        """The walk from a Hub webhook's head when it leads straight back to the watch's last commit; None
        (and one log line) when it does not or the Hub cannot walk it: nothing is written from it."""
        try:
            walk = self.hub.walk_commits(watch.repo_id, sha, stop_at=stored)
        except HubwatchError as err:
            reason = str(err)
        else:
            if walk.stopped_at == watch.last_sha:
                return walk
            reason = f"does not lead back to {watch.last_sha}: met {walk.stopped_at or 'no stored commit'}"
        log.info("head_hint_unverified", repo_id=watch.repo_id, branch=watch.branch, sha=sha, reason=reason[:300])
        return None

    def _ingest(
        self,
        watch: Watch,
        head: RepoHead,
        commit: CommitInfo,
        parent_sha: str | None,
        previous: Snapshot | None,
        repo_facts: list[Change],
        outcome: PollOutcome,
        fetched: FetchedSnapshot | None = None,
        gate: Gate | None = None,
    ) -> Snapshot | None:
        """Ingest one commit (from `fetched` when the caller fetched it); returns its snapshot (None when it was
        stored already). `gate`: files the Hub refuses (a gated repo) are noted on the revision, not fatal."""
        if self.store.history.has_revision(watch.repo_id, commit.sha):
            if watch.id is not None:
                self.store.watches.move_watch(watch.id, commit.sha)
            return None
        if previous is not None and previous.sha == parent_sha:
            parent_snapshot: Snapshot | None = previous  # not read back from the database
        else:
            parent_snapshot = self._stored_snapshot(watch.repo_id, parent_sha)
        fetched = fetched or fetch_snapshot(self.hub, self.store, watch.repo_id, commit.sha, self.max_file_bytes,
                                            self.settings.scan.rules, parent_snapshot, gate)  # what the parent holds is not read again
        is_baseline = parent_snapshot is None
        if is_baseline:
            changes = [_baseline_change(fetched.snapshot)]
        else:
            # a tokenizer seen before (even by an earlier process) is not run; the same tokenizer is not even read
            self.behaviours.load_for_diff(parent_snapshot, fetched.snapshot)
            changes = diff_snapshots(parent_snapshot, fetched.snapshot, render_limits=self.render_limits)
            behaviour_scans, behaviour_blobs = self.behaviours.rows(parent_snapshot, fetched.snapshot)
            fetched.new_file_scans.extend(behaviour_scans)
            fetched.new_blobs.update(behaviour_blobs)
        engine_changes, matrix_scans, matrix_blobs = self.matrices.changes(parent_snapshot, fetched.snapshot)
        changes = repo_facts + _gated_changes(gate, fetched) + changes + engine_changes
        if is_dataset(watch.repo_id):  # the dataset summary: before the write, like every read of the revision
            changes += self.dataset_summary(DatasetRevision(
                self.hub, self.store, fetched, parent_snapshot, head.gated, commit.sha == head.sha, commit.created_at,
                self._requires_latest(watch.repo_id)))
            changes = licence_said_once(changes)  # the card's licence keys said by dataset.licence_changed alone
        fetched.new_file_scans.extend(matrix_scans)
        fetched.new_blobs.update(matrix_blobs)
        if fetched.gated:  # weights unread: the stored estimate stands rather than one from part of the headers
            estimate, estimate_events = None, []
        else:
            estimate, estimate_events = self._estimate(watch.repo_id, commit.sha, fetched.snapshot, changes, is_baseline)
        if not fetched.gated:  # a gated revision's files are partly unread: no finding comes or goes on them
            estimate_events = estimate_events + self._verify(watch.repo_id, commit.sha, parent_snapshot,
                                                             fetched.snapshot, changes, is_baseline)
        title = revision_title(watch.repo_id, changes, is_baseline, len(fetched.snapshot.files))
        events = [revision_event(watch.repo_id, commit.sha, title, commit.title, changes, is_baseline,
                                 fetched.dataset_table), *estimate_events]
        events += [change_event(watch.repo_id, commit.sha, REPO_HISTORY_SQUASHED, c) for c in repo_facts if c.detail.get("squash")]
        events += dataset_events(watch.repo_id, commit.sha, changes, fetched.dataset_table)
        extra_writes = []
        if self.advisories is not None:  # OSV is queried here, before the write; a failure is marked pending
            check = self.advisories.check_revision(
                watch.repo_id, commit.sha, fetched.snapshot, parent_snapshot, changes, commit.title
            )
            extra_writes.append(check.write)
        saved = self.store.history.save_revision(
            _new_revision(
                watch, commit, parent_sha if not is_baseline else None, fetched, changes, events, estimate, is_baseline
            ),
            watch_id=watch.id,
            extra_writes=extra_writes,
            repo_meta=head.meta(),
        )
        if saved is None:  # another process stored this commit a moment ago: theirs stands
            log.info("revision_already_stored", repo_id=watch.repo_id, sha=commit.sha)
            return fetched.snapshot
        outcome.revisions.append(IngestedRevision(commit.sha, commit.title, title, changes, is_baseline))
        log.info(
            "revision_stored",
            repo_id=watch.repo_id,
            sha=commit.sha,
            changes=len(changes),
            new_blobs=len(fetched.new_blobs),
            baseline=is_baseline,
        )
        return fetched.snapshot

    def _requires_latest(self, repo_id: str) -> bool:
        """Whether the config's [[watch]] entry for this dataset says its licence requires the latest version."""
        return any(spec.key == repo_id and spec.licence_requires_latest for spec in self.settings.watch)

    def _estimate(
        self, repo_id: str, sha: str, snapshot: Snapshot, changes: list[Change], is_baseline: bool
    ) -> tuple[NewEstimate | None, list[NewEvent]]:
        """Rerun the estimator on a first revision or a structural change; its change joins `changes`."""
        stored = self.store.history.latest_estimate(repo_id)
        previous = None if stored is None else NewEstimate(stored[1].parameters_total, stored[1].result, stored[1].error)
        if not should_estimate(is_baseline, changes, previous.result if previous else None):
            return None, []
        settings = self.settings.estimate
        priced = self.settings.cost
        table = priced.card_table()
        estimate = estimate_snapshot(snapshot, settings.seq_len_cap, settings.lora_rank, settings.targets,
                                     settings.serve_contexts, settings.kv_dtype, settings.gpu_memory_utilization,
                                     cost=priced.workload(), cards=table)
        if estimate is None:
            return None, []
        if not is_baseline and previous is not None and (estimate.result, estimate.error) == (
            previous.result,
            previous.error,
        ):
            return None, []  # the stored estimate still stands: no row repeats it
        change = estimate_change(None if is_baseline else previous, estimate)
        # Both sides at today's prices: a price changed in [cost] cards moves no revision's cost (docs: cost.md)
        costly = None if is_baseline or previous is None or previous.result is None or estimate.result is None else \
            cost_change(reprice(previous.result.get("cost"), table), reprice(estimate.result.get("cost"), table),
                        priced.change_threshold)
        events = [] if costly is None else [change_event(repo_id, sha, COST_CHANGED, costly)]
        changes.extend([costly] if costly else [])
        if change is None:
            return estimate, events
        changes.append(change)
        if change.severity < Severity.NOTICE:
            return estimate, events
        return estimate, [change_event(repo_id, sha, ESTIMATE_CHANGED, change), *events]

    def _verify(self, repo_id: str, sha: str, parent: Snapshot | None, snapshot: Snapshot, changes: list[Change],
                is_baseline: bool) -> list[NewEvent]:
        """Rerun the structure verifier when the config, tokenizer or weights moved (or on a first revision): the
        findings that appeared and those resolved against the parent join `changes`, each a notice or louder an
        event (lint.appeared, lint.resolved). A first revision's findings are its change, announced by its
        revision.ingested event, as its estimate is."""
        if not should_verify(is_baseline, changes):
            return []
        if parent is not None and not is_baseline:
            share_tokenizer_facts(parent, snapshot)
        before = None if is_baseline or parent is None else verify_snapshot(parent)
        appeared, resolved = lint_changes(before, verify_snapshot(snapshot), undecided(snapshot))
        events = []
        for change, kind in ((appeared, LINT_APPEARED), (resolved, LINT_RESOLVED)):
            if change is None:
                continue
            changes.append(change)
            if change.severity >= Severity.NOTICE and not is_baseline:
                events.append(change_event(repo_id, sha, kind, change))
        return events

    def _stored_snapshot(self, repo_id: str, sha: str | None) -> Snapshot | None:
        if sha is None:
            return None
        try:
            revision = self.store.history.find_revision(repo_id, sha)
        except RevisionNotStored:
            return None
        return load_snapshot(self.store, revision, self.settings.scan.rules)

    def _next_retry(self, watch: Watch, err: Exception) -> datetime:
        """retry_min, doubling per failure in a row up to retry_max; after a 429 never sooner than the
        Hub said, and doubling from there on repeated 429s."""
        poll = self.settings.poll
        if _parks(watch, err, poll.park_after):
            return self.store.clock() + timedelta(seconds=poll.parked_recheck_s)
        told_s = err.retry_after_s if isinstance(err, RateLimited) and err.retry_after_s else 0.0
        base = max(float(poll.retry_min_s), told_s)
        wait_s = max(told_s, backoff_s(base, watch.error_count, float(poll.retry_max_s)))
        return self.store.clock() + timedelta(seconds=wait_s)


def _parks(watch: Watch, err: Exception, park_after: int) -> bool:
    """Whether this failure parks the watch: its repo gone or disabled `park_after` polls in a row (this one too)."""
    return park_after > 0 and state_of(err) in PARKED_STATES and watch.error_count + 1 >= park_after


def _hint_applies(watch: Watch, head_sha: str | None) -> bool:
    """A Hub webhook's head stands in for the head request only on a watch past its first poll, with its
    visibility known (the head carries it on unchanged), and only when it names another commit."""
    meta = watch.repo_meta or {}
    return head_sha is not None and watch.last_sha not in (None, head_sha) and "private" in meta and "gated" in meta


def _hinted_head(watch: Watch, head_sha: str) -> RepoHead:
    """The head a Hub webhook named, with the visibility last seen (a change of it is the next head request's)."""
    meta = watch.repo_meta or {}
    return RepoHead(sha=head_sha, private=meta["private"], gated=meta["gated"], uid=meta.get("uid"))


def _repo_facts(watch: Watch, head: RepoHead, dropped: list[str], squashed: bool = False) -> list[Change]:
    facts = []
    if dropped and squashed:  # the same files under a new root: no content moved, so no rewrite to warn of
        facts.append(
            Change(
                kind=ChangeKind.REPO,
                path="",
                summary=f"history squashed: {len(dropped)} commit(s) seen before are no longer on {watch.branch} "
                        f"({', '.join(s[:12] for s in dropped[:5])}), kept here; the squashed commit holds the same files",
                severity=Severity.WARNING,
                detail={"squash": True, "dropped": dropped, "branch": watch.branch},
            )
        )
    elif dropped:
        shown = ", ".join(s[:12] for s in dropped[:5])
        facts.append(
            Change(
                kind=ChangeKind.REPO,
                path="",
                summary=f"history rewritten: {len(dropped)} commit(s) seen before are no longer on {watch.branch} ({shown})",
                severity=Severity.WARNING,
                detail={"rewrite": True, "dropped": dropped, "branch": watch.branch},
                security=True,
            )
        )
    before = watch.repo_meta or {}
    for key in ("private", "gated"):
        if key in before and before.get(key) != head.meta().get(key):
            facts.append(
                Change(
                    kind=ChangeKind.REPO,
                    path="",
                    summary=f"repo {key}: {before.get(key)!r} -> {head.meta().get(key)!r}",
                    severity=Severity.WARNING,
                    detail={"key": key, "old": before.get(key), "new": head.meta().get(key)},
                )
            )
    return facts


def _gated_changes(gate: Gate | None, fetched: FetchedSnapshot) -> list[Change]:
    """The revision's note of the files the Hub refused (a gated repo): what was not read, so not compared."""
    if gate is None or not fetched.gated:
        return []
    return [Change(
        kind=ChangeKind.REPO,
        path="",
        summary=gated_note(gate, fetched.gated),
        severity=Severity.NOTICE,
        detail={"gated": gate.mode, "unread": list(fetched.gated)},
    )]


def _baseline_change(snapshot: Snapshot) -> Change:
    kinds = Counter(kind_of(path).value for path in snapshot.files)
    pickles = sorted(p for p in snapshot.files if is_pickle(p))
    code = sorted(p for p in snapshot.files if kind_of(p) is ChangeKind.CUSTOM_CODE)
    parts = [f"{n} {k}" for k, n in sorted(kinds.items())]
    summary = f"baseline: {len(snapshot.files)} files ({', '.join(parts)})"
    verdicts = {p: _pickle_verdict(snapshot, p) for p in pickles}
    if pickles:
        summary += f"; pickle files: {', '.join(_pickle_phrase(p, verdicts[p], snapshot) for p in pickles[:5])}"
    if code:
        summary += f"; custom code: {', '.join(code[:5])}"
    return Change(
        kind=ChangeKind.REPO,
        path="",
        summary=summary,
        severity=Severity.INFO,
        detail={
            "baseline": True,
            "files_by_kind": dict(kinds),
            "pickle_files": pickles,
            "pickle_verdicts": verdicts,
            "custom_code": code,
            "unavailable": dict(snapshot.unavailable),
        },
        security=bool(code) or any(v != SAFE for v in verdicts.values()),
    )


def _pickle_verdict(snapshot: Snapshot, path: str) -> str:
    scan = snapshot.scans.get(path)
    return str(scan.result.get("verdict", UNREADABLE)) if scan is not None and scan.format == "pickle" else UNREADABLE


def _pickle_phrase(path: str, verdict: str, snapshot: Snapshot) -> str:
    """`model.bin (dangerous: os.system)`, `consolidated.00.pth (tensor rebuilds only)`: a pickle in a baseline."""
    if verdict == SAFE:
        return f"{path} (tensor rebuilds only)"
    if verdict in (DANGEROUS, UNKNOWN):
        scan = snapshot.scans[path]
        named = [f"{i['module']}.{i['name']}" for i in scan.result.get("imports", []) if i.get("verdict") == verdict]
        return f"{path} ({verdict}: {', '.join(named[:3]) or 'not all read'})"
    return f"{path} (not checked)"


def _new_revision(
    watch: Watch,
    commit: CommitInfo,
    parent_sha: str | None,
    fetched: FetchedSnapshot,
    changes: list[Change],
    events: list[NewEvent],
    estimate: NewEstimate | None,
    is_baseline: bool,
) -> NewRevision:
    snapshot = fetched.snapshot
    files = [
        NewFile(
            path=f.path,
            oid=f.oid,
            size=f.size,
            kind=kind_of(f.path).value,
            lfs_sha256=f.lfs_sha256,
            lfs_size=f.lfs_size,
            held=f.path in snapshot.contents,
            note=snapshot.unavailable.get(f.path),
        )
        for f in snapshot.files.values()
    ]
    return NewRevision(
        repo_id=watch.repo_id,
        sha=commit.sha,
        parent_sha=parent_sha,
        branch=watch.branch,
        committed_at=commit.created_at,
        title=commit.title,
        message=commit.message,
        authors=list(commit.authors),
        is_baseline=is_baseline,
        files=files,
        blobs=fetched.new_blobs,
        weight_files=fetched.new_weight_files,
        file_scans=fetched.new_file_scans,
        changes=[
            NewChange(
                kind=c.kind.value,
                path=c.path,
                summary=c.summary,
                severity=c.severity.value,
                structural=c.structural,
                security=c.security,
                detail=c.detail,
            )
            for c in changes
        ],
        events=events,
        estimate=estimate,
    )


def _dropped(watch: Watch, fork_sha: str | None, revisions: list[Revision]) -> list[str]:
    """Stored revisions of this branch (`revisions`, newest first) no longer reachable from its head."""
    dropped = []
    for revision in revisions:
        if revision.sha == fork_sha:
            break
        if revision.branch == watch.branch:
            dropped.append(revision.sha)
    return dropped


def _clean(watch: Watch) -> bool:
    """No error to clear: an unchanged poll of this watch need only stamp the time."""
    state = watch.repo_state or "active"
    followed = state == "moved" and bool((watch.state_detail or {}).get("moved_from"))  # polled under its new name
    return (watch.error_count == 0 and watch.last_error is None and watch.next_retry_at is None
            and (state == "active" or followed))
