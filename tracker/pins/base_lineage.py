"""A copy of a model (a local GGUF, a local model directory, a pinned derivative) against its base's stored
history: per behaviour part carries, behind (the base changes it misses, with their titles), diverged, or
not in the copy's format; the words `outdated` prints. The comparing itself is tracker/family/lineage.py's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from storage.front import Storage
from tracker.family.lineage import NOT_IN_FORMAT, PART_WORDS, PARTS, PartLineage, PartValue, lineage, parts_of
from tracker.revision.stored import load_snapshot

COMPARED = ("carries", "behind", "diverged")


@dataclass
class BaseComparison:
    """Where a copy stands against `base_repo_id`. `status`: carries | behind | diverged | no_base |
    not_watched | not_compared; `parts`: part -> PartLineage.to_dict(); `lines`: in words."""

    base_repo_id: str | None
    base_from: str | None
    status: str
    parts: dict[str, dict[str, Any]] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    records: list[str] = field(default_factory=list)  # hubwatch's OSV records of the copy carrying a base change

    @property
    def checked(self) -> bool:
        return self.status in COMPARED

    @property
    def behind(self) -> bool:
        """Whether any part is behind a base change (a warning-level finding for `--fail-on`)."""
        return any(p.get("status") == "behind" for p in self.parts.values())

    def to_dict(self) -> dict[str, Any]:
        return {"base_repo_id": self.base_repo_id, "base_from": self.base_from, "status": self.status,
                "parts": self.parts, "lines": self.lines, "osv_records": self.records}


def compare_with_base(store: Storage, base_repo_id: str, base_from: str, mine: dict[str, PartValue],
                      lacking: tuple[str, ...], noun: str = "this file") -> BaseComparison:
    """`mine` (a copy's parts) against the base's stored history; `lacking`: the parts its format cannot hold."""
    revisions = list(reversed(store.history.list_revisions(base_repo_id)))
    if not revisions:
        return BaseComparison(base_repo_id, base_from, "not_watched", lines=[
            f"hubwatch has no history of {base_repo_id}: watch it (hubwatch watch add {base_repo_id}) and poll it first"])
    history = [(s.sha, parts_of(s)) for s in (load_snapshot(store, r) for r in revisions)]
    titles = {r.sha: r.title for r in revisions}
    found = lineage(history, mine, lacking)
    shown = [p for p in PARTS if found[p].status != "absent"]
    parts = {p: found[p].to_dict() for p in shown}
    lines = [part_line(base_repo_id, p, found[p], titles, noun) for p in shown]
    statuses = {found[p].status for p in shown} - {NOT_IN_FORMAT}
    status = "behind" if "behind" in statuses else "diverged" if "diverged" in statuses else "carries"
    if not statuses:
        lines.append(f"none of {noun}'s parts (chat template, special tokens, stop set, vocabulary, generation defaults) "
                     f"are in {base_repo_id}'s history to compare")
        status = "diverged"
    return BaseComparison(base_repo_id, base_from, status, parts, lines)


def part_line(base: str, part: str, state: PartLineage, titles: dict[str, str], noun: str = "this file") -> str:
    """One part's standing in words."""
    words = PART_WORDS[part]
    how = f" (compared on {', '.join(state.compared)})" if state.compared else "" if state.exact else " (after whitespace normalisation)"
    if state.status == NOT_IN_FORMAT:
        return f"{words}: not in this format (nothing to compare)"
    if state.status == "carries":
        return f"{words}: carries the newest of {base} (as at {str(state.matched_sha)[:12]}){how}"
    if state.status == "diverged":
        return f"{words}: diverged: matches no revision of {base}"
    missing = ", ".join(f"{sha[:12]} ({titles.get(sha, '')})" for sha in state.missing)
    return (f"{words}: the base {base} changed its {words} at {missing}; {noun} carries the one from "
            f"{str(state.matched_sha)[:12]}{how} ({state.behind} change(s) behind)")
