"""`hubwatch estimate`: the estimator on a config file, or on a stored revision of a watched repo."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from estimator import Estimate, EstimateError, estimate
from tracker.app import App
from tracker.errors import HubwatchError, UnknownRevision
from tracker.estimate_change import manifest_of
from tracker.snapshot_io import load_snapshot


class EstimateFailed(HubwatchError):
    """The estimator refused the input (the message names the key)."""


def _read_json(path: str, what: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise click.BadParameter(f"{path} is not readable JSON: {err}", param_hint=what) from err


def read_manifest(path: str) -> dict[str, tuple[str, tuple[int, ...]]]:
    """A safetensors header dumped as JSON ({name: {dtype, shape, ...}}, `__metadata__` ignored), or
    several of them in a list (the shards of one checkpoint)."""
    data = _read_json(path, "--manifest")
    headers = data if isinstance(data, list) else [data]
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    for header in headers:
        if not isinstance(header, dict):
            raise click.BadParameter(f"{path}: expected a safetensors header object", param_hint="--manifest")
        for name, info in header.items():
            if name == "__metadata__":
                continue
            try:
                out[name] = (str(info["dtype"]), tuple(int(d) for d in info["shape"]))
            except (TypeError, KeyError, ValueError) as err:
                raise click.BadParameter(
                    f"{path}: tensor {name!r} needs a dtype and an integer shape", param_hint="--manifest"
                ) from err
    return out


def estimate_file(config_path: str, manifest_path: str | None, seq_len_cap: int) -> Estimate:
    config = _read_json(config_path, "--config-file")
    if not isinstance(config, dict):
        raise click.BadParameter(f"{config_path}: expected a JSON object", param_hint="--config-file")
    manifest = read_manifest(manifest_path) if manifest_path else None
    try:
        return estimate(config, manifest, seq_len_cap=seq_len_cap)
    except EstimateError as err:
        raise EstimateFailed(f"{config_path}: {err}") from err


def estimate_revision(app: App, repo_id: str, ref: str | None, seq_len_cap: int) -> tuple[Estimate, dict[str, Any]]:
    """Estimate a stored revision from its stored config.json and weight headers."""
    if ref is None:
        revisions = app.store.list_revisions(repo_id, limit=1)
        if not revisions:
            raise UnknownRevision(f"no stored revision of {repo_id} (watch it and run: hubwatch poll {repo_id})")
        revision = revisions[0]
    else:
        from storage.errors import AmbiguousRevision, RevisionNotStored

        try:
            revision = app.store.find_revision(repo_id, ref)
        except (RevisionNotStored, AmbiguousRevision) as err:
            raise UnknownRevision(str(err)) from err
    snapshot = load_snapshot(app.store, revision)
    config, error = snapshot.read_json("config.json")
    manifest = manifest_of(snapshot)
    if config is None and manifest is None:
        raise EstimateFailed(f"{repo_id} at {revision.sha[:12]}: nothing to estimate from ({error})")
    try:
        result = estimate(config if isinstance(config, dict) else {}, manifest, seq_len_cap=seq_len_cap)
    except EstimateError as err:
        raise EstimateFailed(f"{repo_id} at {revision.sha[:12]}: {err}") from err
    source = "config.json and weight headers" if manifest and config else ("weight headers" if manifest else "config.json")
    return result, {"sha": revision.sha, "source": source}
