"""Following a base's family: the derivatives the Hub lists under `base_model:<relation>:<base>`, each checked
at its head for the parts that decide behaviour, their lineage against the base's stored history, and the
events that says who carries a base change ("reached 12 of 40 derivatives; 28 still behind") and who caught up.

Cost, per derivative: its head and card (one request), and only when the head moved: its file list (one) and
the files a part is read from whose bytes are not in the blob store already (a copy of the base's file costs
nothing), each read in one ranged GET; a GGUF repo's header in one ranged GET of up to 16 MiB. A derivative
whose head did not move costs its head check alone. Requests go through the library's session, so the
process's request budget (tracker/polling/budget.py) holds them back rather than let them exceed it.

Each derivative also has its own history (tracker/family/derivative_history.py): its baseline is stored from what the
first check read, at no extra request, and once its head moves its new commits are ingested by the watch's
pipeline before its parts are read from the ingested head; those requests count in the pass's report.

One derivative's failure (gone, gated, a malformed card, a cycle, an ingest that failed) is named in its row and
the pass report; the others are still checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from storage.blobs import git_blob_oid
from storage.derivatives import CheckedDerivative
from storage.event_log import NewEvent
from storage.history import NewFileScan
from storage.kinds import DERIVATIVE_CAUGHT_UP, DERIVATIVES_REACHED, is_repo_id
from tracker.errors import HubwatchError, RepoGated, RepoGone
from tracker.family import derivative_records
from tracker.family.derivative_history import NotIngested, catch_up, counted, has_history, owned_by_watch, store_baseline
from tracker.family.lineage import (
    NOT_IN_FORMAT,
    PART_WORDS,
    PARTS,
    PartLineage,
    PartValue,
    card_bases,
    changes_of,
    gguf_paths,
    lacking_parts,
    lineage,
    part_paths,
    parts_of,
    parts_stale,
    status_at,
)
from tracker.formats import FileScan
from tracker.formats.ranged import RangeError
from tracker.formats.registry import run_scan, scanner_for
from tracker.pipeline.snapshot_io import FetchedSnapshot
from tracker.revision.events import event_id
from tracker.revision.snapshot import FileEntry, Snapshot
from tracker.revision.stored import load_snapshot

if TYPE_CHECKING:
    from storage.front import Storage
    from storage.models import Derivative, DerivativeFollow, Revision
    from tracker.hub.client import CardHead, HubClient, ListedDerivative
    from tracker.pipeline.ingest import Ingestor

DEFAULT_RELATIONS = ("quantized", "finetune")
DEFAULT_LIMIT = 100
GGUF_FIRST_BLOCK = 16 * 2**20  # a Llama 3 header (128k tokens and 280k merges) is some 8 MiB: one request
GGUF_BUDGET = 64 * 2**20
GATED = "gated:"
# The change kind each part belongs to: a webhook filtered on `chat_template` hears who carries a template fix.
PART_CHANGE_KINDS = {"chat_template": "chat_template", "special_tokens": "tokenizer", "stop_tokens": "tokenizer",
                     "vocabulary": "tokenizer", "generation": "config"}
History = list[tuple[str, dict[str, PartValue]]]


@dataclass
class PassReport:
    """What one pass did: derivatives listed and checked, requests made, problems named (one line each)."""

    base_repo_id: str
    listed: int = 0
    followed: int = 0
    checked: int = 0
    requests: int = 0
    problems: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"listed": self.listed, "followed": self.followed, "checked": self.checked, "requests": self.requests,
                "problems": self.problems, "events": self.events}


def run_follow(store: Storage, ingestor: Ingestor, base_repo_id: str) -> PassReport | None:
    """One pass over the base's followed derivatives (None when the base's family is not followed)."""
    hub = ingestor.hub
    follow = store.derivatives.get_follow(base_repo_id)
    if follow is None:
        return None
    revisions = list(reversed(store.history.list_revisions(base_repo_id)))
    snapshots = [load_snapshot(store, r) for r in revisions]
    history: History = [(s.sha, parts_of(s)) for s in snapshots]
    report = PassReport(base_repo_id)
    listed, error = _discover(hub, follow, report)
    ancestors = _ancestors(snapshots[-1]) if snapshots else set()
    prior = {d.repo_id: d for d in store.derivatives.derivatives(base_repo_id, listed_only=False)}
    checker = _Checker(store, hub, base_repo_id, history, ingestor.max_file_bytes, report, ingestor)
    checked = [checker.check(item, prior.get(item.repo_id), ancestors) for item in listed]
    if error is None:
        report.problems += _dropped(follow, listed, prior)
    report.checked = sum(1 for c in checked if c.parts)
    events = _caught_up(base_repo_id, checked, prior, history) + _reached(follow, revisions, history, checked)
    report.events = [event.title for event, _, _ in events]
    head = revisions[-1].sha if revisions else None
    store.derivatives.record_pass(base_repo_id, checked, report.to_dict(), events, head, error)
    records = derivative_records.refresh(store, base_repo_id, revisions, history, hub.endpoint, store.clock())
    _log().info("derivatives_checked", repo_id=base_repo_id, osv_records_written=len(records),
                **{k: v for k, v in report.to_dict().items() if k != "events"})
    return report


def _discover(hub: HubClient, follow: DerivativeFollow, report: PassReport) -> tuple[list[ListedDerivative], str | None]:
    """The derivatives of each followed relation, the most downloaded `max_derivatives` of them."""
    found: dict[str, ListedDerivative] = {}
    error = None
    for relation in follow.relations:
        try:
            items = hub.list_derivatives(follow.base_repo_id, relation, follow.max_derivatives)
        except HubwatchError as err:
            error = f"listing {relation} derivatives: {err}"
            report.problems.append(error)
            continue
        finally:
            report.requests += 1
        for item in items:
            found.setdefault(item.repo_id, item)
    ranked = sorted(found.values(), key=lambda d: (-d.downloads, d.repo_id))
    report.listed = len(ranked)
    if len(ranked) >= follow.max_derivatives:
        report.problems.append(f"{follow.base_repo_id} has at least {len(ranked)} derivatives listed; the "
                               f"{follow.max_derivatives} most downloaded are followed (--derivatives-limit)")
    kept = ranked[: follow.max_derivatives]
    report.followed = len(kept)
    return kept, error


def _dropped(follow: DerivativeFollow, listed: list[ListedDerivative], prior: dict[str, Derivative]) -> list[str]:
    """The derivatives listed last pass and not now, named: gone from the listing (deleted, made private, or a card
    that names another base now), or, at the cap, overtaken in downloads. Their last check is kept."""
    names = {item.repo_id for item in listed}
    why = (f"no longer among the {follow.max_derivatives} most downloaded" if len(names) >= follow.max_derivatives
           else f"no longer listed under {follow.base_repo_id} (deleted, made private, or its card names another base now)")
    return [f"{d.repo_id}: {why}; its last check is kept, it is not followed"
            for d in prior.values() if d.listed and d.repo_id not in names]


def _ancestors(snapshot: Snapshot) -> set[str]:
    """The repos the base's own card names as its base_model (a derivative among them is a cycle)."""
    return set(card_bases(snapshot.text("README.md") or ""))


