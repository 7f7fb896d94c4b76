"""The model snapshots of a local Hugging Face cache, read as hostile input.

The cache's layout (huggingface_hub's documented one): `models--org--name/` with `snapshots/<sha>/`
(the files, symlinks into `blobs/`) and `refs/<branch>` (a file holding the sha the branch had when it
was downloaded). A cache may come from anywhere (a CI runner's restored cache, a checked-out tree), so
the refs are read through `tracker.formats.local_files`: regular files only, a few bytes at most, never a
symlink leading out of the cache; snapshot files are never opened, only checked to exist. Anything that
is not a model folder (`datasets--`, `spaces--`, `.locks`, `version.txt`, the shared blob store) is
left alone. A model folder with something wrong is skipped with one problem naming it, as huggingface_hub's
own scan does; the other models are still read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tracker.errors import BadInput, LocalCacheMissing
from tracker.formats.local_files import decode_utf8, is_inside, read_regular_file
from tracker.pins.cache import SHA_RE

MODEL_PREFIX = "models--"
MAX_REF_BYTES = 1024  # a ref holds a 40-hex sha
_IGNORED = frozenset({".DS_Store", "Thumbs.db", "desktop.ini"})  # what operating systems drop in folders


@dataclass(frozen=True)
class CachedRevision:
    """One snapshot of a model in the local Hugging Face cache: its commit and the refs naming it."""

    repo_id: str
    sha: str
    refs: tuple[str, ...]


@dataclass(frozen=True)
class CacheScan:
    """The models of a local cache; `problems` are (repo id, what is wrong with its folder)."""

    cache_dir: str
    revisions: list[CachedRevision]
    problems: list[tuple[str, str]]


class _Skipped(Exception):
    """A model folder that cannot be read; its message is the one problem line."""


def scan_cache(cache_dir: str | Path) -> CacheScan:
    """The model snapshots under `cache_dir`. Raises LocalCacheMissing when there is no cache there, and
    BadInput when the path is not a directory."""
    where = os.path.expanduser(str(cache_dir))
    if not os.path.lexists(where):
        raise LocalCacheMissing(f"no Hugging Face cache at {where} (set HF_HUB_CACHE or HF_HOME)")
    if not os.path.isdir(where):
        raise BadInput(f"the Hugging Face cache {where} is not a directory (set HF_HUB_CACHE or HF_HOME)")
    root = os.path.realpath(where)
    revisions: list[CachedRevision] = []
    problems: list[tuple[str, str]] = []
    try:
        folders = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as err:
        raise BadInput(f"cannot read the Hugging Face cache {where}: {err.strerror or err}") from err
    for folder in folders:
        if not folder.name.startswith(MODEL_PREFIX):
            continue
        repo_id = folder.name[len(MODEL_PREFIX):].replace("--", "/")
        try:
            revisions += _scan_model(Path(root, folder.name), repo_id, root)
        except _Skipped as err:
            problems.append((repo_id, str(err)))
        except OSError as err:  # a folder that vanished or cannot be listed as it was read
            problems.append((repo_id, f"cannot read {folder.name}: {err.strerror or err}"))
    return CacheScan(where, sorted(revisions, key=lambda r: (r.repo_id, r.refs == (), r.sha)), problems)


def _scan_model(folder: Path, repo_id: str, root: str) -> list[CachedRevision]:
    """The snapshots of one model folder, each with the refs naming it."""
    if not is_inside(folder, root):
        raise _Skipped(f"{folder.name} is a symlink out of the cache")
    if not folder.is_dir():
        raise _Skipped(f"{folder.name} is not a directory")
    snapshots = folder / "snapshots"
    if not snapshots.is_dir() or not is_inside(snapshots, root):
        raise _Skipped(f"{folder.name} has no snapshots folder inside the cache")
    shas = []
    for entry in sorted(os.scandir(snapshots), key=lambda e: e.name):
        if entry.name in _IGNORED:
            continue
        if not entry.is_dir():
            raise _Skipped(f"snapshots/{entry.name} is not a folder")
        if not is_inside(entry.path, root):
            raise _Skipped(f"snapshots/{entry.name} is a symlink out of the cache")
        _check_blobs(Path(entry.path), folder)
        shas.append(entry.name)
    refs = _refs(folder, root)
    missing = sorted(f"{name} -> {sha}" for name, sha in refs.items() if sha not in shas)
    if missing:
        raise _Skipped(f"ref(s) naming a snapshot that is not in the cache: {', '.join(missing)}")
    return [CachedRevision(repo_id, sha, tuple(sorted(n for n, s in refs.items() if s == sha))) for sha in shas]


def _check_blobs(snapshot: Path, folder: Path) -> None:
    """A snapshot's files exist (a symlink whose blob is gone means an interrupted or pruned download).
    They are never opened: the pins need only the snapshot's name."""
    for dirpath, _dirs, files in os.walk(snapshot):  # symlinked folders are not descended
        for name in files:
            path = Path(dirpath, name)
            if path.is_symlink() and not path.exists():
                raise _Skipped(f"blob missing (broken symlink): {path.relative_to(folder)}")


def _refs(folder: Path, root: str) -> dict[str, str]:
    """ref name -> sha, each ref read as a small regular file inside the cache."""
    refs_dir = folder / "refs"
    if not os.path.lexists(refs_dir):
        return {}
    if not refs_dir.is_dir() or not is_inside(refs_dir, root):
        raise _Skipped("refs is not a folder inside the cache")
    refs = {}
    for dirpath, _dirs, files in os.walk(refs_dir):
        for name in sorted(files):
            if name in _IGNORED:
                continue
            path = Path(dirpath, name)
            ref = path.relative_to(refs_dir).as_posix()
            refs[ref] = _read_ref(path, ref, root)
    return refs


def _read_ref(path: Path, ref: str, root: str) -> str:
    """The sha a ref file holds; its content is never echoed unless it is a sha."""
    try:
        sha = decode_utf8(read_regular_file(path, MAX_REF_BYTES, within=root), path).strip()
    except BadInput as err:
        raise _Skipped(_short(err, path, f"refs/{ref}")) from err
    if not SHA_RE.match(sha):
        raise _Skipped(f"ref {ref!r} does not hold a 40-hex commit sha")
    return sha


def _short(err: BadInput, path: Path, name: str) -> str:
    """The refusal with the path shown relative to the model folder (the entry already names the model)."""
    reason = getattr(err, "reason", None)
    return f"refused {name}: {reason}" if reason else str(err).replace(str(path), name)
