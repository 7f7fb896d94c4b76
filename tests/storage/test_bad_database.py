"""A database hubwatch cannot use (random bytes, a truncated file, a newer schema, a directory that is a
file) is reported in words a person can act on, by storage and by every command: `error: ...`, exit 4."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import sqlalchemy as sa

from storage.db import create_db_engine, migrate, script_heads
from storage.errors import StorageError
from tests.support.cli import run_cli, write_config


def _hubwatch_db(path: Path) -> Path:
    """A real, migrated hubwatch database in one file (the WAL checkpointed into it)."""
    engine = create_db_engine(f"sqlite:///{path}")
    migrate(engine)
    engine.dispose()
    return path


def random_bytes(folder: Path) -> tuple[Path, str]:
    path = folder / "random.db"
    path.write_bytes(os.urandom(64 * 1024))
    return path, f"{path} is not a hubwatch database (file is not a database)"


def truncated(folder: Path) -> tuple[Path, str]:
    path = _hubwatch_db(folder / "truncated.db")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path, f"{path} is not a hubwatch database (database disk image is malformed)"


def newer_schema(folder: Path) -> tuple[Path, str]:
    path = _hubwatch_db(folder / "newer.db")
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999' WHERE version_num = :head"), {"head": max(script_heads())})
    engine.dispose()
    return path, f"{path} was written by a newer hubwatch (schema 9999; this one knows up to {max(script_heads())}): upgrade hubwatch"


def under_a_file(folder: Path) -> tuple[Path, str]:
    blocker = folder / "data"
    blocker.write_text("not a directory")
    return blocker / "hubwatch" / "hubwatch.db", f"cannot create {blocker / 'hubwatch'}: {blocker} is a file"


BAD_DATABASES = {"random bytes": random_bytes, "truncated": truncated, "newer schema": newer_schema, "under a file": under_a_file}


@pytest.mark.parametrize("case", list(BAD_DATABASES))
def test_storage_names_what_is_wrong(tmp_path: Path, case: str) -> None:
    """Opening and migrating a bad database raises StorageError with the sentence a person acts on."""
    path, message = BAD_DATABASES[case](tmp_path)
    with pytest.raises(StorageError) as caught:
        migrate(create_db_engine(f"sqlite:///{path}"))
    assert str(caught.value) == message


def test_newer_schema_is_left_untouched(tmp_path: Path) -> None:
    """A database from a newer hubwatch is refused before any migration runs: its version row stays."""
    path, _ = newer_schema(tmp_path)
    with pytest.raises(StorageError):
        migrate(create_db_engine(f"sqlite:///{path}"))
    with sa.create_engine(f"sqlite:///{path}").connect() as conn:
        assert "9999" in {row[0] for row in conn.execute(sa.text("SELECT version_num FROM alembic_version"))}


def test_an_empty_file_is_a_new_database(tmp_path: Path) -> None:
    """An empty file is not corrupt: it is migrated like a missing one."""
    path = tmp_path / "empty.db"
    path.touch()
    migrate(create_db_engine(f"sqlite:///{path}"))
    assert path.stat().st_size > 0


@pytest.mark.parametrize("case", list(BAD_DATABASES))
@pytest.mark.parametrize("command", [["watch", "list"], ["history", "org/model"], ["run"]])
def test_every_command_reports_a_bad_database(tmp_path: Path, case: str, command: list[str]) -> None:
    """`watch list`, `history` and the daemon print `error: <the reason>` and exit 4, without a traceback."""
    path, message = BAD_DATABASES[case](tmp_path)
    config = write_config(tmp_path / "hubwatch.toml", "http://127.0.0.1:9", path, extra="\n[server]\nport = 0\n")
    result = run_cli(*command, config=config, timeout=60)
    assert result.returncode == 4, result.stderr[-2000:]
    assert f"error: {message}" in result.stderr
    assert "Traceback" not in result.stderr


def _drop_table(engine: sa.Engine, table: str) -> None:
    """Drop a table by hand, as an operator might (PostgreSQL: with the foreign keys that name it)."""
    cascade = " CASCADE" if engine.dialect.name == "postgresql" else ""
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP TABLE {table}{cascade}")


@pytest.mark.postgres
def test_a_table_dropped_by_hand_is_named(database_url: str) -> None:
    """A query on a table the database lacks raises StorageError naming it (SQLite and PostgreSQL), not the
    driver's error; a database missing none reads as before."""
    from storage.front import Storage

    engine = create_db_engine(database_url)
    try:
        migrate(engine)
        store = Storage(engine)
        assert store.history.list_revisions("org/model") == []
        _drop_table(engine, "revision")
        migrate(engine)  # the version row still says the newest schema: nothing to upgrade
        with pytest.raises(StorageError, match=r"^the database .+ is missing table 'revision': restore it") as caught:
            store.history.list_revisions("org/model")
        assert "revision" in str(caught.value.__cause__)  # the driver's own error, kept as the cause
        assert store.watches.list_watches() == []  # the other tables are still read
    finally:
        engine.dispose()


@pytest.mark.parametrize("command", [["history", "org/model"], ["show", "org/model", "abcdef1"]])
def test_history_and_show_name_a_dropped_table(tmp_path: Path, command: list[str]) -> None:
    """`history` and `show` on a SQLite file whose `revision` table was dropped by hand: one line naming the
    table, exit 4, no traceback."""
    import sqlite3

    path = _hubwatch_db(tmp_path / "dropped.db")
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE revision")
    conn.close()
    config = write_config(tmp_path / "hubwatch.toml", "http://127.0.0.1:9", path)
    result = run_cli(*command, config=config, timeout=60)
    assert result.returncode == 4, result.stderr[-2000:]
    assert result.stderr.splitlines() == [
        f"error: the database {path} is missing table 'revision': restore it from a backup, "
        "or point [storage] url at another database"
    ]