@dataclass
class _Checker:
    store: Storage
    hub: HubClient
    base: str
    history: History
    max_file_bytes: int
    report: PassReport
    ingestor: Ingestor
    exists: dict[str, bool] = field(default_factory=dict)  # other named bases asked about this pass

    def check(self, item: ListedDerivative, prior: Derivative | None, ancestors: set[str]) -> CheckedDerivative:
        """One derivative: its head and card, then its parts unless its head did not move."""
        def failed(problem: str, head_sha: str | None = None) -> CheckedDerivative:
            self.report.problems.append(f"{item.repo_id}: {problem}")
            return CheckedDerivative(item.repo_id, item.relation, item.downloads, head_sha, problem=problem)

        if item.repo_id == self.base or item.repo_id in ancestors:
            return failed(f"cycle: {item.repo_id} derives from {self.base}, whose card names {item.repo_id} as its base")
        head = None
        try:
            self.report.requests += 1
            head = self.hub.card_head(item.repo_id)
            unmoved = prior is not None and prior.head_sha == head.sha
            if unmoved and prior is not None and (prior.parts or (prior.problem or "").startswith(GATED)):
                if not prior.parts:  # gated at this head: its files stay refused until it moves
                    return failed(str(prior.problem), head.sha)
                parts = {k: PartValue.from_dict(v) for k, v in prior.parts.items()}
                sources = dict(prior.sources)
                notes = [prior.problem] if prior.problem else []  # the same head: the same card and files
                if parts_stale(prior.parts):  # computed by an older PARTS_VERSION: again, from stored bytes if held
                    stored = self._stored_parts(item.repo_id, head.sha, sources)
                    parts = stored if stored is not None else self._read_parts(item.repo_id, head.sha, None)[0]
            else:
                notes = _card_notes(head, self.base) + self._missing_bases(head)
                parts, sources, read_notes = self._moved(item.repo_id, head, prior)
                notes += read_notes
        except NotIngested as err:  # its last head is kept: the next pass tries again from the last revision stored
            return failed(f"not ingested: {err}")
        except RepoGone as err:
            return failed(f"gone: {err}")
        except RepoGated as err:
            return failed(f"{GATED} {err}", head.sha if head is not None else None)
        except HubwatchError as err:
            return failed(f"not checked: {err}")
        for note in notes:
            self.report.problems.append(f"{item.repo_id}: {note}")
        found = lineage(self.history, parts, lacking_parts(sources))
        return CheckedDerivative(item.repo_id, item.relation, head.downloads or item.downloads, head.sha, sources,
                                 {k: v.to_dict() for k, v in parts.items()}, {k: v.to_dict() for k, v in found.items()},
                                 problem="; ".join(notes) or None)

    def _missing_bases(self, head: CardHead) -> list[str]:
        """The other repos the card names as base_model that the Hub does not have (each asked once a pass)."""
        names = head.base_model if isinstance(head.base_model, list) else [head.base_model]
        notes = []
        for name in dict.fromkeys(n for n in names if isinstance(n, str) and is_repo_id(n) and n != self.base):
            if name not in self.exists:
                self.report.requests += 1
                try:
                    self.exists[name] = self.hub.repo_exists(name)
                except HubwatchError:
                    continue  # not known either way: not named
            if not self.exists[name]:
                notes.append(f"the card's base_model names {name}, which does not exist on the Hub")
        return notes

    def _moved(self, repo_id: str, head: CardHead, prior: Derivative | None) -> tuple[dict[str, PartValue], dict[str, str], list[str]]:
        """A head not checked before: its new commits ingested and its parts read from the head ingested, or, with
        no history stored yet, its parts read and its baseline stored from them. A watched derivative's history
        is its watch's: only its parts are read."""
        kept = not owned_by_watch(self.ingestor, repo_id)
        if kept and has_history(self.ingestor, repo_id):
            snapshot = counted(self.hub.endpoint, self._count, lambda: catch_up(self.ingestor, repo_id, head))
            return _parts_at(snapshot)
        parts, sources, notes, read = self._read_parts(repo_id, head.sha, prior)
        if kept:
            counted(self.hub.endpoint, self._count, lambda: store_baseline(self.ingestor, repo_id, head, read))
        return parts, sources, notes

    def _count(self, requests: int) -> None:
        self.report.requests += requests

    def _read_parts(self, repo_id: str, sha: str, prior: Derivative | None
                    ) -> tuple[dict[str, PartValue], dict[str, str], list[str], FetchedSnapshot]:
        """The derivative's parts at `sha`: its file list, then the bytes it does not share with what is stored;
        with the whole tree and what was read (contents, the GGUF scan, the bytes and scans new to the store)."""
        self.report.requests += 1
        files = {f.path: f for f in self.hub.list_files(repo_id, sha)}
        read = FetchedSnapshot(Snapshot(repo_id=repo_id, sha=sha, files=dict(files)))
        wanted, ggufs = _part_files(list(files))
        sources = {p: files[p].content_id for p in [*wanted, *ggufs]}
        if prior is not None and prior.parts and prior.sources == sources and not prior.problem:
            return {k: PartValue.from_dict(v) for k, v in prior.parts.items()}, sources, [], read
        snapshot = Snapshot(repo_id=repo_id, sha=sha, files={p: files[p] for p in [*wanted, *ggufs]})
        held = self.store.history.read_blobs(files[p].oid for p in wanted)
        notes = []
        for path in wanted:
            entry = files[path]
            if entry.oid in held:
                snapshot.contents[path] = held[entry.oid]
            elif entry.size > self.max_file_bytes:
                notes.append(f"{path} is over the file size limit: not read")
            else:
                data = self._read_whole(repo_id, sha, path, entry.size)
                if git_blob_oid(data) == entry.oid:
                    snapshot.contents[path] = read.new_blobs[entry.oid] = data
                else:
                    notes.append(f"{path}: the bytes read do not match the tree's oid")
        for path in ggufs:
            notes += self._scan_gguf(repo_id, sha, snapshot, path, read)
        read.snapshot.contents.update(snapshot.contents)
        read.snapshot.scans.update(snapshot.scans)
        return parts_of(snapshot), sources, notes, read

    def _stored_parts(self, repo_id: str, sha: str, sources: dict[str, str]) -> dict[str, PartValue] | None:
        """The parts of the files `sources` names (path -> content id) from the blob and file-scan stores,
        with no Hub request; None when any of them is not stored."""
        ggufs = [p for p in sources if p.endswith(".gguf")]
        plain = [p for p in sources if p not in ggufs]
        held = self.store.history.read_blobs(sources[p] for p in plain)
        scans = self.store.history.read_file_scans(sources[p] for p in ggufs)
        if any(sources[p] not in held for p in plain) or any(sources[p] not in scans for p in ggufs):
            return None
        snapshot = Snapshot(repo_id=repo_id, sha=sha)
        for path in plain:
            snapshot.files[path] = FileEntry(path, sources[path], len(held[sources[path]]))
            snapshot.contents[path] = held[sources[path]]
        for path in ggufs:
            snapshot.files[path] = FileEntry(path, sources[path], 0)
            snapshot.scans[path] = scans[sources[path]]
        return parts_of(snapshot)

    def _read_whole(self, repo_id: str, sha: str, path: str, size: int) -> bytes:
        source = self.hub.open_range(repo_id, sha, path, size, budget=max(size, 1), first_block=size)
        try:
            return source.read(0, size) if size else b""
        finally:
            self.report.requests += source.requests

    def _scan_gguf(self, repo_id: str, sha: str, snapshot: Snapshot, path: str, read: FetchedSnapshot) -> list[str]:
        entry = snapshot.files[path]
        stored = self.store.history.read_file_scans([entry.content_id])
        if entry.content_id in stored:
            from tracker.revision.stored import current

            snapshot.scans[path] = current(stored[entry.content_id], None)
            return []
        spec = scanner_for(path)
        assert spec is not None
        source = self.hub.open_range(repo_id, sha, path, entry.size, budget=GGUF_BUDGET, first_block=GGUF_FIRST_BLOCK)
        try:
            scan, data = run_scan(spec, source, path)
        except RangeError as err:
            return [f"{path}: header not read ({err})"]
        finally:
            self.report.requests += source.requests
        if data:  # the header's bytes, kept as a watch's ingest keeps them (the GGUF differ reads them)
            oid = git_blob_oid(data)
            read.new_blobs[oid] = data
            scan = FileScan(scan.format, scan.result, scan.bytes_read, scan.note, scan.rules_version, oid)
        snapshot.scans[path] = scan
        read.new_file_scans.append(_new_scan(entry.content_id, scan))
        return [f"{path}: {scan.note}"] if scan.note else []


