"""The rendered prompt before and after a chat-template change, as a line and character diff.

A reader wants the one line that changed, not two full copies of a prompt. Lines are matched with
difflib; a changed line that still resembles its old self is shown once, with the deleted and inserted
characters marked inline. Whitespace that a reader could not otherwise see (line ends, tabs, spaces at
the end of a line or inside a change) and control tokens (`<|eot_id|>`, `[INST]`, `<s>`) are marked.
The result is plain data: the templates escape it, `as_text` writes it for feeds and chat messages.
"""

from __future__ import annotations

import difflib
import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from feeds.views.xml_text import visible

SIMILAR = 0.4  # a changed line at least this like its old self is diffed by character
CONTEXT = 2  # unchanged lines kept around each change
_TOKEN = re.compile(r"<\|[^|<>\s]{1,60}\|>|\[/?INST\]|\[/?SYS\]|<</?SYS>>|</?s>|<(?:start|end)_of_turn>")
_TRAILING = re.compile(r"[ \t]+$")
NEWLINE_MARK = "\u21b5"  # ↵
TAB_MARK = "\u2192"  # →
SPACE_MARK = "\u00b7"  # ·


@dataclass(frozen=True)
class Part:
    """A run of text in one line: `op` is same, ins or del; `token` marks a control token; `mark` a
    stand-in for invisible whitespace."""

    text: str
    op: str = "same"
    token: bool = False
    mark: bool = False


@dataclass
class Line:
    op: str  # same | ins | del | change | skip (a run of unchanged lines left out)
    parts: list[Part] = field(default_factory=list)
    skipped: int = 0


@dataclass
class PromptDiff:
    lines: list[Line]
    more: int = 0  # lines cut by the limit
    inserted: int = 0  # characters
    deleted: int = 0


def _pieces(text: str, op: str, whole: bool) -> list[Part]:
    """`text` split into plain runs, control tokens and whitespace marks. `whole`: every space is marked
    (inside an insertion or deletion); otherwise only tabs and trailing whitespace."""
    out: list[Part] = []
    ending = text.endswith("\n")
    body = visible(text[:-1] if ending else text)
    trail = _TRAILING.search(body)
    cut = trail.start() if trail and not whole else len(body)
    pos = 0
    for match in _TOKEN.finditer(body[:cut]):
        out += _spaces(body[pos : match.start()], op, whole)
        out.append(Part(match.group(0), op, token=True))
        pos = match.end()
    out += _spaces(body[pos:cut], op, whole)
    out += _spaces(body[cut:], op, True)
    if ending:
        out.append(Part(NEWLINE_MARK, op, mark=True))
    return out


def _spaces(text: str, op: str, whole: bool) -> list[Part]:
    if not text:
        return []
    pattern = r"([ \t]+)" if whole else r"(\t+)"
    out = []
    for i, chunk in enumerate(re.split(pattern, text)):
        if not chunk:
            continue
        if i % 2:
            out.append(Part(chunk.replace(" ", SPACE_MARK).replace("\t", TAB_MARK), op, mark=True))
        else:
            out.append(Part(chunk, op))
    return out


def _char_line(old: str, new: str) -> tuple[Line, int, int]:
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    parts: list[Part] = []
    inserted = deleted = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            parts += _pieces(old[i1:i2], "same", False)
            continue
        if i2 > i1:
            parts += _pieces(old[i1:i2], "del", True)
            deleted += i2 - i1
        if j2 > j1:
            parts += _pieces(new[j1:j2], "ins", True)
            inserted += j2 - j1
    return Line("change", parts), inserted, deleted


def diff_prompts(before: str, after: str, max_lines: int = 200) -> PromptDiff:
    """The diff of two rendered prompts, unchanged runs folded to CONTEXT lines around each change."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    result = PromptDiff([])
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            _equal(result, old[i1:i2], first=i1 == j1 == 0, last=i2 == len(old) and j2 == len(new))
            continue
        pairs = list(zip(old[i1:i2], new[j1:j2], strict=False)) if tag == "replace" else []
        for a, b in pairs:
            if difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() >= SIMILAR:
                line, ins, dels = _char_line(a, b)
                result.lines.append(line)
            else:
                result.lines += [Line("del", _pieces(a, "del", True)), Line("ins", _pieces(b, "ins", True))]
                ins, dels = len(b), len(a)
            result.inserted += ins
            result.deleted += dels
        for a in old[i1 + len(pairs) : i2]:
            result.lines.append(Line("del", _pieces(a, "del", True)))
            result.deleted += len(a)
        for b in new[j1 + len(pairs) : j2]:
            result.lines.append(Line("ins", _pieces(b, "ins", True)))
            result.inserted += len(b)
    if len(result.lines) > max_lines:
        result.more = len(result.lines) - max_lines
        result.lines = result.lines[:max_lines]
    return result


def _equal(result: PromptDiff, lines: list[str], first: bool, last: bool) -> None:
    """An unchanged run: CONTEXT lines next to each change kept, the rest folded (when 2 or more)."""
    head = [] if first else lines[:CONTEXT]
    tail = [] if last else lines[-CONTEXT:]
    if len(lines) - len(head) - len(tail) < 2:
        head, tail = lines, []
    result.lines += [Line("same", _pieces(line, "same", False)) for line in head]
    skipped = len(lines) - len(head) - len(tail)
    if skipped:
        result.lines.append(Line("skip", skipped=skipped))
    result.lines += [Line("same", _pieces(line, "same", False)) for line in tail]


def as_text(diff: PromptDiff, max_lines: int = 12, max_chars: int = 1200) -> str:
    """A shortened plain-text form for feeds and chat messages: changed lines only, each prefixed
    `-`, `+` or `~`, with deletions as [-...-] and insertions as {+...+} inside a changed line."""
    out: list[str] = []
    changed = [line for line in diff.lines if line.op in ("ins", "del", "change")]
    for line in changed[:max_lines]:
        text = ""
        for op, group in itertools.groupby(line.parts, key=lambda p: p.op):
            run = "".join(p.text for p in group)
            text += {"del": f"[-{run}-]", "ins": f"{{+{run}+}}"}.get(op, run) if line.op == "change" else run
        out.append({"ins": "+ ", "del": "- ", "change": "~ "}[line.op] + text)
    if len(changed) > max_lines or diff.more:
        out.append(f"\u2026 {len(changed) - max_lines + diff.more if len(changed) > max_lines else diff.more} more line(s)")
    text = "\n".join(out)
    return text if len(text) <= max_chars else text[: max_chars - 1] + "\u2026"


def event_excerpt(payload: Mapping[str, Any], max_lines: int = 8, max_chars: int = 900) -> tuple[str, str] | None:
    """(conversation, shortened diff) of the prompt sample a revision event carries, for chat messages."""
    prompt = payload.get("prompt")
    if not isinstance(prompt, Mapping) or not isinstance(prompt.get("before"), str) or not isinstance(prompt.get("after"), str):
        return None
    text = as_text(diff_prompts(prompt["before"], prompt["after"]), max_lines=max_lines, max_chars=max_chars)
    return (str(prompt.get("conversation", "")), text) if text else None
