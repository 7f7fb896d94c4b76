"""Many copies of a real repo for benchmarks: the bundled Llama-3.1-8B-Instruct's head tree (its weight shards'
real safetensors headers, the pickled original checkpoint, tokenizer_config.json, chat_template.jinja) with the
bundled all-MiniLM-L6-v2's README.md and tokenizer.json, each copy two commits whose second is one kind of move.

Each copy's config.json names its repo and each copy's weight files have their own sha256 (same headers), so
every copy's files differ from the others' where a real repo's would (its config, weights, chat template and
tokenizer.json): a content seen by an earlier copy is not what makes a later copy cheap.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from functools import cache

from tracker.standins.replay.control import BUNDLED_ROOT
from tracker.standins.replay.history import BytesBlob, LfsBlob, ReplayCommit, RepoHistory, Tree, TreeEntry, load_repo

MOVES = ("config", "template")  # config: config.json rewritten; template: chat template and tokenizer changed
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


@cache
def _sources() -> tuple[Tree, dict[str, bytes]]:
    """The shared tree (every file but config.json, tokenizer.json and the template) and the real bytes the
    copies start from and move to."""
    llama, minilm = load_repo(BUNDLED_ROOT / LLAMA), load_repo(BUNDLED_ROOT / MINILM)
    llama_head = llama.trees[llama.commits[-1].sha]
    minilm_tree = {c.dirname: minilm.trees[c.sha] for c in minilm.commits}
    early = json.loads(llama.trees[llama.commits[1].sha]["tokenizer_config.json"].blob.read())["chat_template"]
    real = {
        "config": llama_head["config.json"].blob.read(),
        "template_before": early.encode(),  # the chat template as first uploaded
        "template_after": llama_head["chat_template.jinja"].blob.read(),  # as it is now
        "tokenizer_before": minilm_tree["0004-update-tokenizer-files"]["tokenizer.json"].blob.read(),
        "tokenizer_after": minilm_tree["0005-add-query-and-doc-special-tokens"]["tokenizer.json"].blob.read(),
    }
    shared = {p: e for p, e in llama_head.items() if p not in ("config.json", "chat_template.jinja")}
    shared["README.md"] = minilm_tree["0002-update-readme"]["README.md"]
    return shared, real


def realistic_history(repo_id: str, move: str, start: datetime) -> RepoHistory:
    """Two commits an hour apart: the realistic tree, then the `move` (one of MOVES) on top of it."""
    if move not in MOVES:
        raise ValueError(f"move must be one of {', '.join(MOVES)}, not {move!r}")
    shared, real = _sources()
    shared = {p: _own_lfs(e, repo_id) if isinstance(e.blob, LfsBlob) else e for p, e in shared.items()}
    config = json.loads(real["config"])
    first: dict[str, bytes] = {
        "config.json": _json({**config, "_name_or_path": repo_id}),
        "chat_template.jinja": real["template_before"] + _comment(repo_id),
        "tokenizer.json": _tokenizer(real["tokenizer_before"], repo_id),
    }
    second = dict(first)
    if move == "config":
        second["config.json"] = _json({**config, "_name_or_path": repo_id, "rope_theta": config["rope_theta"] * 2})
    else:
        second["chat_template.jinja"] = real["template_after"] + _comment(repo_id)
        second["tokenizer.json"] = _tokenizer(real["tokenizer_after"], repo_id)
    commits: list[ReplayCommit] = []
    trees: dict[str, Tree] = {}
    for index, (files, touched) in enumerate([(first, set(shared) | set(first)), (second, _changed(first, second))]):
        dirname = f"{index + 1:04d}-{'upload' if index == 0 else move}"
        sha = hashlib.sha1(f"{repo_id}\n{dirname}".encode()).hexdigest()
        commits.append(ReplayCommit(sha=sha, title=f"{'upload' if index == 0 else 'update ' + move}",
                                    message="", authors=("synthetic",), date=start + timedelta(hours=index),
                                    dirname=dirname, parent=commits[-1].sha if commits else None, index=index,
                                    touched=frozenset(touched)))
        trees[sha] = {**shared, **{p: TreeEntry(BytesBlob(data)) for p, data in files.items()}}
    return RepoHistory({"id": repo_id}, commits, trees)


def _own_lfs(entry: TreeEntry, repo_id: str) -> TreeEntry:
    """The LFS file with the same bytes served but a sha256 of this copy's own (its content id)."""
    blob = entry.blob
    assert isinstance(blob, LfsBlob)
    sha256 = hashlib.sha256(f"{repo_id}\n{blob.lfs_sha256}".encode()).hexdigest()
    own = LfsBlob(blob.size, blob.prefix, sha256=sha256, source=blob.source, suffix=blob.suffix)
    return TreeEntry(own, entry.missing, entry.safetensors)


def _json(value: dict[str, object]) -> bytes:
    return json.dumps(value, indent=2).encode() + b"\n"


def _comment(repo_id: str) -> bytes:
    return f"\n{{#- {repo_id} -#}}\n".encode()


def _tokenizer(data: bytes, repo_id: str) -> bytes:
    """The real tokenizer.json with one added token naming the repo (each copy's tokenizer is its own)."""
    doc = json.loads(data)
    added = doc["added_tokens"]
    added.append({**added[-1], "id": len(doc["model"]["vocab"]) + len(added), "content": f"<|{repo_id}|>"})
    return json.dumps(doc, ensure_ascii=False).encode()


def _changed(before: dict[str, bytes], after: dict[str, bytes]) -> set[str]:
    return {p for p in after if before.get(p) != after[p]}