def _part_files(paths: list[str]) -> tuple[list[str], list[str]]:
    """The files the parts are read from, and the one GGUF whose header is read when no transformers file has a template."""
    ggufs = [] if any(p in paths for p in ("tokenizer_config.json", "chat_template.jinja")) else gguf_paths(paths)[:1]
    return part_paths(paths), ggufs


def _parts_at(snapshot: Snapshot) -> tuple[dict[str, PartValue], dict[str, str], list[str]]:
    """The parts of an ingested head, read as a check reads them (the same files, the same GGUF)."""
    wanted, ggufs = _part_files(list(snapshot.files))
    chosen = [*wanted, *ggufs]
    part = Snapshot(repo_id=snapshot.repo_id, sha=snapshot.sha, files={p: snapshot.files[p] for p in chosen},
                    contents={p: snapshot.contents[p] for p in wanted if p in snapshot.contents},
                    scans={p: snapshot.scans[p] for p in ggufs if p in snapshot.scans})
    notes = [f"{p}: {snapshot.unavailable.get(p, 'not read')}" for p in wanted if p not in snapshot.contents]
    notes += [f"{p}: {snapshot.scans[p].note}" for p in ggufs if p in snapshot.scans and snapshot.scans[p].note]
    return parts_of(part), {p: snapshot.files[p].content_id for p in chosen}, notes


