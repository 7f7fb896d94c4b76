"""What feeds and pages show of an event, a revision and its changes, and the one Jinja environment.

Templates are rendered with autoescape on, and every value printed passes `text.visible` first
(the environment's `finalize`), so upstream text cannot inject markup or control characters.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from feeds.views.dataset_view import DatasetView, dataset_text, dataset_view
from feeds.views.prompt_diff import PromptDiff, as_text, diff_prompts
from feeds.views.serving_view import context_label
from feeds.views.xml_text import clip, visible
from storage.kinds import REVISION_INGESTED
from storage.models import ChangeRecord, EstimateRecord, Event, Revision

TEMPLATES = Path(__file__).parent / "templates"


@dataclass(frozen=True)
class Limits:
    """How much of a change's detail is shown: feeds are read in a reader pane, pages in full."""

    value_chars: int = 300
    diff_lines: int = 80
    prompt_chars: int = 800
    keys: int = 40
    prompt_lines: int = 30


FEED_LIMITS = Limits()
PAGE_LIMITS = Limits(value_chars=2000, diff_lines=1000, prompt_chars=6000, keys=500, prompt_lines=400)


@dataclass
class KeyChange:
    path: str
    change: str
    old: str | None
    new: str | None


@dataclass
class PromptSample:
    """One sample conversation's rendered prompt: the diff when both sides render, else each side's text."""

    conversation: str
    before: str | None
    after: str | None
    diff: PromptDiff | None = None
    short: str = ""  # the diff's changed lines as plain text (feeds' summaries, chat messages)


@dataclass
class ChangeView:
    kind: str
    path: str
    summary: str
    severity: str
    security: bool
    structural: bool
    keys: list[KeyChange] = field(default_factory=list)
    keys_more: int = 0
    diff: str | None = None
    diff_more: int = 0
    prompts: list[PromptSample] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class EntryView:
    """One event as a reader sees it, with its revision's changes when it has a revision."""

    event: Event
    revision: Revision | None
    changes: list[ChangeView]
    estimate: EstimateRecord | None
    advisories: list[dict[str, Any]]
    dataset: DatasetView | None = None  # a dataset revision's table (feeds/views/dataset_view.py)

    @property
    def commit_title(self) -> str:
        if self.revision is not None:
            return self.revision.title
        return str(self.event.payload.get("commit_title", ""))

    @property
    def summary(self) -> str:
        """Plain text for the feed's summary: the commit title and the change summaries."""
        lines = [f"{self.event.repo_id} {(self.event.sha or '')[:12]}: {self.commit_title}".strip()]
        if self.dataset is not None:
            lines += dataset_text(self.dataset)
        for change in self.changes:
            lines.append(change.summary)
            lines += [f"sample {p.conversation}:\n{p.short}" for p in change.prompts if p.short]
        if not self.changes:
            lines += [str(s) for s in self.event.payload.get("summaries", [])]
        return visible(clip("\n".join(lines), 2000))


def _value(value: Any, limit: int) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return clip(text, limit)


def _keys(detail: Mapping[str, Any], limits: Limits) -> tuple[list[KeyChange], int]:
    rows: list[KeyChange] = []
    for item in detail.get("changes", []) or []:
        if isinstance(item, Mapping) and "path" in item:
            if "summary" in item:
                rows.append(KeyChange(str(item["path"]), str(item.get("change", "")), None, _value(item["summary"], limits.value_chars)))
            else:
                rows.append(
                    KeyChange(
                        str(item["path"]),
                        str(item.get("change", "changed")),
                        _value(item.get("old"), limits.value_chars),
                        _value(item.get("new"), limits.value_chars),
                    )
                )
    for item in detail.get("metadata", []) or []:
        if isinstance(item, Mapping) and "key" in item:
            rows.append(KeyChange(str(item["key"]), "changed", _value(item.get("old"), limits.value_chars),
                                  _value(item.get("new"), limits.value_chars)))
    for key, value in detail.items():  # {"parameters": {"old": 1, "new": 2}} and {"x": {"before": .., "after": ..}}
        if isinstance(value, Mapping) and key not in ("before", "after"):
            pair = ("old", "new") if "old" in value and "new" in value else ("before", "after")
            if pair[0] in value and pair[1] in value and not isinstance(value[pair[0]], Mapping | list):
                rows.append(KeyChange(str(key), "changed", _value(value[pair[0]], limits.value_chars),
                                      _value(value[pair[1]], limits.value_chars)))
    return rows[: limits.keys], max(len(rows) - limits.keys, 0)


def _gib(value: Any) -> str | None:
    return f"{value / 2**30:.1f} GiB" if isinstance(value, int | float) and not isinstance(value, bool) else None


def _estimate_rows(detail: Mapping[str, Any]) -> list[KeyChange]:
    """An estimate change's headline figures, before -> after (tracker.pipeline.estimate_change writes them)."""
    before = detail.get("before") if isinstance(detail.get("before"), Mapping) else {}
    after = detail.get("after") if isinstance(detail.get("after"), Mapping) else {}
    rows = []
    for key in ("parameters", "used"):
        old, new = before.get(key), after.get(key)
        if old is not None or new is not None:
            rows.append(KeyChange(key, "changed", f"{old:,}" if isinstance(old, int) else None,
                                  f"{new:,}" if isinstance(new, int) else None))
    old_memory, new_memory = before.get("memory_batch_1") or {}, after.get("memory_batch_1") or {}
    for mode in sorted(set(old_memory) | set(new_memory)) if isinstance(old_memory, Mapping) and isinstance(new_memory, Mapping) else ():
        old, new = _gib(old_memory.get(mode)), _gib(new_memory.get(mode))
        if old != new or old is not None:
            rows.append(KeyChange(f"memory at batch 1 ({mode.replace('_', ' ')})", "changed", old, new))
    return rows


