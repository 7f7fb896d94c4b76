"""A local Hugging Face cache laid out as huggingface_hub lays it out, for `outdated` and `lock` to read."""

from __future__ import annotations

from pathlib import Path


def cache_model(cache: Path, repo_id: str, sha: str, ref: str | None = "main") -> Path:
    """A model snapshot laid out as huggingface_hub's cache does (refs, snapshots, blobs); its folder."""
    folder = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = folder / "snapshots" / sha
    snapshot.mkdir(parents=True, exist_ok=True)
    (folder / "blobs").mkdir(exist_ok=True)
    (folder / "blobs" / f"blob-{sha[:8]}").write_text("{}", encoding="utf-8")
    (snapshot / "config.json").symlink_to(Path("..", "..", "blobs", f"blob-{sha[:8]}"))
    if ref is not None:
        (folder / "refs").mkdir(exist_ok=True)
        (folder / "refs" / ref).write_text(sha, encoding="utf-8")
    return folder