def _new_scan(content_id: str, scan: FileScan) -> NewFileScan:
    return NewFileScan(content_id, scan.format, scan.result, scan.bytes_read, scan.note, scan.rules_version, scan.scanned_oid)


def _card_notes(head: CardHead, base: str) -> list[str]:
    """What is wrong with a derivative's card's family tree, in words (nothing: an empty list)."""
    value = head.base_model
    if isinstance(value, str):
        names: list[Any] = [value]
    elif isinstance(value, list):
        names = value
    else:
        return [f"the card's base_model is malformed ({type(value).__name__}: {str(value)[:80]!r}); checked as the listing says"]
    bad = [n for n in names if not isinstance(n, str) or not is_repo_id(n)]
    notes = [f"the card's base_model holds {len(bad)} malformed entr{'y' if len(bad) == 1 else 'ies'} "
             f"({', '.join(repr(b)[:60] for b in bad[:3])}); the rest was read"] if bad else []
    if base not in names:
        notes.append(f"the card's base_model names {', '.join(str(n) for n in names[:3])}, not {base}")
    return notes


def _reached(follow: DerivativeFollow, revisions: list[Revision], history: History,
             checked: list[CheckedDerivative]) -> list[tuple[NewEvent, int | None, str | None]]:
    """One event per base revision after the last announced one that changed a part: how many derivatives
    carry the change, how many are behind it. The first pass announces nothing (it sets the mark)."""
    if follow.announced_sha is None or not history:
        return []
    shas = [sha for sha, _ in history]
    start = shas.index(follow.announced_sha) + 1 if follow.announced_sha in shas else len(shas)
    changes = changes_of(history)
    events = []
    for index in range(start, len(shas)):
        sha = shas[index]
        changed = [p for p in PARTS if sha in changes.get(p, []) and changes[p][0] != sha]
        if not changed:
            continue
        rows, carries, behind = [], 0, 0
        for item in checked:
            if not item.lineage:
                continue
            states = {p: status_at(history, p, PartLineage.from_dict(item.lineage[p]), sha) for p in changed}
            statuses = {s.status for s in states.values()}
            verdict = ("behind" if "behind" in statuses else "carries" if statuses == {"carries"}
                       else "diverged" if "diverged" in statuses else NOT_IN_FORMAT if statuses == {NOT_IN_FORMAT}
                       else "absent")
            carries += verdict == "carries"
            behind += verdict == "behind"
            rows.append({"repo_id": item.repo_id, "relation": item.relation, "status": verdict,
                         "parts": {p: s.to_dict() for p, s in states.items()}})
        total = len(rows)
        words = ", ".join(PART_WORDS[p] for p in changed)
        title = f"{follow.base_repo_id}@{sha[:12]} ({words}) reached {carries} of {total} derivatives; {behind} still behind"
        payload = {"base_repo_id": follow.base_repo_id, "sha": sha, "parts": changed, "carries": carries,
                   "behind": behind, "total": total, "derivatives": rows, "summaries": _reach_lines(rows),
                   "kinds": sorted({PART_CHANGE_KINDS[p] for p in changed})}
        event = NewEvent(event_id(follow.base_repo_id, sha, DERIVATIVES_REACHED), DERIVATIVES_REACHED, title, "notice",
                         payload=payload)
        events.append((event, revisions[index].id, sha))
    return events


