"""`hubwatch outdated --scan PATH --write`: pins moved in the files that hold them, for teams without
Renovate. Each edit replaces exactly the revision's characters the scan found; a file is written whole
through `tracker.formats.local_files.replace_file` (a temporary file beside it, renamed over it), and a file that
changed since the scan is left as it is and named.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from tracker.errors import BadInput
from tracker.formats.local_files import decode_utf8, read_regular_file, replace_file
from tracker.pins.code_scan import MAX_FILE_BYTES, CodePin

_NUMBER_SHAPED = re.compile(r"[0-9]+(?:[eE][0-9]+)?")


@dataclass(frozen=True)
class Move:
    """One pin to move: where it is, and the sha it moves to."""

    pin: CodePin
    new_sha: str


def write_moves(root: Path, moves: list[Move]) -> tuple[list[Move], list[tuple[str, str]]]:
    """Apply `moves` under `root` (the scanned folder, or the scanned file itself); returns the moves made
    and the (location, why) of those left."""
    by_file: dict[str, list[Move]] = {}
    for move in moves:
        by_file.setdefault(move.pin.path, []).append(move)
    done: list[Move] = []
    left: list[tuple[str, str]] = []
    for shown, file_moves in sorted(by_file.items()):
        path = root if root.is_file() else root / shown
        within = root.parent if root.is_file() else root
        try:
            text = decode_utf8(read_regular_file(path, MAX_FILE_BYTES, within=within, what="source file"), path, "source file")
        except BadInput as err:
            left += [(m.pin.location, str(err)) for m in file_moves]
            continue
        edits = []
        for move in file_moves:
            pin = move.pin
            if pin.start is None or pin.end is None:
                left.append((pin.location, "the revision is not one plain literal (escapes or concatenation): move it by hand"))
            elif text[pin.start:pin.end] != pin.revision:
                left.append((pin.location, "the file changed since it was scanned: scan again"))
            else:
                edits.append(move)
        for move in sorted(edits, key=lambda m: m.pin.start or 0, reverse=True):
            text = text[: move.pin.start] + _spelled(move) + text[move.pin.end:]
        if edits:
            replace_file(path, text.encode("utf-8"), what="source file", mode=os.stat(path).st_mode)
            done += edits
    return done, left


def _spelled(move: Move) -> str:
    """The new sha as written: quoted where it replaces a plain YAML scalar and YAML would read it as a number
    (digits only, or digits around one `e`: an integer, or a float to YAML 1.2 readers)."""
    return f'"{move.new_sha}"' if move.pin.yaml_plain and _NUMBER_SHAPED.fullmatch(move.new_sha) else move.new_sha
