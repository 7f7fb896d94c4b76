"""Markdown for generated pages: tables whose cells hold any text, literal values, fenced blocks."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

_CODE_SPAN = re.compile(r"(`[^`]*`)")
_MARKUP = re.compile(r"([\\*_\[\]|])")


def cell(text: object) -> str:
    """`text` as one table cell that shows it literally: one line, code spans kept, markup and pipes escaped."""
    parts = _CODE_SPAN.split(" ".join(str(text).split()))
    return "".join(_code(part) if part.startswith("`") and part.endswith("`") and len(part) > 1 else _plain(part)
                   for part in parts)


def _plain(text: str) -> str:
    return _MARKUP.sub(r"\\\1", html.escape(text, quote=False))


def _code(span: str) -> str:
    return span.replace("|", "\\|")


def code(text: object) -> str:
    """`text` as an inline code span (longer backtick fences when it holds backticks), safe in a table cell."""
    value = str(text)
    fence = "``" if "`" in value else "`"
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}".replace("|", "\\|")


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table; cells are written as given (pass them through `cell` or `code` first)."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def fenced(text: str, language: str = "") -> str:
    """A fenced code block holding `text` as it is."""
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{language}\n{text.rstrip()}\n{fence}"


def json_block(value: Any) -> str:
    """`value` as indented JSON in a fenced block."""
    return fenced(json.dumps(value, indent=2, ensure_ascii=False), "json")