def _reach_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The reach event's list, one line per derivative, the behind first: what feeds and webhooks show."""
    lines = []
    for row in sorted(rows, key=lambda r: (r["status"] != "behind", r["repo_id"])):
        words = []
        for part, state in row["parts"].items():
            if state["status"] == "behind":
                words.append(f"{PART_WORDS[part]} behind by {state['behind']} (matches {str(state['matched_sha'])[:12]})")
            elif state["status"] == NOT_IN_FORMAT:
                words.append(f"{PART_WORDS[part]} not in this format")
            elif state["status"] != "absent":
                words.append(f"{PART_WORDS[part]} {state['status']}")
        lines.append(f"{row['repo_id']} ({row['relation']}): {row['status']}" + (f": {'; '.join(words)}" if words else ""))
    return lines


def _caught_up(base: str, checked: list[CheckedDerivative], prior: dict[str, Derivative],
               history: History) -> list[tuple[NewEvent, int | None, str | None]]:
    """A derivative whose head moved and that now carries a part it was behind on (or had diverged from)."""
    events = []
    for item in checked:
        before = prior.get(item.repo_id)
        if not item.lineage or before is None or before.head_sha in (None, item.head_sha):
            continue
        for part in PARTS:
            old = (before.lineage or {}).get(part, {}).get("status")
            new = item.lineage.get(part, {})
            if old in ("behind", "diverged") and new.get("status") == "carries":
                matched = str(new.get("matched_sha"))
                title = f"{item.repo_id} now carries the {PART_WORDS[part]} of {base}@{matched[:12]}"
                payload = {"base_repo_id": base, "repo_id": item.repo_id, "part": part, "head_sha": item.head_sha,
                           "matched_sha": matched, "was": old}
                # The event id fits the column (64) whatever the names' lengths: a digest, stable across passes.
                caught_id = event_id(item.repo_id, item.head_sha, DERIVATIVE_CAUGHT_UP, f"{base}\n{part}")
                events.append((NewEvent(caught_id, DERIVATIVE_CAUGHT_UP, title, "notice", payload=payload), None, None))
    return events


def _log() -> Any:
    return structlog.get_logger(__name__)
