"""hubwatch's OSV records for a derivative still carrying what its base changed: a quantization or fine-tune whose
chat template, special tokens, stop set, vocabulary or generation defaults are the base's from before a change
the base made since (the template fix a GGUF never picked up, the end-of-turn token a copy does not stop on).

`outdated` says it of a pin (HW006 in SARIF); the family pass says it of each followed derivative's head. Here
each derivative's own stored history is walked against the base's, and each window of commits that carries a
part from before a base change becomes one OSV record on the derivative: a GIT range on the derivative's Hub URL,
`introduced` at the first of its commits that carried it, then

- `fixed` at the first later commit whose part is the base's from that change on (it picked up the fix);
- `last_affected` at the last commit that carried it when what follows is not known to carry the fix: its part
  matches no base revision any more (diverged, or gone from the files), or the derivative itself is gone from
  the Hub, so no later commit will be seen (OSV: `last_affected` only where no fix is known, never beside
  `fixed` in one range);
- nothing more while its newest commit still carries it.

The record names the base change it misses (`database_specific.hubwatch.base_fix_sha`), is `related` to the
base's own records that change closed (a stop token dropped and restored, say) and takes the most severe of
their severities, else its class's (`medium`). Ids are stable: the same derivative, introducing commit, base
change and part always give the same id, so each pass rewrites a record only when something in it changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from storage.advisories import NewOwnAdvisory
from tracker.advisories.own import SCHEMA_VERSION, osv_time, own_classes, own_id, repo_url
from tracker.family.lineage import PART_WORDS, PARTS, PartLineage, lacking_parts, lineage, parts_of
from tracker.revision.stored import load_snapshot

if TYPE_CHECKING:
    from storage.front import Storage
    from storage.models import Revision

CLASS_ID = "derivative-behind-base"
TITLE = "a derivative still carries what its base changed"
SEVERITY = "medium"
CVSS = "CVSS:3.1/AV:N/AC:L/PR:N/UI:R/S:U/C:N/I:L/A:N"  # 4.3: medium, as special-tokens
WHY = ("The base changed how the model talks (its chat template, special tokens, stop set, vocabulary or "
       "generation defaults), often to fix it; a copy that kept the old one serves the behaviour the base left behind.")
SEVERITY_RANK = {"medium": 0, "medium-high": 1, "high": 2, "critical": 3}
History = list[tuple[str, dict[str, Any]]]


@dataclass(frozen=True)
class Window:
    """A run of a derivative's commits carrying `part` from before the base's change at `base_sha`."""

    part: str
    base_sha: str
    introduced: str  # the derivative's first commit carrying it
    matched: str  # the base revision its part matched there
    last: str  # the last commit known to carry it
    fixed: str | None = None
    last_affected: str | None = None


def windows(chain: Sequence[tuple[str, Mapping[str, PartLineage]]], gone: bool = False) -> list[Window]:
    """The windows of `chain` (a derivative's commits oldest first, each with its parts' lineage against the
    base); `gone`: the derivative is gone from the Hub (a window still open is closed at its last commit)."""
    open_: dict[tuple[str, str], Window] = {}
    out: list[Window] = []
    for sha, parts in chain:
        for part in PARTS:
            state = parts.get(part) or PartLineage("absent")
            missing = set(state.missing) if state.status == "behind" else set()
            for key, window in list(open_.items()):
                if key[0] != part or key[1] in missing:
                    continue
                fixed = state.status in ("carries", "behind")  # matches the base at or after that change
                out.append(Window(part, key[1], window.introduced, window.matched, window.last,
                                  fixed=sha if fixed else None, last_affected=None if fixed else window.last))
                del open_[key]
            for base_sha in state.missing if state.status == "behind" else ():
                key = (part, base_sha)
                held = open_.get(key)
                open_[key] = Window(part, base_sha, sha, str(state.matched_sha), sha) if held is None else \
                    Window(part, base_sha, held.introduced, held.matched, sha)
    for window in open_.values():
        out.append(Window(window.part, window.base_sha, window.introduced, window.matched, window.last,
                          last_affected=window.last if gone else None))
    return sorted(out, key=lambda w: (w.introduced, w.part, w.base_sha))


def derivative_record(repo_id: str, base_repo_id: str, window: Window, *, hub_url: str, at: datetime,
                      titles: Mapping[str, str], base_records: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The OSV record of one window; `titles`: the base's commit titles; `base_records`: the base's own records
    closed by the change it misses (related, and their severity when higher)."""
    url, base_url = repo_url(hub_url, repo_id), repo_url(hub_url, base_repo_id)
    words = PART_WORDS[window.part]
    title = titles.get(window.base_sha, "")
    severity, cvss = SEVERITY, CVSS
    classes = own_classes()
    for record in base_records:
        ours = record.get("database_specific", {}).get("hubwatch", {})
        if SEVERITY_RANK.get(str(ours.get("severity")), -1) > SEVERITY_RANK[severity]:
            severity, cvss = str(ours["severity"]), classes[str(ours["class"])].cvss if ours.get("class") in classes else cvss
    events: list[dict[str, str]] = [{"introduced": window.introduced}]
    if window.fixed:
        events.append({"fixed": window.fixed})
    elif window.last_affected:
        events.append({"last_affected": window.last_affected})
    references = [{"type": "INTRODUCED", "url": f"{url}/commit/{window.introduced}"}, {"type": "PACKAGE", "url": url},
                  {"type": "WEB", "url": f"{base_url}/commit/{window.base_sha}"}]
    if window.fixed:
        references.append({"type": "FIX", "url": f"{url}/commit/{window.fixed}"})
    details = [f"{repo_id} carries the {words} of {base_repo_id} as at {window.matched[:12]}, from before the base "
               f"changed it at {window.base_sha} ({title!r}). hubwatch saw it from {repo_id}'s commit "
               f"{window.introduced} on.", "", f"Why it matters: {WHY}"]
    if window.fixed:
        details += ["", f"Fixed at commit {window.fixed}: its {words} is the base's from that change on."]
    elif window.last_affected:
        details += ["", f"Last carried at commit {window.last_affected}: after it, its {words} is no longer the base's "
                        "old one, but it is not known to be the fixed one either."]
    when = osv_time(at)
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "id": own_id(repo_id, window.introduced, f"{CLASS_ID}\n{base_repo_id}\n{window.base_sha}\n{window.part}"),
        "modified": when,
        "published": when,
        "summary": f"{repo_id}: {TITLE}: the {words} of {base_repo_id} from before {window.base_sha[:12]}"
                   + (f" ({title})" if title else ""),
        "details": "\n".join(details),
        "severity": [{"type": "CVSS_V3", "score": cvss}],
        "affected": [{"package": {"ecosystem": "GIT", "name": url},
                      "ranges": [{"type": "GIT", "repo": url, "events": events}]}],
        "references": references,
        "database_specific": {"hubwatch": {
            "class": CLASS_ID, "severity": severity, "repo_id": repo_id, "introduced_sha": window.introduced,
            "base_repo_id": base_repo_id, "base_fix_sha": window.base_sha, "base_fix_title": title,
            "part": window.part, "matched_base_sha": window.matched,
            **({"fixed_sha": window.fixed} if window.fixed else {}),
            **({"last_affected_sha": window.last_affected} if window.last_affected else {}),
        }},
    }
    related = sorted(str(r["id"]) for r in base_records if r.get("id"))
    if related:
        record["related"] = related
    return record


