"""A repo at one commit, as the differs see it: its files, the contents we hold, weight headers."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tracker.formats import FileScan

T = TypeVar("T")


@dataclass(frozen=True)
class FileEntry:
    """One file of a commit's tree. `oid` is the git blob sha1; LFS files also carry their sha256."""

    path: str
    oid: str
    size: int
    lfs_sha256: str | None = None
    lfs_size: int | None = None

    @property
    def content_id(self) -> str:
        """What identifies the content: the LFS sha256 when there is one, else the blob oid."""
        return self.lfs_sha256 or self.oid


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a safetensors header."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def parameters(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class WeightManifest:
    """The tensors one weight file declares, read from its header without downloading weights."""

    tensors: tuple[TensorInfo, ...] = ()
    metadata: dict[str, str] = field(default_factory=dict)
    error: str | None = None

    @property
    def parameters(self) -> int:
        return sum(t.parameters for t in self.tensors)

    def parameters_by_dtype(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.dtype] = out.get(t.dtype, 0) + t.parameters
        return out


@dataclass
class Snapshot:
    """A repo at one commit.

    `contents` holds the bytes of every tracked file we could read; `unavailable` says, for a tracked
    file whose bytes we do not hold, why (too large, missing upstream). `manifests` maps each
    safetensors path to its header; `scans` each file a format scanner read (tracker/formats: GGUF headers)
    to what it found.
    """

    repo_id: str
    sha: str
    files: dict[str, FileEntry] = field(default_factory=dict)
    contents: dict[str, bytes] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    manifests: dict[str, WeightManifest] = field(default_factory=dict)
    scans: dict[str, FileScan] = field(default_factory=dict)
    _json_cache: dict[str, tuple[Any, str | None]] = field(default_factory=dict, repr=False, compare=False)
    _derived: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def has(self, path: str) -> bool:
        return path in self.files

    def text(self, path: str) -> str | None:
        """The file's text (UTF-8, invalid bytes replaced), or None when we do not hold it."""
        data = self.contents.get(path)
        if data is None:
            return None
        return data.decode("utf-8", errors="replace")

    def derived(self, name: str, compute: Callable[[Snapshot], T]) -> T:
        """`compute(self)`, once per snapshot and `name`: what is read from a snapshot's files (like `read_json`'s
        documents) is worked out once, however many revisions' ingests look at it (a poll's chain of commits
        passes each snapshot on as the next one's parent)."""
        if name not in self._derived:
            self._derived[name] = compute(self)
        return self._derived[name]

    def read_json(self, path: str) -> tuple[Any, str | None]:
        """(value, None) for a parsed JSON file; (None, reason) when absent, unavailable or malformed."""
        if path in self._json_cache:
            return self._json_cache[path]
        result: tuple[Any, str | None]
        if path not in self.files:
            result = (None, f"{path} is not in the repo")
        elif path not in self.contents:
            result = (None, self.unavailable.get(path, f"{path} was not downloaded"))
        else:
            try:
                result = (json.loads(self.contents[path]), None)
            except (ValueError, UnicodeDecodeError) as err:
                result = (None, f"{path} is not valid JSON: {err}")
        self._json_cache[path] = result
        return result
