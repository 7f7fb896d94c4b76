"""A repo at one commit, as the differs see it: its files, the contents we hold, weight headers."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tracker.formats import FileScan
from tracker.formats.manifest import WeightManifest

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


class Contents(MutableMapping[str, bytes]):
    """File bytes by path, a dict whose entries may be deferred: `defer(path, load)` holds the path (`in` is true)
    and reads its bytes with `load()` the first time they are asked for (a stored snapshot's large tokenizer.json,
    which a config.json move never looks at). Iterating over values reads every deferred entry."""

    def __init__(self, data: Mapping[str, bytes] | None = None) -> None:
        self._data: dict[str, bytes] = dict(data or {})
        self._deferred: dict[str, Callable[[], bytes]] = {}

    def defer(self, path: str, load: Callable[[], bytes]) -> None:
        self._data.pop(path, None)
        self._deferred[path] = load if isinstance(load, _Once) else _Once(load)

    def loader(self, path: str) -> Callable[[], bytes]:
        """What gives this path's bytes, reading nothing now (KeyError when the path is not held): deferred here, the
        same reader, so that a snapshot and the next one deferring to it read the bytes once between them."""
        if path in self._data:
            return _Once(None, self._data[path])
        return self._deferred[path]

    def is_deferred(self, path: str) -> bool:
        return path in self._deferred

    def __getitem__(self, path: str) -> bytes:
        if path not in self._data:
            self._data[path] = self._deferred[path]()  # KeyError: not held
            del self._deferred[path]
        return self._data[path]

    def __setitem__(self, path: str, data: bytes) -> None:
        self._deferred.pop(path, None)
        self._data[path] = data

    def __delitem__(self, path: str) -> None:
        if self._deferred.pop(path, None) is None:
            del self._data[path]

    def __contains__(self, path: object) -> bool:
        return path in self._data or path in self._deferred

    def __iter__(self) -> Iterator[str]:
        yield from list(self._data)
        yield from list(self._deferred)

    def __len__(self) -> int:
        return len(self._data) + len(self._deferred)

    def __repr__(self) -> str:
        return f"Contents({sorted(self)!r}, deferred={sorted(self._deferred)!r})"


class _Once:
    """A reader called at most once: its bytes are kept for every later call."""

    __slots__ = ("_load", "_data")

    def __init__(self, load: Callable[[], bytes] | None, data: bytes | None = None) -> None:
        self._load, self._data = load, data

    def __call__(self) -> bytes:
        if self._data is None:
            assert self._load is not None
            self._data, self._load = self._load(), None
        return self._data


@dataclass
class Snapshot:
    """A repo at one commit.

    `contents` holds the bytes of every tracked file we could read (some read on first use: `Contents`);
    `unavailable` says, for a tracked file whose bytes we do not hold, why (too large, missing upstream).
    `manifests` maps each safetensors path to its header; `scans` each file a format scanner read
    (tracker/formats: GGUF headers) to what it found.
    """

    repo_id: str
    sha: str
    files: dict[str, FileEntry] = field(default_factory=dict)
    contents: MutableMapping[str, bytes] = field(default_factory=Contents)
    unavailable: dict[str, str] = field(default_factory=dict)
    manifests: dict[str, WeightManifest] = field(default_factory=dict)
    scans: dict[str, FileScan] = field(default_factory=dict)
    _json_cache: dict[str, tuple[Any, str | None]] = field(default_factory=dict, repr=False, compare=False)
    _derived: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.contents, Contents):
            self.contents = Contents(self.contents)

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