def refresh(store: Storage, base_repo_id: str, base_revisions: Sequence[Revision], history: History, hub_url: str,
            at: datetime) -> list[str]:
    """Write the records of every followed derivative of the base that has a stored history (new ones, and those
    whose content changed: a window fixed or closed, a base record related); the ids written."""
    if not history:
        return []
    titles = {r.sha: r.title for r in base_revisions}
    closed_by: dict[str, list[dict[str, Any]]] = {}
    for own in store.advisories.own(base_repo_id):
        if own.fixed_sha and not own.record.get("withdrawn"):
            closed_by.setdefault(own.fixed_sha, []).append(own.record)
    written: list[str] = []
    for derivative in store.derivatives.derivatives(base_repo_id, listed_only=False):
        revisions = list(reversed(store.history.list_revisions(derivative.repo_id)))
        if not revisions:
            continue
        chain = []
        for revision in revisions:
            snapshot = load_snapshot(store, revision)
            chain.append((revision.sha, lineage(history, parts_of(snapshot), lacking_parts(snapshot.files))))
        gone = (derivative.problem or "").startswith("gone:")
        ids = {r.sha: r.id for r in revisions}
        records = [derivative_record(derivative.repo_id, base_repo_id, w, hub_url=hub_url, at=at, titles=titles,
                                     base_records=closed_by.get(w.base_sha, ())) for w in windows(chain, gone)]
        written += _write(store, derivative.repo_id, records, ids)
    return written


def _write(store: Storage, repo_id: str, records: list[dict[str, Any]], revision_ids: Mapping[str, int | None]) -> list[str]:
    """The records new or changed (compared without their times), written with their first `published` kept."""
    stored = store.osv_index.own_by_ids(r["id"] for r in records)
    rows: list[tuple[int, NewOwnAdvisory]] = []
    for record in records:
        before = stored.get(record["id"])
        if before is not None:
            if _untimed(before.record) == _untimed(record):
                continue
            record["published"] = before.record.get("published", record["published"])
        ours = record["database_specific"]["hubwatch"]
        revision_id = revision_ids.get(ours["introduced_sha"])
        if revision_id is None:
            continue
        rows.append((revision_id, NewOwnAdvisory(id=record["id"], repo_id=repo_id, sha=ours["introduced_sha"], class_id=CLASS_ID,
                                                 severity=ours["severity"], record=record, fixed_sha=ours.get("fixed_sha"))))
    if rows:
        store.advisories.put_own(rows)
    return [row.id for _, row in rows]


def _untimed(record: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ("modified", "published")}
