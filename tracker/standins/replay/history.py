"""Recorded repo histories (see FORMAT.md) loaded into commits and per-commit file trees.

Everything here is read-only once loaded. File bytes are never held whole: each blob serves byte
ranges on demand, so multi-gigabyte LFS files and large synthetic files cost nothing until read.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml  # a dependency of huggingface_hub, which parses model cards with it too

CHUNK_SIZE = 1 << 20
LFS_POINTER = "version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n"
FRONT_MATTER = re.compile(r"\A\s*---\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


class HistoryError(ValueError):
    """A history folder does not follow FORMAT.md."""


def git_blob_sha1(size: int, chunks: Iterator[bytes]) -> str:
    """The git object id of a blob with these bytes."""
    digest = hashlib.sha1(b"blob %d\0" % size)
    for chunk in chunks:
        digest.update(chunk)
    return digest.hexdigest()


class Blob:
    """The bytes of one file version. Subclasses implement `size` and `_read`."""

    size: int

    def _read(self, offset: int, length: int) -> bytes:
        raise NotImplementedError

    def chunks(self, start: int = 0, stop: int | None = None) -> Iterator[bytes]:
        """Bytes [start, stop) in pieces of at most CHUNK_SIZE."""
        stop = self.size if stop is None else min(stop, self.size)
        offset = start
        while offset < stop:
            length = min(CHUNK_SIZE, stop - offset)
            yield self._read(offset, length)
            offset += length

    def read(self, start: int = 0, stop: int | None = None) -> bytes:
        return b"".join(self.chunks(start, stop))

    @cached_property
    def oid(self) -> str:
        """The git blob sha1 of the bytes served."""
        return git_blob_sha1(self.size, self.chunks())


class DiskBlob(Blob):
    """A regular file stored under a commit's `files/`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = path.stat().st_size

    def _read(self, offset: int, length: int) -> bytes:
        with self.path.open("rb") as f:
            f.seek(offset)
            return f.read(length)


