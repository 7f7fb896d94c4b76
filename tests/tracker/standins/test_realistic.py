"""The benchmark's realistic copies (tracker/standins/replay/realistic.py): served as claimed, each its own."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tracker.hub.client import HubClient
from tracker.standins.replay.history import LfsBlob
from tracker.standins.replay.realistic import MOVES, realistic_history

START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("move", MOVES)
def test_the_replay_serves_the_tree_it_claims(replay, move: str) -> None:
    """Through the real client: the listed files, oids and LFS sha256s are the history's, a small file's bytes
    hash to its listed oid, and the second commit moves exactly the files the move names."""
    history = realistic_history("bench/copy-0", move, START)
    replay.add_repo(history)
    hub = HubClient(replay.endpoint)
    first, second = history.commits
    listed = {f.path: f for f in hub.list_files("bench/copy-0", first.sha)}
    tree = history.trees[first.sha]
    assert set(listed) == set(tree) and {"config.json", "tokenizer.json", "chat_template.jinja", "README.md"} <= set(listed)
    for path, entry in tree.items():
        assert listed[path].oid == entry.blob.oid
        if isinstance(entry.blob, LfsBlob):
            assert listed[path].lfs_sha256 == entry.blob.lfs_sha256
    assert hub.download("bench/copy-0", first.sha, "config.json") == tree["config.json"].blob.read()
    assert json.loads(tree["config.json"].blob.read())["_name_or_path"] == "bench/copy-0"
    assert any(p.endswith(".safetensors") for p in listed) and len(tree["tokenizer.json"].blob.read()) > 500_000
    moved = {p for p in tree if tree[p].blob.oid != history.trees[second.sha][p].blob.oid}
    assert moved == ({"config.json"} if move == "config" else {"chat_template.jinja", "tokenizer.json"})
    assert second.touched == moved and second.parent == first.sha


def test_copies_differ_from_each_other() -> None:
    """Two copies share no config.json, tokenizer.json, template or weight content id, and no commit sha."""
    a, b = (realistic_history(f"bench/copy-{i}", "config", START) for i in range(2))
    tree_a, tree_b = a.trees[a.commits[0].sha], b.trees[b.commits[0].sha]
    for path in ("config.json", "tokenizer.json", "chat_template.jinja"):
        assert tree_a[path].blob.oid != tree_b[path].blob.oid, path
    weights = [p for p, e in tree_a.items() if isinstance(e.blob, LfsBlob)]
    assert weights and all(tree_a[p].blob.lfs_sha256 != tree_b[p].blob.lfs_sha256 for p in weights)
    assert {c.sha for c in a.commits}.isdisjoint(c.sha for c in b.commits)


def test_an_unknown_move_is_refused() -> None:
    """A move that is not one of MOVES is a ValueError naming them."""
    with pytest.raises(ValueError, match="config, template"):
        realistic_history("bench/copy-0", "weights", START)
