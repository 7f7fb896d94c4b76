"""The databases the tests run on (tests/support/databases.py): on PostgreSQL a database handed to one test after
another holds nothing of the one before, and one whose schema a test changed is never handed out again."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.support.databases import fresh_database, migrated_storage

pytestmark = pytest.mark.postgres
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_database_handed_out_again_has_no_rows_and_its_ids_start_over(database_url: str, tmp_path: Path) -> None:
    """Rows written in one use are gone in the next, the serial ids start at 1 again, and no session of the
    first use is left open on it."""
    del database_url  # taken so that this module is part of the PostgreSQL pass
    seen, lingering = [], []
    for n in range(2):
        with fresh_database(tmp_path / f"db{n}.db") as url, migrated_storage(url, T0) as store:
            assert store.watches.list_watches() == []
            seen.append((url, store.watches.add_watch(f"org/model{n}", "main", 900).id))
            if store.engine.dialect.name == "postgresql":
                lingering.append(store.engine.connect())  # left open: the database must still be emptied
                lingering[-1].exec_driver_sql("SELECT count(*) FROM watch")  # its open transaction locks the table
    assert [watch_id for _, watch_id in seen] == [1, 1]
    if lingering:  # PostgreSQL: the same database both times (the pool's), not a new one
        assert seen[0][0] == seen[1][0]


def test_a_database_whose_schema_a_test_changed_is_not_handed_out_again(database_url: str, tmp_path: Path) -> None:
    """A table dropped by hand in one use: the next use gets every table (a fresh copy of the template)."""
    del database_url
    for n in range(2):
        with fresh_database(tmp_path / f"db{n}.db") as url, migrated_storage(url, T0) as store:
            assert "watch" in sa.inspect(store.engine).get_table_names()
            cascade = " CASCADE" if store.engine.dialect.name == "postgresql" else ""
            with store.engine.begin() as conn:
                conn.exec_driver_sql(f"DROP TABLE watch{cascade}")


def test_an_empty_database_has_no_schema(empty_database_url: str) -> None:
    """`empty_database_url` is for migrating from nothing: no table at all, not even Alembic's."""
    engine = sa.create_engine(empty_database_url)
    try:
        assert sa.inspect(engine).get_table_names() == []
    finally:
        engine.dispose()
