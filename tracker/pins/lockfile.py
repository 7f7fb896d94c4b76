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
other entries are still read. A file that is not TOML at all is a `BadInput` error.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from storage.kinds import is_branch_name, is_repo_id
from tracker.errors import BadInput
from tracker.pins.cache import DEFAULT_BRANCH, SHA_RE, BadEntry, Pin

VERSION = 1
MODEL_KEYS = ("repo", "branch", "revision", "files")
HEADER = (
    "# hubwatch lock file: the model revisions this project runs.\n"
    "# Check it: hubwatch outdated --lock FILE; move a pin after review: hubwatch lock --update REPO\n"
)


def read_lock(path: Path) -> tuple[list[Pin], list[BadEntry]]:
    """The pins of a lock file, and its entries that cannot be used."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise BadInput(f"cannot read the lock file {path}: {err.strerror or err}") from err
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise BadInput(f"{path} is not valid TOML: {err}") from err
    bad = [BadEntry(f"{path}", f"unknown key {key!r} (known: version, model)") for key in data if key not in ("version", "model")]
    if data.get("version", VERSION) != VERSION:
        raise BadInput(f"{path}: lock file version {data['version']!r} is not supported (this hubwatch reads {VERSION})")
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
    entry = f"model {number} ({repo})" if isinstance(repo, str) else f"model {number}"
    problems = [f"unknown key {key!r} (known: {', '.join(MODEL_KEYS)})" for key in raw if key not in MODEL_KEYS]
    if not is_repo_id(repo):
        problems.append(f"repo {repo!r} is not a Hub repo id (org/name)")
    revision = raw.get("revision")
    if not isinstance(revision, str) or not SHA_RE.match(revision):
        problems.append(f"revision {revision!r} is not a 40-hex commit sha")
    branch = raw.get("branch", DEFAULT_BRANCH)
    if not is_branch_name(branch):
        problems.append(f"branch {branch!r} is not a branch name")
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


def write_lock(path: Path, pins: list[Pin]) -> None:
    """Write the lock file whole (a temporary file renamed over it: never half written)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(render_lock(pins), encoding="utf-8")
    tmp.replace(path)


def _string(value: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's."""
    return json.dumps(value, ensure_ascii=False)
