"""storage: migrations match the models, revisions are written whole or not at all, blobs dedupe."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from storage.db import alembic_config, create_db_engine, migrate, script_heads
from storage.errors import AmbiguousRevision, RevisionNotStored, WatchExists
from storage.event_log import NewEvent
from storage.front import Storage
from storage.history import NewChange, NewFile, NewRevision, NewTensor, NewWeightFile
from storage.models import load_all
from tests.support.databases import migrated_storage

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

T0 = datetime(2024, 7, 23, 15, 0, tzinfo=UTC)


@pytest.fixture
def store(database_url: str) -> Iterator[Storage]:
    with migrated_storage(database_url, T0) as storage:
        yield storage


def _revision(sha: str, blobs: dict[str, bytes] | None = None, event_id: str | None = None) -> NewRevision:
    blobs = blobs if blobs is not None else {"a" * 40: b'{"x": 1}'}
    return NewRevision(
        repo_id="org/model",
        sha=sha,
        parent_sha=None,
        branch="main",
        committed_at=T0,
        title="Upload",
        message="",
        authors=["someone"],
        is_baseline=True,
        files=[NewFile(path="config.json", oid=oid, size=len(data), kind="config", held=True) for oid, data in blobs.items()],
        blobs=blobs,
        weight_files=[NewWeightFile("f" * 64, (NewTensor("w", "BF16", (2, 3), 6),))],
        changes=[NewChange(kind="repo", path="", summary="baseline", severity="info")],
        events=[NewEvent(event_id=event_id or f"ev-{sha}", kind="revision.ingested", title="t", severity="info")],
    )


def test_migrations_match_the_models(store: Storage) -> None:
    """After migrating, autogenerate finds nothing to change: the models (every table) and migrations agree."""
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), load_all())
    assert diff == []


def test_sqlite_runs_in_wal_mode(tmp_path) -> None:
    """The default SQLite database uses write-ahead logging and enforces foreign keys."""
    engine = create_db_engine(f"sqlite:///{tmp_path / 'hubwatch.db'}")  # SQLite pragmas: never the PostgreSQL pass
    migrate(engine)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    engine.dispose()


def test_the_database_is_the_one_the_run_names(store: Storage) -> None:
    """With HUBWATCH_TEST_POSTGRES set (.ci/run's PostgreSQL pass) the tests' database is PostgreSQL, else SQLite."""
    expected = "postgresql" if os.environ.get("HUBWATCH_TEST_POSTGRES") else "sqlite"
    assert store.engine.dialect.name == expected


def test_migrate_is_idempotent(store: Storage) -> None:
    """Migrating an up-to-date database is a no-op."""
    migrate(store.engine)
    heads = set(ScriptDirectory.from_config(alembic_config(store.engine)).get_heads())
    assert script_heads() == heads  # the fast check before Alembic is loaded reads the same graph
    with store.engine.connect() as conn:
        assert {row[0] for row in conn.exec_driver_sql("SELECT version_num FROM alembic_version")} == heads


def test_save_revision_writes_everything_and_moves_the_watch(store: Storage) -> None:
    """A saved revision brings its files, blobs, manifest, changes and event, and moves the watch."""
    watch = store.watches.add_watch("org/model", "main", 900)
    store.history.save_revision(_revision("1" * 40), watch_id=watch.id)
    revision = store.history.find_revision("org/model", "1111")
    assert [f.path for f in store.history.revision_files(revision.id)] == ["config.json"]
    assert store.history.read_blobs(["a" * 40]) == {"a" * 40: b'{"x": 1}'}
    assert store.history.read_weight_files(["f" * 64])["f" * 64][0].parameters == 6
    assert [c.summary for c in store.history.changes_by_revision([revision.id])[revision.id]] == ["baseline"]
    assert store.watches.get_watch("org/model").last_sha == "1" * 40
    assert revision.committed_at == T0


def test_failed_write_leaves_nothing(store: Storage) -> None:
    """A revision whose write fails part-way (a duplicate event id) leaves no row of it behind."""
    watch = store.watches.add_watch("org/model", "main", 900)
    store.history.save_revision(_revision("1" * 40, event_id="same"), watch_id=watch.id)
    with pytest.raises(sa.exc.IntegrityError):
        store.history.save_revision(_revision("2" * 40, blobs={"b" * 40: b"new"}, event_id="same"), watch_id=watch.id)
    assert [r.sha for r in store.history.list_revisions("org/model")] == ["1" * 40]
    assert store.history.known_blobs(["b" * 40]) == set()
    assert store.watches.get_watch("org/model").last_sha == "1" * 40


def test_blobs_and_manifests_are_stored_once(store: Storage) -> None:
    """Two revisions sharing a blob and a weight file store each once."""
    store.history.save_revision(_revision("1" * 40))
    store.history.save_revision(_revision("2" * 40))
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM blob").scalar() == 1
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM weight_file").scalar() == 1
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM revision_file").scalar() == 2


@pytest.mark.parametrize(
    ("ref", "error"),
    [("12", RevisionNotStored), ("zzzz", RevisionNotStored), ("9999", RevisionNotStored), ("abcd", AmbiguousRevision)],
)
def test_find_revision_errors(store: Storage, ref: str, error: type[Exception]) -> None:
    """Short, non-hex, unknown and ambiguous revision references are refused with a clear error."""
    store.history.save_revision(_revision("abcd1" + "0" * 35))
    store.history.save_revision(_revision("abcd2" + "0" * 35))
    with pytest.raises(error):
        store.history.find_revision("org/model", ref)


def test_watch_add_twice_is_refused_and_remove_keeps_history(store: Storage) -> None:
    """Adding the same watch twice fails; removing it keeps the revisions."""
    watch = store.watches.add_watch("org/model", "main", 900)
    with pytest.raises(WatchExists):
        store.watches.add_watch("org/model", "main", 60)
    store.history.save_revision(_revision("1" * 40), watch_id=watch.id)
    assert store.watches.remove_watch("org/model") == 1
    assert store.watches.get_watch("org/model") is None
    assert len(store.history.list_revisions("org/model")) == 1


def test_config_watches_are_synced(store: Storage) -> None:
    """Watches from the config file are created once and follow interval changes."""
    store.watches.sync_config_watches([("org/a", "main", 60)])
    store.watches.sync_config_watches([("org/a", "main", 120), ("org/b", "dev", 60)])
    watches = {(w.repo_id, w.branch): w for w in store.watches.list_watches()}
    assert watches[("org/a", "main")].interval_s == 120
    assert watches[("org/b", "dev")].source == "config"


def test_nul_characters_are_scrubbed_on_every_backend(store: Storage) -> None:
    """A NUL byte in a commit title, a change summary or a JSON detail is stored as U+2400, not lost."""
    revision = _revision("3" * 40)
    hostile = NewRevision(**{**revision.__dict__, "title": "fix\x00it", "changes": [
        NewChange(kind="config", path="config.json", summary="a\x00b", severity="info", detail={"v": ["x\x00"]})]})
    store.history.save_revision(hostile)
    stored = store.history.find_revision("org/model", "3333")
    assert stored.title == "fix\u2400it"
    [change] = store.history.changes_by_revision([stored.id])[stored.id]
    assert change.summary == "a\u2400b" and change.detail == {"v": ["x\u2400"]}


def test_the_same_json_document_twice_in_one_transaction_is_stored_once(store: Storage) -> None:
    """Content-addressed JSON written twice before a flush (autoflush off) makes one blob row."""
    from storage.blobs import put_json, read_json

    with store.history.session() as s, s.no_autoflush:
        first, second = put_json(s, {"a": [1, 2]}), put_json(s, {"a": [1, 2]})
        s.commit()
    assert first == second
    with store.history.session() as s:
        assert read_json(s, [first]) == {first: {"a": [1, 2]}}
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM blob").scalar() == 1
