"""Templates read as code: a walk of a chat template's syntax tree (jinja2's parser, nothing executed)
for what a template that only formats a conversation never needs.

- `critical` (sandbox-escape shapes): attribute or item access to a double-underscore name, walks from
  the globals `cycler`, `joiner`, `namespace`, `lipsum`, `range`, `dict` or `self` into their attributes,
  the `attr` filter.
- `warning`: URLs and long base64/hex literals; conditionals on a message's content (a trigger phrase:
  `'xyz' in message['content']`, `message.content.startswith(...)`, `message.content == '...'`); text
  inserted into the system or assistant turn that no message supplied; `import`/`from`/`include`/`extends`.

`added_findings(old, new)` reports the findings of `new` the old text did not already have (same rule,
same matched text), each quoting the line it is on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

URL = re.compile(r"(?:https?|ftp|wss?)://[^\s'\"<>|}]+", re.IGNORECASE)
BASE64 = re.compile(r"[A-Za-z0-9+/]{40,}={0,2}")
HEX = re.compile(r"\b(?:0x)?[0-9a-fA-F]{32,}\b")
DUNDER = re.compile(r"^__\w+__$|^_TemplateReference__")
SEARCHES = ("startswith", "endswith", "find", "count", "index")
ESCAPE_ROOTS = frozenset({"cycler", "joiner", "namespace", "lipsum", "range", "dict", "self"})
# special tokens and role names are structure, not inserted text
STRUCTURE = re.compile(r"<[|｜▁][^>]*>|<\/?[a-z_]+>|\[/?[A-Z_]+\]|<<[A-Z]+>>|\b(system|user|assistant|tool)\b|\s+")

RULES: dict[str, tuple[str, str]] = {  # id -> (severity, description)
    "dunder-access": ("critical", "reaches for Python internals through a double-underscore attribute"),
    "global-walk": ("critical", "walks into the attributes of a template global (cycler, joiner, namespace, ...)"),
    "attr-filter": ("critical", "builds attribute names at run time with the `attr` filter"),
    "url": ("warning", "contains a URL"),
    "encoded-literal": ("warning", "contains a long base64 or hex literal"),
    "content-trigger": ("warning", "branches on what a message says (a trigger phrase)"),
    "injected-text": ("warning", "inserts text into the system or assistant turn that no message supplied"),
    "template-loading": ("warning", "loads other templates (import, from, include, extends)"),
}


def findings(text: str) -> list[dict[str, Any]] | None:
    """Every finding in a template (rule, severity, description, match, line, quote); None if it does not parse."""
    from jinja2 import Environment
    from jinja2.exceptions import TemplateSyntaxError

    try:
        tree = Environment(extensions=["jinja2.ext.loopcontrols"]).parse(text)
    except (TemplateSyntaxError, RecursionError):
        return None
    lines = text.splitlines() or [""]
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for rule, match, lineno in _walk(tree, None):
        if (rule, match) in out:
            continue
        severity, description = RULES[rule]
        out[(rule, match)] = {
            "rule": rule, "severity": severity, "description": description, "match": match[:200],
            "line": lineno, "quote": _quote(lines[min(max(lineno, 1), len(lines)) - 1], match),
        }
    return list(out.values())


def added_findings(old: str | None, new: str) -> list[dict[str, Any]]:
    """The findings of `new` that `old` (None: no previous template) did not have."""
    had = {(f["rule"], f["match"]) for f in (findings(old) or [])} if old is not None else set()
    return [f for f in findings(new) or [] if (f["rule"], f["match"]) not in had]


def _quote(line: str, match: str) -> str:
    """The line, or 160 characters of it around the match (one-line templates from JSON are long)."""
    if len(line) <= 200:
        return line.strip()
    at = max(line.find(match[:40]), 0)
    return line[max(at - 60, 0): at + 100].strip()


def _walk(node: Any, turn: str | None) -> Iterator[tuple[str, str, int]]:
    from jinja2 import nodes

    line = getattr(node, "lineno", 1) or 1
    if isinstance(node, (nodes.Import, nodes.FromImport, nodes.Include, nodes.Extends)):
        yield "template-loading", f"{type(node).__name__.lower()} {_source(node.template)}", line
    if isinstance(node, nodes.Getattr):
        if DUNDER.match(node.attr):
            yield "dunder-access", node.attr, line
        if isinstance(node.node, nodes.Name) and node.node.name in ESCAPE_ROOTS:
            yield "global-walk", f"{node.node.name}.{node.attr}", line
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
        if DUNDER.match(node.arg.value):
            yield "dunder-access", node.arg.value, line
    if isinstance(node, nodes.Filter) and node.name == "attr":
        yield "attr-filter", "attr", line
    if isinstance(node, (nodes.Const, nodes.TemplateData)) and isinstance(getattr(node, "value", None) or getattr(node, "data", None), str):
        value = node.value if isinstance(node, nodes.Const) else node.data
        for url in URL.findall(value):
            yield "url", url, line
        for literal in BASE64.findall(value) + HEX.findall(value):
            if not URL.search(value) or literal not in value.split("://", 1)[-1]:
                yield "encoded-literal", literal[:80], line
    if isinstance(node, nodes.Output) and turn is not None:
        for child in node.nodes:
            literal = child.data if isinstance(child, nodes.TemplateData) else (
                child.value if isinstance(child, nodes.Const) and isinstance(child.value, str) else None)
            if literal is not None and len(STRUCTURE.sub(" ", literal).split()) >= 4:
                yield "injected-text", literal.strip()[:120], getattr(child, "lineno", line)
    if isinstance(node, (nodes.If, nodes.CondExpr)):
        test = node.test if isinstance(node, nodes.If) else node.expr1
        trigger = _content_trigger(test)
        if trigger is not None:
            yield "content-trigger", trigger, line
        role = _role_test(test)
        if isinstance(node, nodes.If):
            yield from _walk(test, turn)
            for child in node.body:
                yield from _walk(child, role or turn)
            for child in node.elif_:
                yield from _walk(child, turn)
            for child in node.else_:  # `if messages[0].role == 'system' ... else` is where a default system prompt goes
                yield from _walk(child, "system" if role == "system" else turn)
            return
    for child in node.iter_child_nodes():
        yield from _walk(child, turn)


def _source(node: Any) -> str:
    from jinja2 import nodes

    return repr(node.value) if isinstance(node, nodes.Const) else type(node).__name__


def _mentions_content(node: Any) -> bool:
    from jinja2 import nodes

    for sub in [node, *node.find_all((nodes.Getattr, nodes.Getitem))]:
        if isinstance(sub, nodes.Getattr) and sub.attr == "content":
            return True
        if isinstance(sub, nodes.Getitem) and isinstance(sub.arg, nodes.Const) and sub.arg.value == "content":
            return True
    return False


def _content_trigger(test: Any) -> str | None:
    """The phrase a condition looks for in a message's content, if it does."""
    from jinja2 import nodes

    for compare in [test, *test.find_all(nodes.Compare)] if isinstance(test, nodes.Node) else []:
        if isinstance(compare, nodes.Compare):
            sides = [compare.expr, *(op.expr for op in compare.ops)]
            ops = {op.op for op in compare.ops}
            phrases = [s.value for s in sides if isinstance(s, nodes.Const) and isinstance(s.value, str) and _phrase(s.value)]
            if ops & {"in", "notin", "eq", "ne"} and phrases and any(_mentions_content(s) for s in sides):
                return phrases[0]
    for call in [test, *test.find_all(nodes.Call)] if isinstance(test, nodes.Node) else []:
        searched = isinstance(call, nodes.Call) and isinstance(call.node, nodes.Getattr) and call.node.attr in SEARCHES
        if searched and _mentions_content(call.node.node):
            phrases = [a.value for a in call.args if isinstance(a, nodes.Const) and isinstance(a.value, str) and _phrase(a.value)]
            if phrases:
                return phrases[0]
    return None


def _phrase(value: str) -> bool:
    """Words, not a special token or tag (`'<think>' in message.content` splits reasoning, it is no trigger)."""
    return bool(STRUCTURE.sub("", value).strip())


def _role_test(test: Any) -> str | None:
    """'system' or 'assistant' when a condition picks that role's turn."""
    from jinja2 import nodes

    for compare in [test, *test.find_all(nodes.Compare)] if isinstance(test, nodes.Node) else []:
        if isinstance(compare, nodes.Compare) and {op.op for op in compare.ops} & {"eq", "in"}:
            for side in [compare.expr, *(op.expr for op in compare.ops)]:
                if isinstance(side, nodes.Const) and side.value in ("system", "assistant"):
                    return str(side.value)
    return None
