"""hubwatch's own advisories: each security-relevant change of a revision becomes an OSV record.

A record per (repo, introducing commit, class): id with the schema's private prefix (`x_HUBWATCH-...`),
`affected` as a GIT range on the repo's URL introduced at the commit, `references` to the commit, and
our classification in `database_specific.hubwatch`. When a later revision removes every file a record
is about (the pickle files, the .py files), the record gets a `fixed` event at that commit.

Classes and their severities are data (`data/own_classes.json`); how a Change is recognised is one small
function per class below, reading the Change's kind, flags and detail as the differs write them.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from tracker.revision.snapshot import Snapshot

CLASSES_FILE = Path(__file__).parent / "data" / "own_classes.json"
ID_PREFIX = "x_HUBWATCH-"
SCHEMA_VERSION = "1.7.0"  # the GIT ecosystem this record's `affected.package` uses
MAX_LISTED = 20


@dataclass(frozen=True)
class OwnClass:
    id: str
    title: str
    severity: str  # critical | high | medium-high | medium
    cvss: str
    why: str


@lru_cache(maxsize=1)
def own_classes() -> dict[str, OwnClass]:
    doc = json.loads(CLASSES_FILE.read_text(encoding="utf-8"))
    return {c["id"]: OwnClass(c["id"], c["title"], c["severity"], c["cvss"], c["why"]) for c in doc["classes"]}


@dataclass(frozen=True)
class ChangeView:
    """What own.py reads of a Change (tracker.revision.changes) or a stored ChangeRecord: plain strings."""

    kind: str
    path: str
    summary: str
    severity: str
    security: bool
    detail: Mapping[str, Any]

    @classmethod
    def of(cls, change: Any) -> ChangeView:
        return cls(
            kind=str(getattr(change.kind, "value", change.kind)),
            path=str(change.path),
            summary=str(change.summary),
            severity=str(getattr(change.severity, "value", change.severity)),
            security=bool(change.security),
            detail=change.detail or {},
        )


# --- recognising the classes -------------------------------------------------------------------------


def _status(c: ChangeView) -> str | None:
    return c.detail.get("status")


def _findings(c: ChangeView) -> list[Mapping[str, Any]]:
    found = c.detail.get("security")
    return [f for f in found if isinstance(f, Mapping)] if isinstance(found, list) else []


def _code_key(f: Mapping[str, Any], key: str) -> bool:
    issue = str(f.get("issue", ""))
    return issue.startswith(key) and not issue.endswith("removed")


def _pickle_verdict(c: ChangeView) -> str | None:
    """The scan verdict of a pickle added or changed ("unreadable" for one the differ could not check, or
    a Change stored before pickles were scanned; "rejudged": a stored scan judged again, rejudging.py);
    None for anything else."""
    if c.kind != "weights" or _status(c) not in ("added", "changed", "rejudged"):
        return None
    scan = c.detail.get("pickle_scan")
    if isinstance(scan, Mapping):
        return str(scan.get("verdict"))
    return "unreadable" if c.detail.get("format") == "pickle" else None


def _pickle_added(c: ChangeView) -> list[str]:
    return [c.path] if _pickle_verdict(c) == "unreadable" else []


def _pickle_dangerous(c: ChangeView) -> list[str]:
    return [c.path] if _pickle_verdict(c) == "dangerous" else []


def _pickle_unknown(c: ChangeView) -> list[str]:
    return [c.path] if _pickle_verdict(c) == "unknown" else []


def _pickle_replaces(c: ChangeView) -> list[str]:
    pickles = c.detail.get("replaced_by_pickle") if c.kind == "weights" else None
    return [str(p) for p in pickles] if isinstance(pickles, list) else []


def _custom_code(c: ChangeView) -> list[str]:
    ok = c.kind == "custom_code" and c.path.endswith(".py") and _status(c) in ("added", "changed")
    return [c.path] if ok else []


def _requirements_source(c: ChangeView) -> list[str]:
    return [c.path] if c.kind == "custom_code" and c.detail.get("new_sources") else []


def _auto_map(c: ChangeView) -> list[str]:
    hit = any(_code_key(f, "auto_map") and not f.get("repos") for f in _findings(c))
    return [c.path] if hit else []


def _cross_repo(c: ChangeView) -> list[str]:
    hit = any(_code_key(f, "auto_map") and f.get("repos") for f in _findings(c))
    return [c.path] if hit else []


def _config_code(c: ChangeView) -> list[str]:
    def names_code(f: Mapping[str, Any]) -> bool:
        if _code_key(f, "custom_pipelines"):
            return True
        if f.get("issue") == "attention kernel from another repo":
            return True
        return f.get("issue") == "trust_remote_code" and f.get("severity") == "critical"

    return [c.path] if any(names_code(f) for f in _findings(c)) else []


def _chat_dangerous(c: ChangeView) -> list[str]:
    # the token rules' findings, and the syntax walk's escape shapes (its warnings are not "dangerous")
    critical = [f for f in c.detail.get("findings", []) if f.get("severity", "critical") == "critical"]
    return [c.path] if c.kind == "chat_template" and critical else []


def _silent_swap(c: ChangeView) -> list[str]:
    return [c.path] if c.kind == "weights" and c.detail.get("silent_weight_swap") else []


def _gguf(c: ChangeView) -> list[str]:
    ok = c.kind == "weights" and c.detail.get("format") == "gguf" and _status(c) in ("added", "changed")
    split = c.detail.get("split")
    if ok and isinstance(split, Mapping) and split.get("paths"):
        return [str(p) for p in split["paths"]]  # a split's parts: the record closes when they are all gone
    return [c.path] if ok else []


def _special_tokens(c: ChangeView) -> list[str]:
    return [c.path] if c.kind == "tokenizer" and c.security and not _findings(c) else []


def _stop_tokens_dropped(c: ChangeView) -> list[str]:
    """The tokens dropped from the stop set, or from any runtime's (the differ's `critical` stop-set change), by label."""
    moved = c.detail.get("stop_tokens") if c.kind == "stop_tokens" else None
    if not isinstance(moved, Mapping):
        return []
    dropped = [t for t in moved.get("dropped") or () if isinstance(t, Mapping)]
    for runtime in (moved.get("runtime_changes") or {}).values():
        dropped += [t for t in (runtime or {}).get("dropped") or () if isinstance(t, Mapping)]
    return list(dict.fromkeys(_token_label(t) for t in dropped))


def _token_label(token: Mapping[str, Any]) -> str:
    """As the differ labels a stop token: `128009 <|eot_id|>`, the id alone, or the text of a token without an id."""
    if token.get("id") is None:
        return str(token.get("text"))
    return f"{token['id']} {token['text']}" if token.get("text") else str(token["id"])


def _dropped_stop_tokens(views: Sequence[ChangeView]) -> list[dict[str, Any]]:
    """Each token dropped, with the sets it left (`union`, or a runtime's): what must come back to fix the record."""
    out: dict[tuple[Any, Any], dict[str, Any]] = {}
    for view in views:
        moved = view.detail.get("stop_tokens") or {}
        places = [("union", moved.get("dropped") or ())]
        places += [(rt, (change or {}).get("dropped") or ()) for rt, change in (moved.get("runtime_changes") or {}).items()]
        for where, tokens in places:
            for t in tokens:
                entry = out.setdefault((t.get("id"), t.get("text")), {"id": t.get("id"), "text": t.get("text"), "sets": []})
                if where not in entry["sets"]:
                    entry["sets"].append(where)
    return list(out.values())[:MAX_LISTED]


def _stop_tokens_back(tokens: Sequence[Mapping[str, Any]], snapshot: Snapshot) -> bool:
    """Whether every dropped token is again in each set it left (by id; by text for a token without an id)."""
    from tracker.differs.stop_tokens import TokenNames, stop_set, stop_sets

    names = TokenNames(snapshot)
    sets = {"union": stop_set(snapshot, names), **stop_sets(snapshot, names)}
    held = {where: {t.id if t.id is not None else t.text for t in found} for where, found in sets.items()}
    return all((t.get("id") if t.get("id") is not None else t.get("text")) in held.get(where, ())
               for t in tokens for where in t.get("sets") or ())


def _license(c: ChangeView) -> list[str]:
    if c.kind == "dataset" and c.detail.get("event") == "dataset.licence_changed":
        return [c.path]  # a dataset's licence, said by its own change (the card's change leaves it out)
    if c.kind != "files" or not c.security:
        return []
    topics = {m.get("topic") for m in c.detail.get("metadata") or () if isinstance(m, Mapping)}
    return [c.path] if topics & {"license", "gating"} else []


def _history_rewrite(c: ChangeView) -> list[str]:
    return [str(s) for s in c.detail.get("dropped") or ()] if c.kind == "repo" and c.detail.get("rewrite") else []


RECOGNISERS: dict[str, Callable[[ChangeView], list[str]]] = {
    "pickle-added": _pickle_added,
    "pickle-dangerous-import": _pickle_dangerous,
    "pickle-unknown-import": _pickle_unknown,
    "pickle-replaces-safetensors": _pickle_replaces,
    "custom-code": _custom_code,
    "requirements-source": _requirements_source,
    "auto-map": _auto_map,
    "cross-repo-code": _cross_repo,
    "config-code-reference": _config_code,
    "chat-template-dangerous": _chat_dangerous,
    "silent-weight-swap": _silent_swap,
    "gguf-changed": _gguf,
    "special-tokens": _special_tokens,
    "stop-token-dropped": _stop_tokens_dropped,
    "license-or-gating": _license,
    "history-rewrite": _history_rewrite,
}
# Records of these classes are about files: gone files close them.
PATH_CLASSES = frozenset({"pickle-added", "pickle-dangerous-import", "pickle-unknown-import",
                          "pickle-replaces-safetensors", "custom-code", "gguf-changed"})
# Records of this class are closed when every dropped token is back where it was dropped from.
STOP_CLASS = "stop-token-dropped"
# Records of these classes are closed when no auto_map is left.
AUTO_MAP_CLASSES = frozenset({"auto-map", "cross-repo-code"})


def classify(change: Any) -> dict[str, list[str]]:
    """{class id: paths (or dropped shas)} for one change; baseline summaries are not changes."""
    view = change if isinstance(change, ChangeView) else ChangeView.of(change)
    if view.detail.get("baseline"):
        return {}
    out = {}
    for class_id, recognise in RECOGNISERS.items():
        found = recognise(view)
        if found:
            out[class_id] = found
    return out


# --- the records ----------------------------------------------------------------------------------------


def own_id(repo_id: str, sha: str, class_id: str) -> str:
    """Stable: the same repo, commit and class always give the same id."""
    digest = hashlib.sha256(f"{repo_id}\n{sha}\n{class_id}".encode()).digest()
    code = base64.b32encode(digest).decode().lower()[:12]
    return f"{ID_PREFIX}{code[:4]}-{code[4:8]}-{code[8:]}"


def osv_time(moment: datetime) -> str:
    """RFC 3339 in UTC with a Z, as the schema's timestamp pattern wants."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def repo_url(hub_url: str, repo_id: str) -> str:
    return f"{hub_url.rstrip('/')}/{repo_id}"


def own_records(
    repo_id: str,
    sha: str,
    changes: Iterable[Any],
    *,
    hub_url: str,
    published_at: datetime,
    commit_title: str = "",
) -> list[dict[str, Any]]:
    """One OSV record per class of security-relevant change in this revision's changes."""
    grouped: dict[str, tuple[list[str], list[ChangeView]]] = {}
    for change in changes:
        view = change if isinstance(change, ChangeView) else ChangeView.of(change)
        for class_id, paths in classify(view).items():
            entry = grouped.setdefault(class_id, ([], []))
            entry[0].extend(p for p in paths if p not in entry[0])
            entry[1].append(view)
    classes = own_classes()
    return [
        _record(repo_id, sha, classes[class_id], paths, views, hub_url, published_at, commit_title)
        for class_id, (paths, views) in grouped.items()
    ]


def _record(
    repo_id: str,
    sha: str,
    cls: OwnClass,
    paths: list[str],
    views: list[ChangeView],
    hub_url: str,
    published_at: datetime,
    commit_title: str,
) -> dict[str, Any]:
    url = repo_url(hub_url, repo_id)
    commit_url = f"{url}/commit/{sha}"
    when = osv_time(published_at)
    shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    callables = list(dict.fromkeys(c for v in views for c in (v.detail.get("pickle_scan") or {}).get("callables") or ()))
    shown += f": {', '.join(callables[:3])}" if callables else ""
    return {
        "schema_version": SCHEMA_VERSION,
        "id": own_id(repo_id, sha, cls.id),
        "modified": when,
        "published": when,
        "summary": f"{repo_id}: {cls.title}" + (f" ({shown})" if shown and cls.id != "history-rewrite" else ""),
        "details": _details(repo_id, sha, cls, views, commit_title, commit_url),
        "severity": [{"type": "CVSS_V3", "score": cls.cvss}],
        "affected": [
            {
                "package": {"ecosystem": "GIT", "name": url},
                "ranges": [{"type": "GIT", "repo": url, "events": [{"introduced": sha}]}],
            }
        ],
        "references": [{"type": "INTRODUCED", "url": commit_url}, {"type": "PACKAGE", "url": url}],
        "database_specific": {
            "hubwatch": {
                "class": cls.id,
                "severity": cls.severity,
                "repo_id": repo_id,
                "introduced_sha": sha,
                "commit_title": commit_title,
                "paths": paths[:MAX_LISTED],
                "change_kinds": sorted({v.kind for v in views}),
                "changes": [v.summary for v in views][:MAX_LISTED],
                **({"callables": callables[:MAX_LISTED]} if callables else {}),
                **({"stop_tokens": _dropped_stop_tokens(views)} if cls.id == STOP_CLASS else {}),
            }
        },
    }


def _details(
    repo_id: str, sha: str, cls: OwnClass, views: Sequence[ChangeView], commit_title: str, commit_url: str
) -> str:
    title = f' ("{commit_title}")' if commit_title else ""
    lines = [f"hubwatch saw this in {repo_id} at commit {sha}{title}:", ""]
    lines += [f"- {v.summary}" for v in views[:MAX_LISTED]]
    places = [p for v in views for p in (v.detail.get("pickle_scan") or {}).get("occurrences") or ()]
    if places:
        lines += ["", "Where the pickle imports them:"] + [
            f"    {p.get('callable')} in {p.get('member') or 'the file'} at byte {p.get('offset')} ({p.get('opcode')})"
            for p in places[:MAX_LISTED]]
    notable = [n for v in views for n in v.detail.get("notable") or ()]
    if notable:
        lines += ["", "Added lines that reach outside the process:"] + [f"    {n}" for n in notable[:MAX_LISTED]]
    lines += ["", f"Why it matters: {cls.why}", "", f"Review the change before loading this revision: {commit_url}"]
    return "\n".join(lines)


def _still_open(class_id: str, paths: Sequence[str], snapshot: Snapshot, ours: Mapping[str, Any] | None = None) -> bool | None:
    """Whether what a record is about is still in the snapshot; None for classes that stay open."""
    if class_id == STOP_CLASS:
        tokens = (ours or {}).get("stop_tokens")
        return None if not tokens else not _stop_tokens_back(tokens, snapshot)  # a record from before tokens were kept
    if class_id in PATH_CLASSES:
        return not paths or any(p in snapshot.files for p in paths)
    if class_id in AUTO_MAP_CLASSES:
        for name in ("config.json", "tokenizer_config.json"):
            doc, _ = snapshot.read_json(name) if name in snapshot.files else (None, None)
            if isinstance(doc, dict) and doc.get("auto_map"):
                return True
        return False
    return None


def close_record(record: Mapping[str, Any], snapshot: Snapshot, hub_url: str, at: datetime) -> dict[str, Any] | None:
    """The record with a `fixed` event at this snapshot's commit when what it is about is gone (every
    file of a file class; any auto_map for the auto_map classes); None when it stays open."""
    ours = record.get("database_specific", {}).get("hubwatch", {})
    if ours.get("fixed_sha") or _still_open(str(ours.get("class")), ours.get("paths") or [], snapshot, ours) is not False:
        return None
    fixed = json.loads(json.dumps(record))
    url = repo_url(hub_url, str(ours.get("repo_id")))
    fixed["modified"] = osv_time(at)
    events = fixed["affected"][0]["ranges"][0]["events"]
    events[:] = [e for e in events if "last_affected" not in e]  # a fix supersedes an end (OSV: never both in a range)
    for key in ("last_affected_sha", "last_affected_because"):
        fixed["database_specific"]["hubwatch"].pop(key, None)
    events.append({"fixed": snapshot.sha})
    fixed["references"].append({"type": "FIX", "url": f"{url}/commit/{snapshot.sha}"})
    fixed["database_specific"]["hubwatch"]["fixed_sha"] = snapshot.sha
    gone = ("auto_map was removed" if ours.get("class") in AUTO_MAP_CLASSES
            else "every dropped stop token is a stop token again" if ours.get("class") == STOP_CLASS
            else "every file this record is about was removed")
    fixed["details"] += f"\n\nFixed at commit {snapshot.sha}: {gone}."
    return fixed
