"""Text from repos (commit titles, file names, summaries) made safe to show in a chat message.

Control characters become visible (U+2400 control pictures: ESC shows as ␛), bidi overrides and other
invisible format characters become U+FFFD, so a title cannot hide or reorder what it says. Lengths
are counted in UTF-16 code units, as Slack and Discord count them.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

ELLIPSIS = "…"


def visible(text: object, newlines: bool = True) -> str:
    """`text` with control and invisible format characters replaced by visible ones."""
    out = []
    for ch in str(text).replace("\r\n", "\n"):
        code = ord(ch)
        if ch == "\n":
            out.append("\n" if newlines else " ")
        elif ch == "\t":
            out.append(" ")
        elif code < 0x20:
            out.append(chr(0x2400 + code))
        elif code == 0x7F:
            out.append("\u2421")
        elif 0xD800 <= code <= 0xDFFF or unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            out.append("\ufffd")
        else:
            out.append(ch)
    return "".join(out)


def units(text: str) -> int:
    """Length in UTF-16 code units (characters outside the BMP count two)."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def fit(text: str, limit: int, escape: Callable[[str], str]) -> str:
    """Escape `text` and cut it to at most `limit` UTF-16 units, never inside an escape sequence; an
    ellipsis marks a cut."""
    pieces = [escape(ch) for ch in text]
    if sum(units(p) for p in pieces) <= limit:
        return "".join(pieces)
    budget = limit - units(ELLIPSIS)
    out: list[str] = []
    used = 0
    for piece in pieces:
        if used + units(piece) > budget:
            break
        out.append(piece)
        used += units(piece)
    return "".join(out) + ELLIPSIS
