"""Tokenizer behaviours kept in the history: a restart does not run an unchanged tokenizer again, and a
tokenizer that changed without changing any sample's ids says "checked, unchanged" (no change row)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.front import Storage
from tests.support.cli import cli_json, run_cli, write_config
from tests.support.replay import replay_server
from tracker.differs.tokenizer_behaviour import UNCHANGED_NOTE, BehaviourCache, behaviour_key, diff_behaviour
from tracker.pipeline.behaviour_store import FORMAT, BehaviourStore, store_key
from tracker.revision.stored import load_snapshot

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
TOKENIZER_COMMIT = "Update tokenizer files"  # padding/truncation dropped, added tokens listed: same ids


pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def database_url(module_database_url: str) -> str:
    """The module's tests read one polled history: polling MiniLM's 20 commits (its tokenizer runs) costs seconds."""
    return module_database_url


@pytest.fixture(scope="module")
def polled(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[Path]:
    """A config over MiniLM's history, polled once a module by `hubwatch poll` (read it only)."""
    with replay_server() as replay:
        config = write_config(tmp_path_factory.mktemp("polled") / "hubwatch.toml", replay.endpoint, database_url)
        assert run_cli("watch", "add", MINILM, "--backfill", "20", config=config).returncode == 0
        assert run_cli("poll", config=config).returncode == 0
        yield config


def test_stored_behaviours_mean_no_tokenizer_run_after_a_restart(polled: Path, database_url: str) -> None:
    """The poll (another process) stored both sides' behaviours; a fresh cache, as after a restart, is filled
    from the database and the diff runs no tokenizer."""
    history = cli_json("history", MINILM, config=polled)
    rev = next(r for r in history if r["title"] == TOKENIZER_COMMIT)
    store = Storage.open(database_url)
    try:
        new_rev = store.history.find_revision(MINILM, rev["sha"])
        old, new = load_snapshot(store, store.history.find_revision(MINILM, rev["parent_sha"])), load_snapshot(store, new_rev)
        keys = [behaviour_key(old), behaviour_key(new)]
        assert keys[0] != keys[1]
        rows = store.history.read_file_scans(store_key(k) for k in keys)  # type: ignore[arg-type]
        assert {row.format for row in rows.values()} == {FORMAT} and len(rows) == 2
        cache = BehaviourCache()
        assert BehaviourStore(store, cache).load(old, new) == 2
        assert diff_behaviour(old, new, cache) == []
        assert cache.runs == 0
    finally:
        store.engine.dispose()


def test_a_tokenizer_change_without_id_changes_says_checked_unchanged(polled: Path) -> None:
    """history, show and diff --json give the "checked, unchanged" value, no tokenizer_behaviour change row;
    revisions whose tokenizer did not change still say null."""
    history = cli_json("history", MINILM, config=polled)
    rev = next(r for r in history if r["title"] == TOKENIZER_COMMIT)
    value = rev["tokenizer_behaviour"]
    assert value["compared"] is True and value["changed"] is False and value["note"] == UNCHANGED_NOTE
    assert value["ids_changed"]["count"] == 0 and value["corpus"]["samples"] == 1000
    assert value["tokens"]["old"] == value["tokens"]["new"] > 0
    assert not any("tokenizer_behaviour" in (c["detail"] or {}) for c in rev["changes"])
    assert [r["title"] for r in history if r["tokenizer_behaviour"] is not None] == [TOKENIZER_COMMIT]
    assert cli_json("show", MINILM, rev["sha"], config=polled)["tokenizer_behaviour"] == value
    assert cli_json("diff", MINILM, rev["parent_sha"], rev["sha"], config=polled)["tokenizer_behaviour"] == value


def test_a_move_that_keeps_the_tokenizer_reads_no_behaviour(polled: Path, database_url: str) -> None:
    """Before diffing a revision whose tokenizer blobs are its parent's, the stored behaviour is not read (the
    differ runs nothing for it); one whose blobs moved loads both sides."""
    history = cli_json("history", MINILM, config=polled)
    store = Storage.open(database_url)
    try:
        pairs = [(load_snapshot(store, store.history.find_revision(MINILM, r["parent_sha"])),
                  load_snapshot(store, store.history.find_revision(MINILM, r["sha"])))
                 for r in history if r["parent_sha"]]
        same = next((old, new) for old, new in pairs if behaviour_key(old) is not None and behaviour_key(old) == behaviour_key(new))
        moved = next((old, new) for old, new in pairs if behaviour_key(old) != behaviour_key(new))
        cache = BehaviourCache()
        assert BehaviourStore(store, cache).load_for_diff(*same) == 0 and cache.get(behaviour_key(same[1])) is None
        assert BehaviourStore(store, cache).load_for_diff(*moved) == 2
        assert BehaviourStore(store, BehaviourCache()).load(*same) == 1  # it is stored: load alone would read it
    finally:
        store.engine.dispose()
