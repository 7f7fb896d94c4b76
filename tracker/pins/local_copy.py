"""A model copied to disk (a quantization or fine-tune in a directory, or a snapshot of the HF cache) read
as hostile input into a Snapshot whose parts tracker/family/lineage.py compares with the base's history.

Only the files a behaviour part is read from are opened (tokenizer_config.json, chat_template.jinja,
tokenizer.json, generation_config.json, config.json, ...), and README.md for its card's `base_model`;
each through tracker/formats/local_files.py: a regular file only, under a size cap, never a symlink that leads out
of the directory (an HF cache snapshot's symlinks may reach its repo folder's blobs). A GGUF file in the
directory gives the parts when no tokenizer_config.json or chat_template.jinja does. A file that cannot be
used (refused, malformed JSON) is a note naming it, and the rest is still read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from storage.blobs import git_blob_oid
from tracker.errors import BadInput
from tracker.family.lineage import PART_FILES, card_bases, gguf_paths
from tracker.formats import FileScan
from tracker.formats.local_files import is_inside, read_regular_file
from tracker.pins.gguf_lineage import named_bases, read_gguf_header
from tracker.revision.snapshot import FileEntry, Snapshot

README = "README.md"
MAX_PART_BYTES = 64 * 2**20  # a 256k-token tokenizer.json is some 35 MB
MAX_README_BYTES = 2 * 2**20
MAX_LISTED = 10_000  # directory entries looked at for GGUF files


@dataclass
class LocalCopy:
    """What a directory holds: the snapshot of its part files, the bases its card or GGUF header names, and
    a note per file that could not be used."""

    path: str
    snapshot: Snapshot
    bases: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def paths(self) -> list[str]:
        return sorted(self.snapshot.files)


def read_copy(directory: Path, within: Path | None = None) -> LocalCopy:
    """The part files of `directory` (symlinks must stay inside `within`, default the directory itself).
    Raises BadInput when `directory` is not a directory."""
    if not directory.is_dir():
        raise BadInput(f"{directory} is not a directory (--local takes a model directory; --gguf a file)")
    fence = within or directory
    copy = LocalCopy(str(directory), Snapshot(repo_id=str(directory), sha="local"))
    for name in sorted(PART_FILES | {README}):
        data = _read(directory / name, fence, MAX_README_BYTES if name == README else MAX_PART_BYTES, copy.notes)
        if data is None:
            continue
        if name == README:
            copy.bases += card_bases(data.decode("utf-8", "replace"))
            continue
        copy.snapshot.files[name] = FileEntry(name, git_blob_oid(data), len(data))
        copy.snapshot.contents[name] = data
        value, problem = copy.snapshot.read_json(name) if name.endswith(".json") else (None, None)
        if problem is not None or (name.endswith(".json") and not isinstance(value, dict)):
            copy.notes.append(f"{name}: not a JSON object ({problem or type(value).__name__}): not used")
            del copy.snapshot.files[name], copy.snapshot.contents[name]
            copy.snapshot._json_cache.pop(name, None)
    if not any(p in copy.snapshot.files for p in ("tokenizer_config.json", "chat_template.jinja")):
        _read_gguf(directory, fence, copy)
    copy.bases = list(dict.fromkeys(copy.bases))
    return copy


def _read(path: Path, fence: Path, limit: int, notes: list[str]) -> bytes | None:
    if not os.path.lexists(path):
        return None
    try:
        return read_regular_file(path, limit, within=fence, what="the local file")
    except BadInput as err:  # RefusedFile included: not regular, too large, a symlink out of the directory
        notes.append(str(err))
        return None


def _read_gguf(directory: Path, fence: Path, copy: LocalCopy) -> None:
    """The header of the directory's first GGUF file (every quantization of a model carries the same keys)."""
    try:
        with os.scandir(directory) as entries:
            names = [e.name for e in islice(entries, MAX_LISTED) if e.name.endswith(".gguf")]
    except OSError as err:
        copy.notes.append(f"{directory}: cannot be listed: {err.strerror or err}")
        return
    for name in gguf_paths(names)[:1]:
        path = directory / name
        if not is_inside(path, fence):
            copy.notes.append(f"refused the local file {path}: a symlink out of {fence}")
            continue
        try:
            facts, note = read_gguf_header(path)
        except BadInput as err:
            copy.notes.append(str(err))
            continue
        if note:
            copy.notes.append(f"{name}: {note}")
        copy.snapshot.files[name] = FileEntry(name, "", 0)
        copy.snapshot.scans[name] = FileScan("gguf", facts, 0, None, None)
        copy.bases += named_bases(facts)