def _prompts(detail: Mapping[str, Any], limits: Limits) -> list[PromptSample]:
    out = []
    for sample in detail.get("samples", []) or []:
        if not isinstance(sample, Mapping) or not sample.get("differs"):
            continue
        before, after = sample.get("before"), sample.get("after")
        text = {side: str(value["prompt"]) for side, value in (("before", before), ("after", after))
                if isinstance(value, Mapping) and "prompt" in value}
        if "after" in text:  # a template added diffs against the empty prompt: every line inserted
            diff = diff_prompts(text.get("before", ""), text["after"], limits.prompt_lines)
            short = as_text(diff)
        else:
            diff, short = None, ""

        def side(rendered: Any) -> str | None:
            if not isinstance(rendered, Mapping):
                return None
            if "prompt" in rendered:
                return clip(str(rendered["prompt"]), limits.prompt_chars)
            return f"(does not render: {clip(str(rendered.get('error', 'unknown error')), 300)})"

        out.append(PromptSample(str(sample.get("conversation", "")), side(before), side(after), diff, short))
    return out


def change_view(change: ChangeRecord | Mapping[str, Any], limits: Limits = FEED_LIMITS) -> ChangeView:
    """A stored change (or a change dict from a live diff) prepared for a template."""
    data = change if isinstance(change, Mapping) else {
        "kind": change.kind, "path": change.path, "summary": change.summary, "severity": change.severity,
        "security": change.security, "structural": change.structural, "detail": change.detail,
    }
    detail = data.get("detail") or {}
    view = ChangeView(
        kind=str(data["kind"]),
        path=str(data.get("path", "")),
        summary=str(data["summary"]),
        severity=str(data["severity"]),
        security=bool(data.get("security")),
        structural=bool(data.get("structural")),
    )
    view.keys, view.keys_more = _keys(detail, limits)
    diff = detail.get("diff")
    if isinstance(diff, str) and diff:
        lines = diff.splitlines()
        view.diff = "\n".join(clip(line, 400) for line in lines[: limits.diff_lines])
        view.diff_more = max(len(lines) - limits.diff_lines, 0)
    if view.kind == "estimate":
        view.keys += _estimate_rows(detail)
    view.prompts = _prompts(detail, limits)
    for finding in detail.get("findings", []) or []:
        if isinstance(finding, Mapping):
            view.findings.append(f"{finding.get('rule')}: {finding.get('description')} ({finding.get('match')!s})")
    for key in ("not_compared", "error", "front_matter"):
        value = detail.get(key)
        if isinstance(value, str):
            view.notes.append(f"{key.replace('_', ' ')}: {clip(value, limits.value_chars)}")
    for key in ("no_longer_fits", "now_fits"):  # sentences already ("... no longer fits L4 24 GB")
        value = detail.get(key)
        if isinstance(value, list):
            view.notes.extend(clip(str(v), limits.value_chars) for v in value[:20])
    return view


def advisories_of(event: Event) -> list[dict[str, Any]]:
    """Advisories an event carries: an `advisory.*` event's own payload (tracker.advisories writes
    {advisory, ids, summary, why, source}), or a revision event's `payload.advisories` summary
    ({advice, osv_matches, own_advisories})."""
    payload = event.payload or {}
    if event.kind.startswith("advisory."):
        key = str(payload.get("advisory") or payload.get("id") or "")
        aliases = [str(i) for i in payload.get("ids", []) or [] if str(i) != key]
        return [{
            "id": key,
            "summary": str(payload.get("summary") or ""),
            "aliases": ", ".join(aliases),
            "why": str(payload.get("why") or ""),
            "url": f"https://osv.dev/vulnerability/{key}" if payload.get("source") == "osv" and key else "",
        }]
    summary = payload.get("advisories")
    if not isinstance(summary, Mapping):
        return []
    ids = [str(i) for i in [*(summary.get("osv_matches") or []), *(summary.get("own_advisories") or [])]]
    advice = str(summary.get("advice") or "")
    if not ids and not advice:
        return []
    return [{"id": i, "summary": "", "aliases": "", "why": "", "url": ""} for i in ids] + (
        [{"id": "advice", "summary": advice, "aliases": "", "why": "", "url": ""}] if advice else []
    )


def entry_view(
    event: Event,
    revision: Revision | None,
    changes: Sequence[ChangeRecord],
    estimate: EstimateRecord | None,
    limits: Limits = FEED_LIMITS,
) -> EntryView:
    return EntryView(event, revision, [change_view(c, limits) for c in changes], estimate, advisories_of(event),
                     dataset_view(event.payload) if event.kind == REVISION_INGESTED else None)


def _finalize(value: Any) -> Any:
    if isinstance(value, Markup) or not isinstance(value, str):
        return "" if value is None else value
    return visible(value)


def _make_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["short"] = lambda sha: (sha or "")[:12]
    env.filters["when"] = lambda dt: dt.strftime("%Y-%m-%d %H:%M UTC") if dt else ""
    env.filters["number"] = lambda n: f"{n:,}" if isinstance(n, int) else n
    env.filters["context"] = context_label
    return env


ENV = _make_env()


def templates_digest() -> str:
    """Changes whenever a template does: part of every feed ETag."""
    digest = hashlib.sha256()
    for path in sorted(TEMPLATES.rglob("*.html")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def render(name: str, **context: Any) -> str:
    return ENV.get_template(name).render(**context)
