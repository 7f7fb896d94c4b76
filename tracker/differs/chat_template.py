"""The chat template differ: how a repo's chat templates changed, what they now render, and which
constructs no chat template needs they introduce.

Templates come from `chat_sources.resolve` (where transformers 5.x reads them) and are compared per
loader; a change that is the same for both is reported once. Text unchanged but the location different
is an info note, not a template change. Changed templates are rendered on the fixed sample
conversations of `chat_samples` before and after, in one sandboxed worker per diff, and checked
against the security `RULES`.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from tracker.differs.chat_samples import SAMPLE_CONVERSATIONS, SAMPLE_NOW, SampleConversation
from tracker.differs.chat_sources import (
    LOADERS,
    TOKENIZER_CONFIG,
    LoaderView,
    Location,
    Resolution,
    TemplateSource,
    resolve,
    special_tokens,
)
from tracker.differs.render import DEFAULT_LIMITS, Rendered, RenderLimits, RenderRequest, render_all, template_tokens
from tracker.differs.template_code import added_findings
from tracker.revision.changes import Change, ChangeKind, Severity
from tracker.revision.snapshot import Snapshot

# --- the security rules ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    """A construct no chat template needs, checked on templates added or changed in a revision.

    `applies_to`: token kinds of `render.template_tokens` ("name", "statement", "filter", "string"), or
    "render" (the new side's render errors), "template-name" (added templates), "form" (how the template
    is stored; such a rule holds only when no template of the old revision was stored in a form it
    matches). `pattern` is searched (re.search) in each of those values.
    """

    id: str
    description: str
    applies_to: frozenset[str]
    pattern: str


RULES: tuple[Rule, ...] = (
    Rule("dunder-attribute", "reaches for Python internals through a double-underscore name "
         "(__class__, __globals__, __mro__, __subclasses__, __builtins__, ...)", frozenset({"name", "string"}), r"__[A-Za-z]\w*"),
    Rule("self-reference", "uses `self`, the template's own reference object", frozenset({"name"}), r"^self$"),
    Rule("template-loading", "loads other templates (`import`, `from`, `include`, `extends`)", frozenset({"statement"}),
         r"^(import|from|include|extends)$"),
    Rule("attr-filter", "builds attribute names at run time with the `attr` filter", frozenset({"filter"}), r"^attr$"),
    Rule("python-callables", "names a Python builtin or module used to run code", frozenset({"name"}),
         r"^(eval|exec|compile|getattr|setattr|delattr|globals|locals|importlib|subprocess|popen|builtins)$"),
    Rule("sandbox-violation", "was stopped by the Jinja sandbox while rendering", frozenset({"render"}), r"^blocked by the sandbox"),
    Rule("unsafe-template-name", "has a name that is a path (transformers writes additional_chat_templates/<name>.jinja)",
         frozenset({"template-name"}), r"[/\\:]|\.\.|^\s*$"),
    Rule("named-form-introduced", "introduces the list/dict form of named templates in a JSON file", frozenset({"form"}), r"^(list|dict)$"),
)


# --- the diff -------------------------------------------------------------------------------------

@dataclass
class _Delta:
    """One template's change, for the loaders it is the same for."""

    name: str
    change: str  # "added", "removed", "changed", "moved" or "tokens" (same text, other special tokens)
    before: TemplateSource | None
    after: TemplateSource | None
    loaders: list[str]
    label: str = ""


def diff(old: Snapshot | None, new: Snapshot, *, limits: RenderLimits = DEFAULT_LIMITS) -> list[Change]:
    """Chat template changes between two snapshots of a repo; [] for the first one."""
    if old is None:
        return []
    before, after = resolve(old), resolve(new)
    tokens = (special_tokens(old), special_tokens(new))
    readable = all(TOKENIZER_CONFIG not in s.files or s.read_json(TOKENIZER_CONFIG)[1] is None for s in (old, new))
    deltas = _deltas(before, after, readable and tokens[0] != tokens[1])
    renders = _render_samples(deltas, tokens, limits)
    changes = _read_errors(before, after)
    for delta in deltas:
        change = _template_change(delta, renders, before, tokens)
        if change is not None:
            changes.append(change)
    changes += _shadowed_changes(before, after)
    return changes


def _deltas(before: Resolution, after: Resolution, tokens_changed: bool) -> list[_Delta]:
    loaders = [loader for loader in LOADERS if loader in before.views or loader in after.views]
    grouped: dict[tuple[Any, ...], _Delta] = {}
    for loader in loaders:
        old, new = before.views.get(loader, LoaderView()), after.views.get(loader, LoaderView())
        uncertain = bool(old.errors or new.errors)  # a side we could not read: only compare names both sides have
        for name in sorted(old.templates.keys() | new.templates.keys()):
            a, b = old.templates.get(name), new.templates.get(name)
            if a is None or b is None:
                if uncertain:
                    continue
                change = "added" if a is None else "removed"
            elif a.text != b.text:
                change = "changed"
            elif tokens_changed:
                change = "tokens"
            elif a.locations != b.locations:
                change = "moved"
            else:
                continue
            key = (name, change, a and a.text, b and b.text)
            if key in grouped:
                grouped[key].loaders.append(loader)
                grouped[key].before = _combine(grouped[key].before, a)
                grouped[key].after = _combine(grouped[key].after, b)
            else:
                grouped[key] = _Delta(name, change, a, b, [loader])
    for delta in grouped.values():
        only = len(delta.loaders) < len(loaders)
        delta.label = f"{delta.name}, {delta.loaders[0]} only" if only else delta.name
    return list(grouped.values())