class PatternBlob(Blob):
    """A `synthetic` regular file: `pattern` repeated up to `size` bytes, generated on demand."""

    def __init__(self, pattern: bytes, size: int) -> None:
        self.pattern, self.size = pattern, size

    @cached_property
    def _block(self) -> bytes:
        return self.pattern * (CHUNK_SIZE // len(self.pattern) + 2)

    def _read(self, offset: int, length: int) -> bytes:
        start = offset % len(self.pattern)
        return self._block[start : start + length]


class LfsBlob(Blob):
    """An LFS file: real bytes from `files/`, or synthesised: a prefix (a safetensors or GGUF header),
    zeros, then a suffix (a zip's central directory), so a multi-GB file costs only its real bytes."""

    def __init__(
        self, size: int, prefix: bytes = b"", sha256: str | None = None, source: Blob | None = None, suffix: bytes = b""
    ) -> None:
        self.size, self.prefix, self.source, self._sha256 = size, prefix, source, sha256
        self.suffix = suffix[len(suffix) - min(len(suffix), max(0, size - len(prefix))) :]

    def _read(self, offset: int, length: int) -> bytes:
        if self.source is not None:
            return self.source.read(offset, offset + length)
        stop = offset + length
        head = self.prefix[offset:stop]
        tail_start = self.size - len(self.suffix)
        if not self.suffix or stop <= tail_start:
            return head + bytes(length - len(head))
        middle = max(0, tail_start - max(offset, len(self.prefix)))
        tail = self.suffix[max(0, offset - tail_start) : stop - tail_start]
        return head + bytes(middle) + tail

    @cached_property
    def lfs_sha256(self) -> str:
        """The declared sha256, else that of the real bytes, else the stand-in FORMAT.md defines."""
        if self._sha256:
            return self._sha256
        if self.source is not None:
            digest = hashlib.sha256()
            for chunk in self.chunks():
                digest.update(chunk)
            return digest.hexdigest()
        tail = b"\0" + self.suffix if self.suffix else b""
        return hashlib.sha256(b"hubwatch-replay-lfs\0" + self.prefix + b"\0%d" % self.size + tail).hexdigest()

    @property
    def pointer(self) -> bytes:
        return LFS_POINTER.format(sha256=self.lfs_sha256, size=self.size).encode()

    @cached_property
    def oid(self) -> str:
        return git_blob_sha1(len(self.pointer), iter([self.pointer]))


def safetensors_prefix(header: dict[str, Any], header_length: int | None = None) -> tuple[bytes, int]:
    """The first bytes of a safetensors file with this header, and the data extent after them."""
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    length = len(text) if header_length is None else header_length
    extent = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
    return struct.pack("<Q", length) + text, extent


def parameter_counts(header: dict[str, Any]) -> dict[str, int]:
    """Parameters per dtype declared by a safetensors header."""
    counts: dict[str, int] = {}
    for name, tensor in header.items():
        if name != "__metadata__":
            counts[tensor["dtype"]] = counts.get(tensor["dtype"], 0) + math.prod(tensor["shape"])
    return counts


@dataclass(frozen=True)
class TreeEntry:
    """One file of a commit's tree; `missing` files are listed but their resolve answers 404."""

    blob: Blob
    missing: bool = False
    safetensors: dict[str, Any] | None = None


@dataclass(frozen=True)
class ReplayCommit:
    """One recorded commit. `parent` is the parent's sha (None for a root commit)."""

    sha: str
    title: str
    message: str
    authors: tuple[str, ...]
    date: datetime
    dirname: str
    parent: str | None
    index: int
    touched: frozenset[str]


Tree = dict[str, TreeEntry]


@dataclass(frozen=True)
class Node:
    """A file or a folder of a tree, as listed by the tree and paths-info endpoints."""

    path: str
    entry: TreeEntry | None  # None for folders

    @property
    def is_file(self) -> bool:
        return self.entry is not None


class RepoHistory:
    """One repo: its settings from repo.json, its commits oldest first and the tree of each."""

    def __init__(self, meta: dict[str, Any], commits: list[ReplayCommit], trees: dict[str, Tree]) -> None:
        self.repo_id: str = meta["id"]
        self.private = bool(meta.get("private", False))
        self.gated: str | bool = meta.get("gated", False) or False
        self.default_branch: str = meta.get("default_branch", "main")
        self.meta_card_data: dict[str, Any] | None = meta.get("card_data")
        self.downloads = int(meta.get("downloads", 0) or 0)  # what `sort=downloads` orders by
        self.commits = commits
        self.trees = trees
        self.by_sha = {c.sha: c for c in commits}
        # A dataset's Parquet conversion (`refs/convert/parquet`): its commits, each shown once the branch shows
        # `after` commits (a conversion may lag the head), parented on the one before.
        self.conversions: list[tuple[int, ReplayCommit]] = []
        self._tree_oids: dict[tuple[str, str], str] = {}
        self._identity: tuple[str, datetime] | None = None  # kept when its history is replaced (a squash)

    @property
    def uid(self) -> str:
        """The repo's `_id`: the same across renames and squashes (the first commit's, as first recorded)."""
        return self._identity[0] if self._identity else self.commits[0].sha[:24]

    @property
    def created_at(self) -> datetime:
        return self._identity[1] if self._identity else self.commits[0].date

    def replace_history(self, commits: list[ReplayCommit]) -> None:
        """A new history for the same repo (its `_id` and creation date kept), as a squash leaves it."""
        self._identity = (self.uid, self.created_at)
        self.commits, self.by_sha = commits, {c.sha: c for c in commits}

    def chain(self, sha: str) -> list[ReplayCommit]:
        """The commits reachable from `sha` through parent links, newest first."""
        converted = {c.sha: c for _, c in self.conversions}
        out, current = [], self.by_sha.get(sha) or converted.get(sha)
        while current is not None:
            out.append(current)
            current = (self.by_sha.get(current.parent) or converted.get(current.parent)) if current.parent else None
        return out

    def converted(self, n: int) -> list[ReplayCommit]:
        """The conversion commits shown while the branch shows `n` commits, oldest first."""
        return [commit for after, commit in self.conversions if after <= n]

    def add_conversion(self, after: int, files: dict[str, TreeEntry | bytes | None], title: str = "Update parquet files",
                       date: datetime | None = None) -> ReplayCommit:
        """One more commit of the Parquet conversion branch, over the previous conversion's tree (`files`: a path's
        new TreeEntry or bytes, None: deleted), shown once the branch shows `after` commits."""
        parent = self.conversions[-1][1] if self.conversions else None
        tree = dict(self.trees[parent.sha]) if parent else {}
        for path, value in files.items():
            if value is None:
                tree.pop(path, None)
            else:
                tree[path] = value if isinstance(value, TreeEntry) else TreeEntry(BytesBlob(value))
        index = len(self.conversions)
        dirname = f"convert-{index + 1:04d}"
        sha = hashlib.sha1(f"{self.repo_id}\n{dirname}\n{after}".encode()).hexdigest()
        base = self.commits[max(0, min(after, len(self.commits)) - 1)].date
        commit = ReplayCommit(sha=sha, title=title, message="", authors=("parquet-converter",),
                              date=date or base + timedelta(minutes=5), dirname=dirname,
                              parent=parent.sha if parent else None, index=index, touched=frozenset(files))
        self.trees[sha] = tree
        self.conversions.append((after, commit))
        return commit

    def node(self, sha: str, path: str) -> Node | None:
        """The file or folder at `path` ("" is the root folder), or None."""
        tree = self.trees[sha]
        if path in tree:
            return Node(path, tree[path])
        if path == "" or any(p.startswith(path + "/") for p in tree):
            return Node(path, None)
        return None

    def list_dir(self, sha: str, path: str, recursive: bool) -> list[Node]:
        """Files and folders under folder `path`, sorted by path; direct children unless recursive."""
        prefix = path + "/" if path else ""
        nodes: dict[str, Node] = {}
        for file_path, entry in self.trees[sha].items():
            if not file_path.startswith(prefix):
                continue
            parts = file_path[len(prefix) :].split("/")
            for depth in range(1, len(parts)):
                folder = prefix + "/".join(parts[:depth])
                nodes.setdefault(folder, Node(folder, None))
                if not recursive:
                    break
            if recursive or len(parts) == 1:
                nodes[file_path] = Node(file_path, entry)
        return [nodes[p] for p in sorted(nodes)]

    def tree_oid(self, sha: str, path: str) -> str:
        """The git tree object id of folder `path` at commit `sha`."""
        key = (sha, path)
        if key not in self._tree_oids:
            items = []
            for node in self.list_dir(sha, path, recursive=False):
                name = node.path.rsplit("/", 1)[-1].encode()
                if node.entry is not None:
                    items.append((name, b"100644 ", bytes.fromhex(node.entry.blob.oid)))
                else:
                    items.append((name + b"/", b"40000 ", bytes.fromhex(self.tree_oid(sha, node.path))))
            body = b"".join(mode + name.rstrip(b"/") + b"\0" + raw for name, mode, raw in sorted(items))
            self._tree_oids[key] = hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()
        return self._tree_oids[key]

    def card_data(self, sha: str) -> dict[str, Any] | None:
        """The model card metadata at `sha`: README.md front matter, else repo.json's `card_data`."""
        entry = self.trees[sha].get("README.md")
        if entry is not None and entry.blob.size < CHUNK_SIZE:
            match = FRONT_MATTER.match(entry.blob.read().decode("utf-8", "replace"))
            try:
                data = yaml.safe_load(match.group(1)) if match else None
            except yaml.YAMLError:
                data = None
            if isinstance(data, dict):
                return data
        return self.meta_card_data

    def family_tags(self, sha: str) -> list[str]:
        """The tags the Hub derives from the card's `base_model` (a repo id or a list of them) and
        `base_model_relation`: `base_model:<id>` and `base_model:<relation>:<id>`. Without a relation the
        Hub infers one: adapter (adapter_config.json), quantized (a .gguf file or a quantization_config),
        merge (several bases), else finetune. A malformed `base_model` derives no tag."""
        card = self.card_data(sha) or {}
        value = card.get("base_model")
        bases = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        bases = [b for b in bases if isinstance(b, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", b)]
        if not bases:
            return []
        relation = card.get("base_model_relation")
        if relation not in ("quantized", "finetune", "adapter", "merge"):
            relation = self._inferred_relation(sha, len(bases))
        return [tag for base in bases for tag in (f"base_model:{base}", f"base_model:{relation}:{base}")]

    def _inferred_relation(self, sha: str, bases: int) -> str:
        tree = self.trees[sha]
        if "adapter_config.json" in tree:
            return "adapter"
        config = tree.get("config.json")
        quantized = any(p.endswith(".gguf") for p in tree) or (
            config is not None and config.blob.size < CHUNK_SIZE and b'"quantization_config"' in config.blob.read())
        return "quantized" if quantized else "merge" if bases > 1 else "finetune"

    def last_commit(self, sha: str, path: str) -> ReplayCommit:
        """The newest commit reachable from `sha` that changed the file or anything under the folder `path`."""
        chain = self.chain(sha)
        for commit in chain:
            if commit.parent is None:
                return commit
            old, new = self.trees[commit.parent], self.trees[commit.sha]
            for touched in commit.touched:
                if touched == path or not path or touched.startswith(path + "/"):
                    before, after = old.get(touched), new.get(touched)
                    if before is None or after is None or before.blob.oid != after.blob.oid:
                        return commit
        return chain[-1]


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise HistoryError(f"{path}: {err}") from err


def _parse_date(value: str, where: Path) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError) as err:
        raise HistoryError(f"{where}: bad date {value!r}") from err
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)


def _lfs_blob(spec: dict[str, Any], source: Blob | None, folder: Path) -> tuple[LfsBlob, dict[str, Any] | None]:
    header = spec.get("safetensors")
    prefix, extent = safetensors_prefix(header, spec.get("header_length")) if header is not None else (b"", 0)
    if "head" in spec:
        prefix = _side_bytes(folder, spec["head"])
    suffix = _side_bytes(folder, spec["tail"]) if "tail" in spec else b""
    size = spec.get("size", source.size if source is not None else len(prefix) + extent + len(suffix))
    if "truncate" in spec:
        size = min(size, spec["truncate"])
    return LfsBlob(size, prefix[:size], spec.get("sha256"), source, suffix), header


def _side_bytes(folder: Path, name: Any) -> bytes:
    """The bytes of a `head`/`tail` file, named relative to the commit folder (outside `files/`)."""
    path = (folder / str(name)).resolve()
    if not isinstance(name, str) or folder.resolve() not in path.parents or not path.is_file():
        raise HistoryError(f"{folder}: lfs head/tail {name!r} is not a file inside the commit folder")
    return path.read_bytes()


def _installer_made(relative: Path) -> bool:
    """Byte code pip writes beside the .py files of a history when it installs the package: not part
    of any recorded repo."""
    return "__pycache__" in relative.parts or relative.suffix in {".pyc", ".pyo"}


def _apply_commit(parent_tree: Tree, folder: Path, spec: dict[str, Any]) -> tuple[Tree, frozenset[str]]:
    """The tree after the commit in `folder` (FORMAT.md: parent's tree + files, lfs, synthetic - delete)."""
    tree = dict(parent_tree)
    files_dir = folder / "files"
    files = {
        p.relative_to(files_dir).as_posix(): DiskBlob(p)
        for p in (sorted(files_dir.rglob("*")) if files_dir.is_dir() else [])
        if p.is_file() and not _installer_made(p.relative_to(files_dir))
    }
    lfs, synthetic = spec.get("lfs", {}), spec.get("synthetic", {})
    if overlap := (set(files) | set(lfs)) & set(synthetic):
        raise HistoryError(f"{folder}: synthetic paths also given as files or lfs: {sorted(overlap)}")
    for path, blob in files.items():
        if path not in lfs:
            tree[path] = TreeEntry(blob)
    for path, lfs_spec in lfs.items():
        blob, header = _lfs_blob(lfs_spec, files.get(path), folder)
        tree[path] = TreeEntry(blob, safetensors=header)
    for path, syn in synthetic.items():
        if not syn.get("byte", "\0"):
            raise HistoryError(f"{folder}: synthetic {path!r} has an empty byte")
        tree[path] = TreeEntry(PatternBlob(syn.get("byte", "\0").encode(), syn["size"]))
    for path in spec.get("delete", []):
        if tree.pop(path, None) is None:
            raise HistoryError(f"{folder}: deletes {path!r}, which the parent tree lacks")
    for path in spec.get("missing", []):
        if path not in tree:
            raise HistoryError(f"{folder}: {path!r} is missing but not in the tree")
        tree[path] = TreeEntry(tree[path].blob, True, tree[path].safetensors)
    touched = set(files) | set(lfs) | set(synthetic) | set(spec.get("delete", []))
    return tree, frozenset(touched)


def load_repo(folder: Path, prefix: str = "") -> RepoHistory:
    """Load one `<root>/<org>/<name>/` folder (`prefix` "datasets/": a dataset's `<root>/datasets/<org>/<name>/`,
    whose id is `datasets/<org>/<name>`)."""
    meta = _read_json(folder / "repo.json")
    repo_id = meta.get("id")
    if repo_id != f"{prefix}{folder.parent.name}/{folder.name}":
        raise HistoryError(f"{folder}/repo.json: id {repo_id!r} does not match the folder")
    commits: list[ReplayCommit] = []
    trees: dict[str, Tree] = {}
    by_dir: dict[str, ReplayCommit] = {}
    for index, dirname in enumerate(meta.get("commits", [])):
        where = folder / "commits" / dirname
        spec = _read_json(where / "commit.json")
        if "parent" in spec:
            parent_dir = spec["parent"]
            if parent_dir is not None and parent_dir not in by_dir:
                raise HistoryError(f"{where}: parent {parent_dir!r} is not an earlier commit")
        else:
            parent_dir = commits[-1].dirname if commits else None
        parent = by_dir[parent_dir] if parent_dir is not None else None
        sha = spec.get("sha") or hashlib.sha1(f"{repo_id}\n{dirname}".encode()).hexdigest()
        try:
            tree, touched = _apply_commit(trees[parent.sha] if parent else {}, where, spec)
        except (KeyError, TypeError, AttributeError) as err:
            raise HistoryError(f"{where}: malformed commit.json ({err!r})") from err
        commit = ReplayCommit(
            sha=sha,
            title=spec.get("title", ""),
            message=spec.get("message", ""),
            authors=tuple(spec.get("authors", [])),
            date=_parse_date(spec.get("date"), where),
            dirname=dirname,
            parent=parent.sha if parent else None,
            index=index,
            touched=touched,
        )
        if sha in trees:
            raise HistoryError(f"{where}: duplicate sha {sha}")
        commits.append(commit)
        by_dir[dirname] = commit
        trees[sha] = tree
    return RepoHistory(meta, commits, trees)


def load_roots(roots: list[Path]) -> dict[str, RepoHistory]:
    """Every repo under the roots; a repo in a later root replaces one with the same id in an earlier root."""
    repos: dict[str, RepoHistory] = {}
    for root in roots:
        if not root.is_dir():
            raise HistoryError(f"replay root {root} is not a folder")
        for repo_json in sorted(root.glob("*/*/repo.json")):
            history = load_repo(repo_json.parent)
            repos[history.repo_id] = history
        for repo_json in sorted(root.glob("datasets/*/*/repo.json")):  # dataset repos: `datasets/org/name`
            history = load_repo(repo_json.parent, "datasets/")
            repos[history.repo_id] = history
    return repos


class BytesBlob(Blob):
    """A regular file held in memory (synthetic histories)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.size = data, len(data)

    def _read(self, offset: int, length: int) -> bytes:
        return self.data[offset : offset + length]


def synthetic_history(repo_id: str, commits: int = 1, start: datetime | None = None, private: bool = False) -> RepoHistory:
    """A small repo built in memory (no folder): `commits` commits an hour apart, each rewriting a
    config.json; for tests and benchmarks that need many repos (10,000 load in about a second)."""
    start = start or datetime(2024, 1, 1, tzinfo=UTC)
    made: list[ReplayCommit] = []
    trees: dict[str, Tree] = {}
    parent: ReplayCommit | None = None
    for index in range(commits):
        dirname = f"{index + 1:04d}-commit-{index + 1}"
        sha = hashlib.sha1(f"{repo_id}\n{dirname}".encode()).hexdigest()
        config = json.dumps({"model_type": "synthetic", "revision": index + 1}).encode()
        tree: Tree = {"config.json": TreeEntry(BytesBlob(config))}
        commit = ReplayCommit(
            sha=sha,
            title=f"commit {index + 1}",
            message="",
            authors=("synthetic",),
            date=start + timedelta(hours=index),
            dirname=dirname,
            parent=parent.sha if parent else None,
            index=index,
            touched=frozenset({"config.json"}),
        )
        made.append(commit)
        trees[sha] = tree
        parent = commit
    return RepoHistory({"id": repo_id, "private": private}, made, trees)


def scripted_history(repo_id: str, steps: list[dict[str, bytes | TreeEntry | None]], start: datetime | None = None,
                     gated: str | bool = False, titles: list[str] | None = None) -> RepoHistory:
    """A repo built in memory from `steps`, one commit each, an hour apart: each maps a path to its new bytes (a
    regular file), a TreeEntry (an LFS file: `lfs_entry`) or None (deleted), over the parent's tree; `titles`: the
    commits' titles (default "step N")."""
    start = start or datetime(2024, 1, 1, tzinfo=UTC)
    made: list[ReplayCommit] = []
    trees: dict[str, Tree] = {}
    tree: Tree = {}
    for index, step in enumerate(steps):
        tree = dict(tree)
        for path, value in step.items():
            if value is None:
                tree.pop(path, None)
            else:
                tree[path] = value if isinstance(value, TreeEntry) else TreeEntry(BytesBlob(value))
        dirname = f"{index + 1:04d}-step-{index + 1}"
        sha = hashlib.sha1(f"{repo_id}\n{dirname}\n{sorted(step)}".encode()).hexdigest()
        made.append(ReplayCommit(sha=sha, title=titles[index] if titles else f"step {index + 1}", message="", authors=("scripted",),
                                 date=start + timedelta(hours=index), dirname=dirname,
                                 parent=made[-1].sha if made else None, index=index, touched=frozenset(step)))
        trees[sha] = tree
    return RepoHistory({"id": repo_id, "gated": gated}, made, trees)


def lfs_entry(header: dict[str, Any], size: int | None = None) -> TreeEntry:
    """A safetensors LFS file with this header (its data zeros), as `scripted_history` takes it."""
    prefix, extent = safetensors_prefix(header)
    return TreeEntry(LfsBlob(size or len(prefix) + extent, prefix), safetensors=header)
