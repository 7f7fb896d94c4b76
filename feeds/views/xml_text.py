"""Text from upstream (commit titles, file contents) made safe to put in XML and HTML documents.

Escaping `<` and `&` is the template engine's and the XML serialiser's job. What neither does is drop
characters XML 1.0 forbids (C0 controls, lone surrogates, U+FFFE/U+FFFF): lxml refuses them, and in HTML
they are invisible. They are shown instead, as the Unicode control pictures (U+2400...) or U+FFFD.
"""

from __future__ import annotations

import re
from typing import Any

# Everything XML 1.0 does not allow, plus DEL and the C1 controls, which it allows but no reader shows.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def _picture(match: re.Match[str]) -> str:
    ch = match.group(0)
    code = ord(ch)
    if code < 0x20:
        return chr(0x2400 + code)  # ␀ ␇ ␛ ...
    if code == 0x7F:
        return "\u2421"  # ␡
    return "\ufffd"


_PRINTABLE_ASCII = bytes(range(0x20, 0x7F)) + b"\t\n\r"


def visible(text: str) -> str:
    """`text` with every control character XML cannot carry replaced by a visible stand-in."""
    if text.isascii() and not text.encode("ascii").translate(None, _PRINTABLE_ASCII):
        return text  # the common case, checked at C speed
    return _NOT_XML.sub(_picture, text)


def visible_any(value: Any) -> Any:
    """`visible` applied to every string inside JSON-like data."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, list):
        return [visible_any(v) for v in value]
    if isinstance(value, dict):
        return {visible(str(k)): visible_any(v) for k, v in value.items()}
    return value


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "\u2026"
