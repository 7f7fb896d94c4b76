"""`hubwatch outdated --format markdown`: the report as a pull-request body or a CI job summary.

Per pin: where it stands (commits behind), its changes counted by kind and severity, the behaviour changes
(chat template, tokenizer, config, custom code) and memory changes (the estimate) one line each, the new
advisories, and links (hubwatch's compare page with `[server] public_url`, else the Hub's commit list).
Past `MAX_BYTES` the rest is cut, with a line saying how much and where the whole report is.
"""

from __future__ import annotations

from collections.abc import Iterable

from storage.kinds import SEVERITY_RANK
from tracker.pins.cache import BadEntry
from tracker.pins.outdated import ADVISORIES, ModelReport

MAX_BYTES = 60_000  # GitHub refuses pull-request bodies over 65,536 characters; room for Renovate's own text
BEHAVIOUR_KINDS = ("chat_template", "tokenizer", "stop_tokens", "config", "custom_code", "weights")
MEMORY_KIND = "estimate"
MAX_LINES_PER_KIND = 10
STATUS_WORDS = {
    "up_to_date": "up to date", "behind": "behind", "rewritten": "history rewritten", "not_in_history": "older than stored history",
    "gone": "gone upstream", "gated": "gated", "unavailable": "could not be checked", "disabled": "disabled by the Hub",
    "branch_missing": "branch gone upstream", "moved": "renamed upstream",
}
ICONS = {"critical": "🔴", "warning": "🟠", "notice": "🔵", "info": "⚪"}


def render_markdown(reports: list[ModelReport], bad: list[BadEntry], hub_url: str, public_url: str = "",
                    locations: dict[tuple[str, str], list[str]] | None = None, extra: Iterable[str] = ()) -> str:
    """The whole report; `locations` ((repo, sha) -> file:line) for pins found in code, `extra` lines
    (unpinned uses, skipped files) after the models."""
    behind = [r for r in reports if r.status != "up_to_date"]
    head = ["## hubwatch: upstream changes to pinned models", "",
            f"{len(reports)} model(s) checked, {len(behind)} not at their branch head"
            + (f", {len(bad)} entr(ies) that cannot be used" if bad else "") + ".", ""]
    sections = [_section(r, hub_url, public_url, (locations or {}).get((r.pin.repo_id, r.pin.sha), [])) for r in reports]
    tail = []
    if bad:
        tail += ["### Entries that cannot be used", ""] + [f"- `{_code(b.entry)}`: {_text(b.message)}" for b in bad] + [""]
    tail += list(extra)
    return _fit(head, sections, tail, public_url)


def _section(report: ModelReport, hub_url: str, public_url: str, where: list[str]) -> list[str]:
    pin = report.pin
    status = STATUS_WORDS.get(report.status, report.status)
    if report.status == "behind":
        status = f"{report.commits_behind} commit(s) behind"
    elif report.status == "moved":
        status = f"renamed upstream to `{_code(str(report.moved_to))}`, {report.commits_behind} commit(s) behind"
    icon = ICONS.get(report.max_severity or "", "✅" if report.status == "up_to_date" else "⚠️")
    lines = [f"### {icon} `{pin.repo_id}@{_code(pin.branch)}`: {status}", ""]
    head = report.head_sha or pin.sha
    lines.append(f"- pinned `{pin.sha[:12]}`, head `{head[:12]}`; " + _links(pin.repo_id, pin.branch, pin.sha, head, hub_url, public_url))
    if where:
        more = f" and {len(where) - 10} more" if len(where) > 10 else ""
        lines.append("- pinned at " + ", ".join(f"`{_code(w)}`" for w in where[:10]) + more)
    if report.message:
        lines.append(f"- {_text(report.message)}")
    if report.advice:
        lines.append(f"- what to do: {_text(report.advice)}")
    summary = report.summary()
    if summary:
        lines += ["", "| kind | " + " | ".join(sorted(SEVERITY_RANK, key=SEVERITY_RANK.__getitem__, reverse=True)) + " |",
                  "|---|" + "---|" * len(SEVERITY_RANK)]
        for kind, counts in summary.items():
            cells = [str(counts.get(s, "")) for s in sorted(SEVERITY_RANK, key=SEVERITY_RANK.__getitem__, reverse=True)]
            lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    lines += _changes("Behaviour changes", [c for c in report.changes if c.kind in BEHAVIOUR_KINDS])
    lines += _changes("Memory changes", [c for c in report.changes if c.kind == MEMORY_KIND])
    lines += _changes("New advisories", [c for c in report.changes if c.kind == ADVISORIES])
    if report.lineage is not None:
        lines += ["", f"**Against its base** ({_text(str(report.lineage.base_from))}): {report.lineage.status.replace('_', ' ')}", ""]
        lines += [f"- {_text(line)}" for line in report.lineage.lines]
    return [*lines, ""]


def _changes(title: str, changes: list) -> list[str]:
    if not changes:
        return []
    shown = sorted(changes, key=lambda c: -SEVERITY_RANK[c.severity])[: MAX_LINES_PER_KIND * 3]
    lines = ["", f"**{title}**", ""]
    lines += [f"- {ICONS.get(c.severity, '')} `{c.sha[:12]}` {c.kind} `{_code(c.path)}`: {_text(c.summary)}" for c in shown]
    if len(changes) > len(shown):
        lines.append(f"- and {len(changes) - len(shown)} more (`hubwatch outdated --json` lists them all)")
    return lines


def _links(repo_id: str, branch: str, old: str, new: str, hub_url: str, public_url: str) -> str:
    hub = f"[commits on the Hub]({hub_url.rstrip('/')}/{repo_id}/commits/{branch})"
    if not public_url or old == new:
        return hub
    return f"[what changed]({public_url.rstrip('/')}/repos/{repo_id}/compare/{old}...{new}), {hub}"


def _fit(head: list[str], sections: list[list[str]], tail: list[str], public_url: str) -> str:
    """Head, as many whole sections as fit under MAX_BYTES with the tail, then a line naming what was cut."""
    out = list(head)
    used = _size(head) + _size(tail) + 400
    for index, section in enumerate(sections):
        if used + _size(section) > MAX_BYTES:
            left = len(sections) - index
            where = f"[the full report]({public_url.rstrip('/')}/)" if public_url else "`hubwatch outdated --format markdown` locally"
            out += [f"_…truncated: {left} more model(s) not shown (over {MAX_BYTES:,} bytes); see {where}._", ""]
            break
        out += section
        used += _size(section)
    text = "\n".join(out + tail).rstrip() + "\n"
    return text if len(text.encode("utf-8")) <= MAX_BYTES else text.encode("utf-8")[: MAX_BYTES - 4].decode("utf-8", "ignore") + "…\n"


def _size(lines: list[str]) -> int:
    return sum(len(line.encode("utf-8")) + 1 for line in lines)


def _code(text: str) -> str:
    """Text inside backticks: a backtick in it cannot end the span."""
    return text.replace("`", "'")[:200]


def _text(text: str) -> str:
    """Text from upstream (commit titles, summaries) as inert markdown: no HTML, links or mentions."""
    cleaned = " ".join(text.split())[:300]
    for ch in "\\`*_[]<>|#@!":
        cleaned = cleaned.replace(ch, "\\" + ch)
    return cleaned
