"""The model revisions a user has: from the local Hugging Face cache or a lock file, as `Pin`s.

Input that cannot be used is a `BadEntry` naming the entry (a cache folder, a lock file's model) with
what is wrong; the other entries are still read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from storage.kinds import is_branch_name, is_repo_id
from tracker.formats.local_files import clipped, quoted

SHA_RE = re.compile(r"^[0-9a-f]{40}$")
DEFAULT_BRANCH = "main"


@dataclass(frozen=True)
class Pin:
    """A revision a user runs: `sha` of `repo_id`, followed on `branch`.

    `detached`: a cached snapshot no ref names (downloaded by sha), compared with the default branch.
    `files`: path -> blob id of the files that decide behaviour, as the lock file recorded them."""

    repo_id: str
    branch: str
    sha: str
    entry: str
    detached: bool = False
    files: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BadEntry:
    """An input entry that cannot be checked, and why."""

    entry: str
    message: str


def pins_from_cache(revisions: list, problems: list[tuple[str, str]]) -> tuple[list[Pin], list[BadEntry]]:
    """One pin per (repo, ref) of the cache's snapshots (`tracker.pins.cache_scan.CachedRevision`s). A snapshot no
    ref names is a detached pin, kept only for repos with no ref at all (an older copy otherwise)."""
    pins: list[Pin] = []
    bad = [BadEntry(f"cache: {name}", message) for name, message in problems]
    with_refs = {r.repo_id for r in revisions if r.refs}
    for revision in revisions:
        entry = f"cache: {revision.repo_id}"
        if not is_repo_id(revision.repo_id):
            bad.append(BadEntry(entry, "the folder name is not a Hub repo id"))
            continue
        if not SHA_RE.match(revision.sha):
            bad.append(BadEntry(entry, f"snapshot {quoted(revision.sha)} is not a 40-hex commit sha"))
            continue
        if not revision.refs:
            if revision.repo_id not in with_refs:
                pins.append(Pin(revision.repo_id, DEFAULT_BRANCH, revision.sha, f"{entry}@{revision.sha[:12]}", True))
            continue
        for ref in revision.refs:
            if not is_branch_name(ref):
                bad.append(BadEntry(f"{entry}@{clipped(ref)}", f"ref {quoted(ref)} is not a branch name"))
                continue
            pins.append(Pin(revision.repo_id, ref, revision.sha, f"{entry}@{ref}"))
    return pins, bad