def _combine(mine: TemplateSource | None, other: TemplateSource | None) -> TemplateSource | None:
    if mine is None or other is None:
        return mine or other
    return mine.merged(other)


def _render_samples(
    deltas: list[_Delta], tokens: tuple[dict[str, str], dict[str, str]], limits: RenderLimits
) -> dict[tuple[int, str, str], Rendered]:
    """Every sample render the deltas need, (side, text, conversation id) -> result, in one worker."""
    requests: dict[tuple[int, str, str], RenderRequest] = {}
    for delta in deltas:
        sides = () if delta.change == "moved" else enumerate((delta.before, delta.after))
        for side, source in sides:
            for conversation in SAMPLE_CONVERSATIONS if source is not None else ():
                key = (side, source.text, conversation.id)
                requests[key] = RenderRequest(source.text, _variables(conversation, tokens[side]))
    if not requests:
        return {}
    return dict(zip(requests, render_all(list(requests.values()), now=SAMPLE_NOW, limits=limits), strict=True))


def _variables(conversation: SampleConversation, tokens: dict[str, str]) -> dict[str, Any]:
    """What transformers passes to the template: the chat, tools, documents, the flag, special tokens."""
    return {
        **tokens,
        "messages": list(conversation.messages),
        "tools": list(conversation.tools) if conversation.tools else None,
        "documents": None,
        "add_generation_prompt": conversation.add_generation_prompt,
    }


def _samples(delta: _Delta, renders: dict[tuple[int, str, str], Rendered]) -> list[dict[str, Any]]:
    samples = []
    for conversation in SAMPLE_CONVERSATIONS:
        before, after = (
            renders[(side, source.text, conversation.id)] if source is not None else None
            for side, source in enumerate((delta.before, delta.after))
        )
        samples.append(
            {
                "conversation": conversation.id,
                "before": before.to_dict() if before else None,
                "after": after.to_dict() if after else None,
                "differs": before != after,
            }
        )
    return samples


def _template_change(
    delta: _Delta, renders: dict[tuple[int, str, str], Rendered], before: Resolution, tokens: tuple[dict[str, str], dict[str, str]]
) -> Change | None:
    subject = f"chat_template ({delta.label})"
    detail: dict[str, Any] = {
        "template": delta.name,
        "loaders": delta.loaders,
        "change": delta.change,
        "before": delta.before.to_dict() if delta.before else None,
        "after": delta.after.to_dict() if delta.after else None,
    }
    source = delta.after or delta.before
    assert source is not None
    total = len(SAMPLE_CONVERSATIONS)
    if delta.change != "moved":
        detail["samples"] = _samples(delta, renders)
    differing = sum(s["differs"] for s in detail.get("samples", []))
    if delta.change == "changed":
        detail["diff"] = _unified_diff(delta.before, delta.after)  # type: ignore[arg-type]
        summary = f"{subject}: template changed; rendered prompt differs for {differing} of {total} sample conversations"
    elif delta.change == "added":
        rendering = sum("prompt" in s["after"] for s in detail["samples"])
        summary = f"{subject}: template added in {source.where}; {rendering} of {total} sample conversations render"
    elif delta.change == "removed":
        summary = f"{subject}: template removed (was in {source.where})"
    elif delta.change == "tokens" and differing:
        changed = sorted(k for k in tokens[0].keys() | tokens[1].keys() if tokens[0].get(k) != tokens[1].get(k))
        detail["special_tokens"] = {"before": tokens[0], "after": tokens[1]}
        summary = (
            f"{subject}: template unchanged but rendered prompt differs for {differing} of {total} sample "
            f"conversations ({', '.join(changed)} changed)"
        )
    elif delta.before is not None and delta.after is not None and delta.before.locations != delta.after.locations:
        detail["change"] = "moved"
        detail.pop("samples", None)
        summary = f"{subject}: moved from {delta.before.where} to {delta.after.where}; text unchanged"
    else:
        return None
    findings = _findings(delta, detail, before)
    severity = {"moved": Severity.INFO, "tokens": Severity.NOTICE}.get(detail["change"], Severity.WARNING)
    if findings:
        detail["findings"] = findings
        critical = sorted({f["rule"] for f in findings if f["severity"] == "critical"})
        other = sorted({f["rule"] for f in findings if f["severity"] != "critical"})
        if critical:
            summary += f"; dangerous constructs: {', '.join(critical)}"
            severity = Severity.CRITICAL
        if other:
            summary += f"; read as code: {', '.join(other)}"
    return Change(
        kind=ChangeKind.CHAT_TEMPLATE,
        path=source.locations[0].path,
        summary=summary,
        severity=severity,
        detail=detail,
        security=any(f["rule"] != "injected-text" for f in findings),  # a default system prompt is no threat
    )


