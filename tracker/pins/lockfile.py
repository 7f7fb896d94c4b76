"""The lock file: the model revisions a project runs, in TOML, read into `Pin`s and written back.

```toml
version = 1

[[model]]
repo = "org/name"
branch = "main"
revision = "40-hex commit sha"

[model.files]            # the files that decide behaviour, with their git blob ids
"config.json" = "..."
```
A model entry that cannot be used (an unknown key, a malformed sha) is a `BadEntry` naming it; the
other entries are still read. A file that is not TOML at all is a `BadInput` error, and so is one
hubwatch refuses to read (`tracker.formats.local_files`: not a regular file, over `MAX_LOCK_BYTES`, not UTF-8)
or TOML nested deeper than the parser can follow.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from storage.kinds import is_branch_name, is_repo_key
from tracker.errors import BadInput, RefusedFile
from tracker.formats.local_files import clipped, quoted, read_text_file, replace_file
from tracker.pins.cache import DEFAULT_BRANCH, SHA_RE, BadEntry, Pin

VERSION = 1
MAX_LOCK_BYTES = 4 * 1024 * 1024  # a model entry with its files is about 2 KB: room for some 2,000 models
MODEL_KEYS = ("repo", "branch", "revision", "files")
HEADER = (
    "# hubwatch lock file: the model revisions this project runs.\n"
    "# Check it: hubwatch outdated --lock FILE; move a pin after review: hubwatch lock --update REPO\n"
)


def read_lock(path: Path) -> tuple[list[Pin], list[BadEntry]]:
    """The pins of a lock file, and its entries that cannot be used."""
    text = read_text_file(path, MAX_LOCK_BYTES, what="the lock file")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise BadInput(f"{path} is not valid TOML: {err}") from err
    except RecursionError as err:  # tomllib parses nested arrays and inline tables recursively
        raise BadInput(f"{path} is not a lock file: its TOML is nested too deep") from err
    bad = [BadEntry(f"{path}", f"unknown key {quoted(key)} (known: version, model)") for key in data if key not in ("version", "model")]
    if data.get("version", VERSION) != VERSION:
        raise BadInput(f"{path}: lock file version {quoted(data['version'])} is not supported (this hubwatch reads {VERSION})")
    models = data.get("model", [])
    if not isinstance(models, list):
        raise BadInput(f"{path}: 'model' must be an array of tables ([[model]])")
    pins: list[Pin] = []
    seen: set[tuple[str, str]] = set()
    for number, raw in enumerate(models, start=1):
        pin = _pin(raw, number, bad)
        if pin is None:
            continue
        if (pin.repo_id, pin.branch) in seen:
            bad.append(BadEntry(pin.entry, f"{pin.repo_id}@{pin.branch} is pinned twice"))
            continue
        seen.add((pin.repo_id, pin.branch))
        pins.append(pin)
    return pins, bad


def _pin(raw: Any, number: int, bad: list[BadEntry]) -> Pin | None:
    """One [[model]] table as a Pin, or None with its problems added to `bad`."""
    if not isinstance(raw, dict):
        bad.append(BadEntry(f"model {number}", "not a table"))
        return None
    repo = raw.get("repo")
    entry = f"model {number} ({clipped(repo)})" if isinstance(repo, str) else f"model {number}"
    problems = [f"unknown key {quoted(key)} (known: {', '.join(MODEL_KEYS)})" for key in raw if key not in MODEL_KEYS]
    if not is_repo_key(repo):  # a model's org/name, or a dataset's datasets/org/name
        problems.append(f"repo {quoted(repo)} is not a Hub repo id (org/name, or datasets/org/name for a dataset)")
    revision = raw.get("revision")
    if not isinstance(revision, str) or not SHA_RE.match(revision):
        problems.append(f"revision {quoted(revision)} is not a 40-hex commit sha")
    branch = raw.get("branch", DEFAULT_BRANCH)
    if not is_branch_name(branch):
        problems.append(f"branch {quoted(branch)} is not a branch name")
    files = raw.get("files", {})
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        problems.append("files must be a table of path = \"blob id\"")
    if problems:
        bad.extend(BadEntry(entry, problem) for problem in problems)
        return None
    return Pin(repo, branch, revision, entry, files=dict(files))


def render_lock(pins: list[Pin]) -> str:
    """The lock file's text for `pins` (sorted by repo and branch)."""
    lines = [HEADER, f"version = {VERSION}\n"]
    for pin in sorted(pins, key=lambda p: (p.repo_id, p.branch)):
        lines += [
            "\n[[model]]",
            f"repo = {_string(pin.repo_id)}",
            f"branch = {_string(pin.branch)}",
            f"revision = {_string(pin.sha)}",
        ]
        if pin.files:
            lines.append("\n[model.files]")
            lines += [f"{_string(path)} = {_string(oid)}" for path, oid in sorted(pin.files.items())]
        lines.append("")
    return "\n".join(lines)


def check_lock_target(path: Path) -> None:
    """Raise BadInput when `path` cannot be where a lock file is written: a directory, or under something
    that is not one (checked before any work; `write_lock` refuses them too)."""
    if path.is_dir():
        raise RefusedFile(str(path), "a directory, not a file", "the lock file")
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        raise RefusedFile(str(path), f"{parent} is not a directory", "the lock file")


def write_lock(path: Path, pins: list[Pin]) -> None:
    """Write the lock file whole: a new temporary file beside it renamed over it, so it is never half
    written and never written through a symlink planted in its directory."""
    replace_file(path, render_lock(pins).encode("utf-8"), what="the lock file")


def _string(value: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's."""
    return json.dumps(value, ensure_ascii=False)
