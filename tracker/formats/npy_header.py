"""A .npy file's header (the `\\x93NUMPY` magic, version, header length, a Python dict literal): its dtype says
whether a pickle follows (object arrays, `|O`). Read without trusting it: lengths capped, the literal parsed
by `ast.literal_eval`, never evaluated."""

from __future__ import annotations

import ast
import struct
from typing import Any

NPY_MAGIC = b"\x93NUMPY"
NPY_HEADER_CAP = 65_536


def npy_header(head: bytes) -> tuple[Any, int, str | None]:
    """(dtype descr, where the data starts, problem) of a .npy file's first bytes."""
    if head[:6] != NPY_MAGIC or len(head) < 10:
        return None, 0, "not a .npy file (no \\x93NUMPY magic)"
    major = head[6]
    if major == 1:
        length, start = struct.unpack_from("<H", head, 8)[0], 10
    elif major in (2, 3) and len(head) >= 12:
        length, start = struct.unpack_from("<I", head, 8)[0], 12
    else:
        return None, 0, f".npy version {major} is not read"
    if length > NPY_HEADER_CAP or start + length > len(head):
        return None, 0, f".npy header of {length:,} bytes is truncated or over the {NPY_HEADER_CAP:,}-byte cap"
    try:
        header = ast.literal_eval(head[start : start + length].decode("latin1"))
    except (ValueError, SyntaxError, MemoryError, RecursionError) as err:
        return None, 0, f".npy header is not a Python literal: {err}"
    if not isinstance(header, dict) or "descr" not in header:
        return None, 0, ".npy header has no descr"
    return header["descr"], start + length, None
