"""Synthetic replay histories, written in tracker/standins/replay/FORMAT.md's format: for the multi-process scenarios
here and the benchmarks."""

from __future__ import annotations

import json
from pathlib import Path

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "vocab_size": 128256,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.43.0.dev0",
}


def _write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2) + "\n", encoding="utf-8")


def write_repo(root: Path, repo_id: str, commits: list[dict[str, object]]) -> None:
    """commits: [{"title": ..., "files": {path: json-or-text}, "lfs": {...}, "delete": [path]}], oldest first."""
    base = root / repo_id
    names = []
    for i, commit in enumerate(commits, start=1):
        name = f"{i:04d}-commit"
        names.append(name)
        meta = {
            "title": commit.get("title", f"commit {i}"),
            "message": "",
            "authors": ["bench"],
            "date": f"2025-01-{i:02d}T10:00:00Z" if i < 29 else f"2025-02-{i - 28:02d}T10:00:00Z",
        }
        if commit.get("lfs"):
            meta["lfs"] = commit["lfs"]
        if commit.get("delete"):  # paths this commit removes (FORMAT.md)
            meta["delete"] = commit["delete"]
        _write(base / "commits" / name / "commit.json", meta)
        for path, data in dict(commit.get("files", {})).items():  # type: ignore[arg-type]
            _write(base / "commits" / name / "files" / path, data)
    _write(base / "repo.json", {"id": repo_id, "private": False, "gated": False, "default_branch": "main",
                                "source": "benchmark", "commits": names})
