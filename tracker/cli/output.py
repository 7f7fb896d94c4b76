"""What the CLI prints: JSON-ready dicts and plain text for watches, revisions, changes, polls and deliveries."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from storage.kinds import repo_type_of

if TYPE_CHECKING:
    from storage.models import AuthorWatch, ChangeRecord, FileScan, Revision, RevisionFile, Watch
    from tracker.polling.outcome import PollOutcome
    from tracker.revision.changes import Change

_MARK = {"info": " ", "notice": "*", "warning": "!", "critical": "!!"}
_VERDICT_MARK = {"repo": "!!", "unclassified": "? ", "runtime": "  "}


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def watch_dict(w: Watch) -> dict[str, Any]:
    return {
        "kind": "repo",
        "repo_id": w.repo_id,
        "repo_type": repo_type_of(w.repo_id),  # model, or dataset (its repo_id then datasets/org/name)
        "branch": w.branch,
        "interval_s": w.interval_s,
        "source": w.source,
        "last_sha": w.last_sha,
        "last_polled_at": _iso(w.last_polled_at),
        "last_ok_at": _iso(w.last_ok_at),
        "last_error": w.last_error,
        "error_count": w.error_count,
        "next_retry_at": _iso(w.next_retry_at),
        "repo_state": w.repo_state or "active",
        "state_since": _iso(w.state_since),
        "state_detail": w.state_detail,
    }


def author_watch_dict(a: AuthorWatch) -> dict[str, Any]:
    """A followed author (`watch add 'ORG/*'`) as `watch list --json` shows it: its models are listed as
    watches of their own (source "author")."""
    return {"kind": "author", "repo_id": f"{a.author}/*", "author": a.author, "branch": None,
            "repo_type": repo_type_of(f"{a.author}/*"),
            "interval_s": a.interval_s, "source": a.source, "created_at": _iso(a.created_at),
            "last_listed_at": _iso(a.last_listed_at)}


def change_dict(c: ChangeRecord | Change) -> dict[str, Any]:
    if hasattr(c, "to_dict"):  # a differ's Change, not yet stored
        return c.to_dict()
    return {
        "kind": c.kind,
        "path": c.path,
        "summary": c.summary,
        "severity": c.severity,
        "structural": c.structural,
        "security": c.security,
        "detail": c.detail,
    }


def revision_dict(r: Revision, changes: Sequence[ChangeRecord] = ()) -> dict[str, Any]:
    return {
        "repo_id": r.repo_id,
        "sha": r.sha,
        "parent_sha": r.parent_sha,
        "branch": r.branch,
        "committed_at": _iso(r.committed_at),
        "ingested_at": _iso(r.ingested_at),
        "title": r.title,
        "message": r.message,
        "authors": r.authors,
        "baseline": r.is_baseline,
        "file_count": r.file_count,
        "changes": [change_dict(c) for c in changes],
        **behaviour_keys(changes),
    }


def behaviour_keys(changes: Iterable[ChangeRecord | Change]) -> dict[str, Any]:
    """What the revision does, read off its changes (null when it did not change it): `tokenizer_behaviour` (the
    corpus before and after), `stop_tokens` (the stop set before and after), `end_of_turn` (a template ending an
    assistant turn with a token generation does not stop on)."""
    out: dict[str, Any] = {"tokenizer_behaviour": None, "stop_tokens": None, "end_of_turn": None}
    for change in map(change_dict, changes):
        detail = change["detail"] if isinstance(change["detail"], dict) else {}
        if change["kind"] == "tokenizer" and "tokenizer_behaviour" in detail:
            out["tokenizer_behaviour"] = detail["tokenizer_behaviour"]
        elif change["kind"] == "stop_tokens" and isinstance(detail.get("stop_tokens"), dict):
            out["stop_tokens"] = detail["stop_tokens"]
        elif change["kind"] == "stop_tokens" and "end_of_turn" in detail:
            out["end_of_turn"] = detail["end_of_turn"]
    return out


def stop_tokens_shown(change: dict[str, Any] | None, snapshot: Any) -> dict[str, Any]:
    """`show --json`'s `stop_tokens`: the revision's change of the set when it made one (as `history` gives it),
    with `changed`, and always `by_runtime`: each runtime (transformers, vllm, tgi, llama.cpp) mapped to the ids it
    stops on at this revision, read from its stored files."""
    from tracker.differs.stop_tokens import by_runtime, stop_sets

    return {**(change or {}), "changed": change is not None, "by_runtime": by_runtime(stop_sets(snapshot))}


def file_dict(f: RevisionFile, scan: FileScan | None = None) -> dict[str, Any]:
    """A file of a revision; with its scan (tracker/formats), the scan's facts under the format's key."""
    out = {
        "path": f.path,
        "kind": f.kind,
        "oid": f.oid,
        "size": f.size,
        "lfs_sha256": f.lfs_sha256,
        "held": f.held,
        "note": f.note,
    }
    view = SCAN_VIEWS.get(scan.format) if scan is not None else None
    if view is not None and scan is not None:
        out[view[0]] = view[1](scan)
    return out


def gguf_facts(scan: FileScan) -> dict[str, Any]:
    """`show --json`'s `gguf` of a GGUF file: what its header says (`tensors` is their count)."""
    r = scan.result
    return {
        "architecture": r.get("architecture"),
        "name": r.get("name"),
        "context_length": r.get("context_length"),
        "file_type": r.get("file_type"),
        "tensors": r.get("tensor_count"),
        "parameters": r.get("parameters"),
        "tensor_bytes": r.get("tensor_bytes"),
        "tensor_types": r.get("types"),
        "chat_templates": sorted(r.get("chat_templates") or {}),
        "special_tokens": r.get("special_tokens"),
        "vocab_sha256": (r.get("tokenizer") or {}).get("vocab_sha256"),
        "split": r.get("split"),
        "bytes_read": scan.bytes_read,
        "note": scan.note,
    }