def _findings(delta: _Delta, detail: dict[str, Any], before: Resolution) -> list[dict[str, Any]]:
    """The rules the new side of a delta breaks."""
    new = delta.after
    if new is None:
        return []
    values: list[tuple[str, str, int | None]] = []  # (kind, value, line)
    if delta.change in ("added", "changed"):
        tokens = template_tokens(new.text)
        if tokens is None:  # it does not even lex: check every line against every token rule
            kinds = ("name", "statement", "filter", "string")
            values += [(kind, line, n) for n, line in enumerate(new.text.splitlines(), 1) for kind in kinds]
        else:
            values += [(kind, t.value, t.line) for t in tokens for kind in t.kinds]
        values += [("render", s["after"]["error"], None) for s in detail.get("samples", []) if "error" in s["after"]]
        values += [("form", loc.form, None) for loc in new.locations]  # a move stays an info note
        old_text = delta.before.text if delta.before is not None else None
        code = added_findings(old_text, new.text)  # the syntax tree: only what this revision adds
    else:
        code = []
    if delta.change == "added":
        values.append(("template-name", delta.name, None))
    findings: list[dict[str, Any]] = []
    for rule in RULES:
        if "form" in rule.applies_to and any(re.search(rule.pattern, form) for form in before.forms):
            continue  # a form rule is about introducing the form
        for kind, value, line in values:
            match = re.search(rule.pattern, value) if kind in rule.applies_to else None
            if match and not any(f["rule"] == rule.id and f["match"] == match.group(0) for f in findings):
                findings.append({"rule": rule.id, "severity": "critical", "description": rule.description,
                                 "match": match.group(0), "line": line})
    covered = {(f["rule"], f["match"]) for f in findings}
    findings += [f for f in code if (f["rule"], f["match"]) not in covered]
    return findings


def _unified_diff(before: TemplateSource, after: TemplateSource) -> str:
    return "".join(
        difflib.unified_diff(
            _diff_lines(before.text), _diff_lines(after.text), fromfile=f"a/{before.locations[0]}", tofile=f"b/{after.locations[0]}"
        )
    )


def _diff_lines(text: str) -> list[str]:
    """Lines to diff; a line over 200 characters (one-line templates from JSON) is cut before each tag."""
    lines = []
    for line in text.splitlines():
        lines += re.split(r"(?=\{[%{#])", line) if len(line) > 200 else [line]
    return [f"{line}\n" for line in lines if line]


def _read_errors(before: Resolution, after: Resolution) -> list[Change]:
    """One warning per template file that became unreadable in this revision."""
    old = {(path, reason) for view in before.views.values() for path, reason in view.errors.items()}
    new = {(path, reason): loader for loader, view in after.views.items() for path, reason in view.errors.items()}
    return [
        Change(
            kind=ChangeKind.CHAT_TEMPLATE,
            path=path,
            summary=f"chat_template: could not be read ({reason}); templates stored there were not compared",
            severity=Severity.WARNING,
            detail={"change": "unreadable", "path": path, "error": reason, "loader": loader},
        )
        for (path, reason), loader in new.items()
        if (path, reason) not in old
    ]


def _shadowed_changes(before: Resolution, after: Resolution) -> list[Change]:
    """Info notes for stored templates transformers 5.x ignores (older versions may not) whose text changed."""
    def stored(resolution: Resolution) -> dict[tuple[str, Location], str]:
        return {
            (s.name, loc): s.text
            for view in resolution.views.values()
            for s in [*view.templates.values(), *view.shadowed]
            for loc in s.locations
        }

    old = stored(before)
    effective = {(s.name, loc) for view in after.views.values() for s in view.templates.values() for loc in s.locations}
    notes: dict[tuple[str, Location], Change] = {}
    for view in after.views.values():
        for source in view.shadowed:
            key = (source.name, source.locations[0])
            if key in effective or key in notes or old.get(key, source.text) == source.text:
                continue
            winner = view.templates.get(source.name)
            overridden = f"overridden by {winner.where}" if winner else "not used"
            notes[key] = Change(
                kind=ChangeKind.CHAT_TEMPLATE,
                path=source.locations[0].path,
                summary=f"chat_template ({source.name}): {source.where} changed but is {overridden} in transformers 5.x",
                severity=Severity.INFO,
                detail={"change": "shadowed_changed", "template": source.name, "location": source.where},
            )
    return list(notes.values())
