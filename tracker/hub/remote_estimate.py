"""What the estimator needs of a Hub repo that is not watched: its config.json and its weight headers at one
revision, read through the Hub client (the headers by HTTP Range, never the weights), nothing stored.

`hubwatch estimate ORG/NAME[@REV]` calls `load_unwatched`; so can any command that wants the same inputs for a
repo hubwatch does not follow (a cost, a verifier).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tracker.errors import HubwatchError

if TYPE_CHECKING:
    from tracker.hub.client import HubClient
    from tracker.revision.snapshot import FileEntry

SHA_RE = re.compile(r"^[0-9a-f]{40}$")
INDEX = "model.safetensors.index.json"
MAX_CONFIG_BYTES = 4 * 2**20  # a config.json past this is not a config
MAX_INDEX_BYTES = 64 * 2**20


class BadRevisionArg(HubwatchError):
    """REPO@REV names no usable revision (an abbreviated sha, an empty name)."""


@dataclass
class UnwatchedRevision:
    """One revision of a repo read from the Hub: the commit, config.json (or why not), the tensors of the weight
    headers read (name -> (dtype, shape)), which files they came from, and what could not be read."""

    repo_id: str
    sha: str
    ref: str
    config: dict[str, Any] | None = None
    config_error: str | None = None
    manifest: dict[str, tuple[str, tuple[int, ...]]] | None = None
    weight_files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def source(self) -> str:
        read = [what for what, present in (("config.json", self.config is not None),
                                            ("weight headers", self.manifest is not None)) if present]
        return " and ".join(read) + " read from the Hub" if read else "nothing readable on the Hub"


def split_target(target: str) -> tuple[str, str | None]:
    """``org/name@rev`` -> (``org/name``, ``rev``); no ``@``: (target, None)."""
    repo, sep, rev = target.partition("@")
    if sep and not rev:
        raise BadRevisionArg(f"{target}: give a branch name or a 40-hex commit sha after @")
    return repo, rev or None


def load_unwatched(hub: HubClient, repo_id: str, rev: str | None = None) -> UnwatchedRevision:
    """config.json and the weight headers of ``repo_id`` at ``rev`` (a 40-hex sha, or a branch: its head now;
    default main). Hub errors are hubwatch's (RepoGone and RepoGated exit 3, HubUnavailable 1)."""
    ref = rev or "main"
    sha = resolve_sha(hub, repo_id, ref)
    files = {f.path: f for f in hub.list_files(repo_id, sha)}
    out = UnwatchedRevision(repo_id, sha, ref)
    _read_config(hub, out, files)
    _read_weights(hub, out, files)
    return out


def resolve_sha(hub: HubClient, repo_id: str, ref: str) -> str:
    """The commit ``ref`` names: a 40-hex sha as it is, a branch its head now (one request); an abbreviated sha is
    refused rather than guessed."""
    if SHA_RE.match(ref):
        return ref
    if re.fullmatch(r"[0-9a-fA-F]{7,39}", ref):
        raise BadRevisionArg(f"{repo_id}@{ref}: give the full 40-hex commit sha or a branch name")
    return hub.head(repo_id, ref).sha


def _read_config(hub: HubClient, out: UnwatchedRevision, files: dict[str, FileEntry]) -> None:
    from tracker.hub.client import MissingFile

    entry = files.get("config.json")
    if entry is None:
        out.config_error = "the repo has no config.json"
        return
    if entry.size > MAX_CONFIG_BYTES:
        out.config_error = f"config.json is {entry.size:,} bytes, past the {MAX_CONFIG_BYTES:,} read"
        return
    try:
        data = json.loads(hub.download(out.repo_id, out.sha, "config.json", max_bytes=entry.size))
    except MissingFile as err:
        out.config_error = str(err)
        return
    except (UnicodeDecodeError, ValueError) as err:
        out.config_error = f"config.json is not JSON: {err}"
        return
    if not isinstance(data, dict):
        out.config_error = "config.json is not a JSON object"
        return
    out.config = data


def weight_files(files: dict[str, FileEntry], index: dict[str, Any] | None) -> list[str]:
    """The safetensors files that make up the model: the shards the index names, else model.safetensors, else
    every safetensors file at the top of the repo (a repo shipping one model in several formats is read once)."""
    if index is not None:
        shards = sorted({s for s in (index.get("weight_map") or {}).values() if isinstance(s, str)})
        return [s for s in shards if s in files]
    if "model.safetensors" in files:
        return ["model.safetensors"]
    return sorted(p for p in files if p.endswith(".safetensors") and "/" not in p)


def _read_weights(hub: HubClient, out: UnwatchedRevision, files: dict[str, FileEntry]) -> None:
    from tracker.hub.client import MissingFile

    index = None
    if INDEX in files and files[INDEX].size <= MAX_INDEX_BYTES:
        try:
            loaded = json.loads(hub.download(out.repo_id, out.sha, INDEX, max_bytes=files[INDEX].size))
            index = loaded if isinstance(loaded, dict) else None
        except (MissingFile, UnicodeDecodeError, ValueError) as err:
            out.notes.append(f"{INDEX} could not be read ({err}): the safetensors files are read as found")
        if index is not None:
            missing = sorted({s for s in (index.get("weight_map") or {}).values() if isinstance(s, str)} - set(files))
            if missing:
                out.notes.append(f"{INDEX} names shards the repo does not have: {', '.join(missing)}")
    chosen = weight_files(files, index)
    if not chosen:
        out.notes.append("no safetensors weights: the figures come from config.json alone")
        return
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {}
    for path in chosen:
        manifest = hub.safetensors_manifest(out.repo_id, out.sha, path)
        if manifest.error:
            out.notes.append(f"{path}: header not readable ({manifest.error})")
            continue
        tensors.update({t.name: (t.dtype, t.shape) for t in manifest.tensors})
        out.weight_files.append(path)
    out.manifest = tensors or None