def gguf_models(files: Sequence[RevisionFile], scans: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`show --json`'s `gguf_models`: each GGUF model of a revision, a file or a split's parts as one (their tensors
    and bytes summed, the first part's facts), with the parts present and the parts missing named."""
    from tracker.differs.gguf_splits import merged_scan, splits

    by_path = {f.path: scans[f.lfs_sha256 or f.oid] for f in files if scans.get(f.lfs_sha256 or f.oid) is not None
               and scans[f.lfs_sha256 or f.oid].format == "gguf"}  # fmt: skip
    grouped = splits(f.path for f in files if f.path.lower().endswith(".gguf"))
    in_splits = {p for model in grouped.values() for p in model.paths}
    out = [{"model": path, "paths": [path], "parts": 1, "missing": [], **gguf_facts(scan)}
           for path, scan in sorted(by_path.items()) if path not in in_splits]
    for name, model in sorted(grouped.items()):
        merged = merged_scan(model, by_path)
        facts = gguf_facts(merged) if merged is not None else {}
        out.append({"model": name, "paths": model.paths, "parts": model.parts, "missing": model.missing, **facts})
    return out


def pickle_scan_facts(scan: FileScan) -> dict[str, Any]:
    """`show --json`'s `pickle_scan` of a pickle-bearing file: its verdict, each import judged, the rules that
    judged them, what was read and what could not be."""
    r = scan.result
    return {
        "verdict": r.get("verdict", "unreadable"),
        "imports": [{"module": i.get("module"), "name": i.get("name"), "verdict": i.get("verdict"),
                     **({"class": i["class"]} if i.get("class") else {})}  # a named class (training arguments)
                    for i in r.get("imports") or ()],
        "rules_version": scan.rules_version,
        "bytes_read": scan.bytes_read,
        "note": scan.note,
    }


# format -> (the key of a file's facts in `show --json`, how to make them from its scan)
SCAN_VIEWS: dict[str, tuple[str, Any]] = {"gguf": ("gguf", gguf_facts), "pickle": ("pickle_scan", pickle_scan_facts)}


def outcome_dict(o: PollOutcome) -> dict[str, Any]:
    return {
        "repo_id": o.repo_id,
        "branch": o.branch,
        "status": o.status,
        "head_sha": o.head_sha,
        "error": o.error,
        "repo_state": o.repo_state,
        "previous_state": o.previous_state,
        "notes": list(o.notes),
        "unread_files": list(o.unread),
        "history_moved_to": o.history_moved_to,
        "move_refused": o.move_refused,
        "duration_ms": o.duration_ms,
        "revisions": [
            {
                "sha": r.sha,
                "title": r.title,
                "event": r.event_title,
                "baseline": r.is_baseline,
                "changes": [c.to_dict() for c in r.changes],
            }
            for r in o.revisions
        ],
    }


def change_lines(changes: Iterable[ChangeRecord | Change], indent: str = "    ") -> list[str]:
    lines = []
    for c in changes:
        d = change_dict(c)
        flags = "".join([" [structural]" if d["structural"] else "", " [security]" if d["security"] else ""])
        lines.append(f"{indent}{_MARK.get(d['severity'], ' '):<2} {d['severity']:<8} {d['summary']}{flags}")
    return lines


def revision_text(r: Revision, changes: Sequence[ChangeRecord]) -> list[str]:
    when = r.committed_at.strftime("%Y-%m-%d %H:%M")
    authors = ", ".join(r.authors) or "unknown"
    head = f"{r.sha[:12]}  {when}  {r.title or '(no title)'}  [{authors}]"
    if r.is_baseline:
        head += "  (baseline)"
    return [head, *change_lines(changes)]


def outcome_text(o: PollOutcome) -> list[str]:
    where = f"{o.repo_id}@{o.branch}"
    if o.failed and o.repo_state != "active":
        from tracker.pipeline.repo_state import ADVICE  # here: `watch list` never loads the pipeline

        told = "now" if o.state_changed else "still"
        return [f"{where}: FAILED: repo {told} {o.repo_state.replace('_', ' ')}: {o.error}",
                f"  what to do: {ADVICE.get(o.repo_state, 'wait for the Hub')}"]
    if o.failed:
        return [f"{where}: FAILED: {o.error}"]
    lines = []
    if o.state_changed and o.repo_state == "active":
        lines.append(f"{where}: repo restored: answers again after being {o.previous_state.replace('_', ' ')}")
    elif o.state_changed:  # a state a poll goes on in: renamed, followed through the Hub's redirect
        lines.append(f"{where}: repo now {o.repo_state.replace('_', ' ')}"
                     + (f" to {o.answered_id}: followed through the Hub's redirect" if o.repo_state == "moved" else ""))
    if o.history_moved_to:
        lines.append(f"{where}: history moved to {o.history_moved_to}: watched under the new name from now on (the old "
                     "name's history, feeds, pages and API answer with it)")
    elif o.move_refused:
        lines.append(f"{where}: history not moved to {o.answered_id}: {o.move_refused}; polled under the old name "
                     "through the Hub's redirect")
    lines.extend(f"{where}: {note}" for note in o.notes)
    if o.unread:
        from tracker.pipeline.repo_state import ADVICE  # here: `watch list` never loads the pipeline

        shown = ", ".join(o.unread[:8]) + (f" and {len(o.unread) - 8} more" if len(o.unread) > 8 else "")
        lines += [f"{where}: gated: {len(o.unread)} file(s) not read (the Hub refuses them to this token): {shown}",
                  f"  what to do: {ADVICE['gated']}"]
    renamed_here = o.repo_state == "moved" and o.answered_id is not None and o.answered_id.casefold() == o.repo_id.casefold()
    if not o.revisions:
        if o.repo_state != "active" and not o.state_changed and not renamed_here:
            lines.append(f"{where}: repo still {o.repo_state.replace('_', ' ')}; no new commit ({(o.head_sha or '')[:12]})")
        elif not lines:
            lines.append(f"{where}: unchanged ({(o.head_sha or '')[:12]})")
        else:
            lines.append(f"{where}: no new commit ({(o.head_sha or '')[:12]})")
        return lines
    lines.append(f"{where}: {len(o.revisions)} new revision(s)")
    for r in o.revisions:
        lines.append(f"  {r.sha[:12]}  {r.title}")
        lines.append(f"    -> {r.event_title}")
        lines.extend(change_lines(r.changes, indent="      "))
    return lines


def watch_text(w: Watch) -> str:
    state = f"at {w.last_sha[:12]}" if w.last_sha else "not polled yet"
    if (w.repo_state or "active") != "active":
        since = f" since {w.state_since:%Y-%m-%d %H:%M}" if w.state_since else ""
        state += f"; repo {w.repo_state.replace('_', ' ')}{since}"
        detail = w.state_detail or {}
        if w.repo_state == "moved":
            state += f" (from {detail['moved_from']})" if detail.get("moved_from") else f" (to {detail.get('moved_to')})"
        if (w.state_detail or {}).get("parked"):
            state += " (parked: polled again when the listing or a Hub webhook shows it, or at its next retry)"
    if w.last_error:
        state += f"; last error: {w.last_error}"
    return f"{w.repo_id}@{w.branch}  every {w.interval_s}s  ({w.source})  {state}"


def delivery_lines(d: dict[str, Any]) -> list[str]:
    """One delivery of `deliveries list` (an `OutboxItem.as_dict()`), and its last error unless delivered."""
    event, sub = d["event"], d["subscription"]
    when = f"next try {d['next_attempt_at']}" if d["status"] == "pending" else (d["delivered_at"] or d["last_attempt_at"] or "")
    lines = [
        f"{d['id']}  {d['status']:<9} {d['attempts']:>2} tries  {d['last_status_code'] or '-'!s:>3}  "
        f"#{sub['id']} {sub['format']} {sub['url']}  {event['kind']} {event['repo_id']}@{(event['sha'] or '')[:12]}  {when}"
    ]
    if d["last_error"] and d["status"] != "delivered":
        lines.append(f"    {d['last_error']}")
    return lines


def report_lines(report: dict[str, Any]) -> list[str]:
    """The plain-text view of an advisory report (`hubwatch advisories REPO`)."""
    checked = report.get("checked_at") or "never"
    lines = [f"{report['repo_id']} @ {report['sha'][:12]} (committed {report['committed_at'][:10]}, checked {checked})"]
    advice = report.get("advice")
    if advice is None:
        lines.append("  not checked yet (run: hubwatch advisories recheck)")
    else:
        lines.append(f"  loader advice: {advice['sentence']}")
        if advice.get("package_sentence"):
            lines.append(f"  package floors: {advice['package_sentence']}")
        for package in advice["packages"]:
            not_counted = package.get("not_counted") or []
            if not package["because"] and not package["unfixed"] and not not_counted:
                continue
            head = f"    {package['package']} {package['floor'] or '(no fixed release sets a floor)'} for this model"
            if "package_floor" in package:
                overall = package["package_floor"] or "(no fixed release sets a floor)"
                unfixed = package.get("package_unfixed") or []
                head += f"; {overall} for the package overall" + (f", no release fixes {', '.join(unfixed)}" if unfixed else "")
            lines.append(head)
            for b in package["because"] + package["unfixed"]:
                lines.append(f"      {b['floor']:<18} {b['key']:<22} {b['trigger']}: {b['summary'][:80]}")
            lines += [f"      note: {n}" for n in package["notes"]]
            for b in not_counted:
                lines.append(f"      not counted: {b['floor']:<18} {b['key']:<22} {b.get('relevance') or b['trigger']}")
        if advice["runtime_only"]:
            lines.append(f"    runtime-only, not counted: {', '.join(advice['runtime_only'])}")
        if advice["unclassified"]:
            lines.append(f"    no rule matched, not counted: {', '.join(advice['unclassified'])}")
        lines += [f"    note: {n}" for n in advice["notes"]]
    matches = report.get("osv_matches") or []
    lines.append(f"  OSV matches for the versions this revision names ({len(matches)}):")
    for m in matches:
        others = ", ".join(i for i in m["ids"] if i != m["advisory"])
        relevant = m.get("relevant", True)
        mark = _VERDICT_MARK.get(m["verdict"], "  ") if relevant else "--"
        lines.append(
            f"    {mark} {m['advisory']}" + (f" ({others})" if others else "")
            + f"  {m['package']} {m['version']}  {m['status']}  [{m['verdict']}: {m['rule'] or '-'}]  {m['summary'][:70]}"
        )
        if not relevant:
            lines.append(f"         {m.get('relevance') or 'not relevant to this model'}")
    own = report.get("own_advisories") or []
    lines.append(f"  hubwatch advisories ({len(own)}):")
    for record in own:
        ours = record["database_specific"]["hubwatch"]
        state = f"fixed at {ours['fixed_sha'][:12]}" if ours.get("fixed_sha") else "open"
        state = f"withdrawn {record['withdrawn']}" if record.get("withdrawn") else state
        lines.append(f"    {record['id']}  {ours['severity']:<11} {record['summary'][len(report['repo_id']) + 2:][:80]}"
                     f"  introduced {ours['introduced_sha'][:12]}, {state}")
    facts = report.get("facts") or {}
    problems = facts.get("problems") or []
    if problems:
        lines.append(f"  could not be read ({len(problems)}):")
        lines += [f"    {p['reason']}" for p in problems]
    if report.get("pending"):
        lines.append(f"  OSV pending: {report['pending']} (asked again later)")
    return lines
