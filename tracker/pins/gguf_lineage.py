"""`hubwatch outdated --gguf PATH`: which base behaviour change a local GGUF file does not carry.

The file is hostile input (tracker/formats/local_files.py): only a regular file is opened (a FIFO without blocking),
its header read through a RangeSource over the file under the same byte budget a Hub GGUF gets. Its parts
(the embedded chat template, its special tokens and stop set by text, the vocabulary digest) are compared with the base's stored history by
tracker/family/lineage.py. The base is the one the header's `general.base_model.*` keys name, else the one given.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storage.front import Storage
from storage.kinds import is_repo_id
from tracker.errors import BadInput, RefusedFile
from tracker.family.lineage import lacking_parts, parts_of
from tracker.formats import FileScan
from tracker.formats.local_files import file_kind
from tracker.formats.ranged import DEFAULT_BUDGET, LocalFileSource
from tracker.formats.registry import run_scan, scanner_for
from tracker.pins.base_lineage import compare_with_base
from tracker.revision.snapshot import Snapshot

GGUF_BUDGET = DEFAULT_BUDGET  # header bytes a local file may make us read (a Hub GGUF gets the same)
HUB_URL = re.compile(r"^https?://(?:www\.)?huggingface\.co/([\w.-]+/[\w.-]+?)/?$")


def read_gguf_header(path: Path) -> tuple[dict[str, Any], str | None]:
    """The header facts of a local GGUF file (tracker/formats/gguf.py) and the scanner's note on it (a file
    cut short after its header is read, and noted). Raises RefusedFile for anything but a
    readable regular file and BadInput for a file that is not a GGUF header hubwatch can read."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        raise BadInput(f"cannot read the GGUF file {path}: {err.strerror or err}") from err
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = file_kind(info.st_mode)
            raise RefusedFile(str(path), f"{kind}, not a regular file", "the GGUF file")
        spec = scanner_for("model.gguf")
        assert spec is not None
        scan, _ = run_scan(spec, LocalFileSource(fd, info.st_size, GGUF_BUDGET), str(path))
    finally:
        os.close(fd)
    if not scan.result.get("version"):  # the magic and version were not read: not a GGUF header
        raise BadInput(f"{path}: not a GGUF header hubwatch can read: {scan.note or 'nothing found'}")
    return scan.result, scan.note


def named_bases(facts: dict[str, Any]) -> list[str]:
    """The repo ids the header's `general.base_model.N.*` keys name (repo_url on the Hub, else organization/name)."""
    meta = facts.get("metadata") or {}
    found = []
    for index in range(int(meta.get("general.base_model.count") or 0) if isinstance(meta.get("general.base_model.count"), int) else 0):
        prefix = f"general.base_model.{index}."
        url, org, name = (meta.get(prefix + k) for k in ("repo_url", "organization", "name"))
        match = HUB_URL.match(url) if isinstance(url, str) else None
        repo_id = match[1] if match else f"{org}/{name}" if isinstance(org, str) and isinstance(name, str) else None
        if repo_id and is_repo_id(repo_id):
            found.append(repo_id)
    return list(dict.fromkeys(found))


@dataclass
class GgufReport:
    """Where a local GGUF stands against its base. `status`: carries | behind | diverged | no_base | not_watched."""

    path: str
    base_repo_id: str | None
    base_from: str | None  # "metadata" | "--base" | None
    status: str
    parts: dict[str, dict[str, Any]] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    @property
    def checked(self) -> bool:
        return self.status in ("carries", "behind", "diverged")

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "base_repo_id": self.base_repo_id, "base_from": self.base_from, "status": self.status,
                "parts": self.parts, "lines": self.lines}


def check_gguf(store: Storage, path: Path, facts: dict[str, Any], base: str | None) -> GgufReport:
    """The file's parts against the base's stored history: per part carries, behind (the changes it misses),
    diverged, or not in this format (generation defaults: a GGUF holds none)."""
    named = named_bases(facts)
    base_repo_id, base_from = (named[0], "metadata") if named else (base, "--base") if base else (None, None)
    if base_repo_id is None or base_from is None:
        return GgufReport(str(path), None, None, "no_base", lines=[
            "could not tell which base this file derives from: its header has no general.base_model keys; give --base REPO"])
    mine = parts_of(Snapshot(repo_id=str(path), sha="local", scans={path.name: _scan_of(facts)}))
    found = compare_with_base(store, base_repo_id, base_from, mine, lacking_parts([path.name]))
    return GgufReport(str(path), base_repo_id, base_from, found.status, found.parts, found.lines)


def _scan_of(facts: dict[str, Any]) -> FileScan:
    return FileScan("gguf", facts, 0, None, None)
