"""The database a test runs on: a SQLite file, or a fresh PostgreSQL database when HUBWATCH_TEST_POSTGRES
names a server (.ci/run's second pass)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import datetime

    from storage.front import Storage

POSTGRES_ENV = "HUBWATCH_TEST_POSTGRES"


def postgres_admin_url() -> str | None:
    """The PostgreSQL server the tests run on (an admin URL), or None for SQLite files."""
    return os.environ.get(POSTGRES_ENV) or None


def database_url_for(db: Path | str) -> str:
    """A database URL as is, or a path made into a SQLite URL."""
    return db if isinstance(db, str) and "://" in db else f"sqlite:///{db}"


@contextmanager
def fresh_database(path: Path, template: str | None = None, *, empty: bool = False) -> Iterator[str]:
    """The URL of a database no test has written to: the SQLite file `path` (not yet created: the code under test
    creates and migrates it); on PostgreSQL a copy of `template` (a database no one is connected to) when given,
    a new database with no schema at all when `empty`, else one at the newest schema with no rows (see `_Pool`).
    Dropped, or emptied for the next test, on exit."""
    admin_url = postgres_admin_url()
    if not admin_url:
        yield database_url_for(path)
        return
    if template is None and not empty:
        with _pool(admin_url).database() as url:
            yield url
        return
    with postgres_database(admin_url, template=template) as url:
        yield url


class _Pool:
    """A test process's PostgreSQL databases at the newest schema, reused: creating a database (copying the
    server's catalogue) and migrating it cost the server and the test about a second a test on two cores, emptying
    one (TRUNCATE ... RESTART IDENTITY, and every other session on it ended) a few hundredths.

    The first is migrated once by `storage.db.migrate` and kept as the template of the others. A database goes
    back to the pool only when its schema (tables, columns, indexes, constraints, sequences, the Alembic version)
    is still the template's; a test that dropped a table or downgraded leaves it to be dropped. Every database of
    the pool is dropped when the process exits."""

    def __init__(self, admin_url: str) -> None:
        import atexit

        import sqlalchemy as sa

        self.admin_url = admin_url
        self.admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT", pool_pre_ping=True)
        self.free: list[str] = []
        self.made: set[str] = set()
        self.template = self._create()
        url = self._url(self.template)
        from storage.db import create_db_engine, migrate

        engine = create_db_engine(url)
        migrate(engine)
        with engine.connect() as conn:
            self.schema = _schema(conn)
            self.tables = [row[0] for row in conn.exec_driver_sql(
                "SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = current_schema() "
                "AND tablename <> 'alembic_version' ORDER BY tablename")]
        engine.dispose()
        atexit.register(self.close)

    def _create(self, template: str | None = None) -> str:
        import uuid

        name = f"hw_test_{uuid.uuid4().hex[:12]}"
        with self.admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        self.made.add(name)
        return name

    def _drop(self, name: str) -> None:
        with self.admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.made.discard(name)

    def _url(self, name: str) -> str:
        import sqlalchemy as sa

        return sa.engine.make_url(self.admin_url).set(database=name).render_as_string(hide_password=False)

    @contextmanager
    def database(self) -> Iterator[str]:
        name = self.free.pop() if self.free else self._create(self.template)
        try:
            yield self._url(name)
        finally:
            if self._emptied(name):
                self.free.append(name)
            else:
                self._drop(name)

    def _emptied(self, name: str) -> bool:
        """End every other session on `name` and empty its tables, if its schema is still the template's."""
        import sqlalchemy as sa

        with self.admin.connect() as conn:
            conn.exec_driver_sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,))
        engine = sa.create_engine(self._url(name), isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
        try:
            with engine.connect() as conn:
                if _schema(conn) != self.schema:
                    return False
                if self.tables:
                    conn.exec_driver_sql(f"TRUNCATE {', '.join(self.tables)} RESTART IDENTITY CASCADE")
                return True
        except sa.exc.DBAPIError:
            return False
        finally:
            engine.dispose()

    def close(self) -> None:
        import sqlalchemy as sa

        for name in sorted(self.made):
            try:
                self._drop(name)
            except sa.exc.SQLAlchemyError:  # the server may be gone at exit: its data directory goes with it
                break
        self.admin.dispose()


def _schema(conn: object) -> tuple:
    """What a migration or a test's DDL could change: every relation, column, constraint and the Alembic version."""
    rows = conn.exec_driver_sql(  # type: ignore[attr-defined]
        """SELECT 'r', c.relname, c.relkind::text, '' FROM pg_class c
             WHERE c.relnamespace = current_schema()::regnamespace
           UNION ALL SELECT 'a', c.relname, a.attname, format_type(a.atttypid, a.atttypmod) || a.attnotnull::text
             FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
             WHERE c.relnamespace = current_schema()::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
           UNION ALL SELECT 'c', conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
             WHERE connamespace = current_schema()::regnamespace
           UNION ALL SELECT 'i', indexrelid::regclass::text, '', pg_get_indexdef(indexrelid) FROM pg_index i
             JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relnamespace = current_schema()::regnamespace
           ORDER BY 1, 2, 3, 4""").all()
    version = conn.exec_driver_sql("SELECT version_num FROM alembic_version ORDER BY 1").all()  # type: ignore[attr-defined]
    return tuple(map(tuple, rows)), tuple(map(tuple, version))


_POOLS: dict[str, _Pool] = {}


def _pool(admin_url: str) -> _Pool:
    if admin_url not in _POOLS:
        _POOLS[admin_url] = _Pool(admin_url)
    return _POOLS[admin_url]


@contextmanager
def postgres_database(admin_url: str, template: str | None = None, prefix: str = "hw_test") -> Iterator[str]:
    """A new database on the server at `admin_url` (a copy of `template` when given), dropped on exit."""
    import uuid

    import sqlalchemy as sa

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT", pool_pre_ping=True)  # the server may restart
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
    try:
        yield sa.engine.make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@contextmanager
def migrated_storage(database_url: str, now: datetime) -> Iterator[Storage]:
    """The stores over a migrated database whose clock stands at `now`; the engine disposed after."""
    from storage.db import create_db_engine, migrate
    from storage.front import Storage

    engine = create_db_engine(premigrated(database_url))
    migrate(engine)
    try:
        yield Storage(engine, clock=lambda: now)
    finally:
        engine.dispose()


def copy_sqlite(source: Path, target: Path) -> Path:
    """A copy of the SQLite database `source` at `target` (its WAL included: SQLite's backup, not a file copy), for
    a test to write to while the original, built once, stays as it was."""
    import sqlite3

    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()
    return target


_MIGRATED: list[Path] = []  # this process's empty database at the newest schema, built on first use


def premigrated(database_url: str) -> str:
    """`database_url` as is, its SQLite file first made a copy of an empty database already at the newest schema
    (migrated once a process) when the file does not exist yet: a fixture whose store migrates anyway then finds
    nothing to do (a migration from nothing is ~90 DDL statements, 0.15 CPU-s and a few fsyncs). A PostgreSQL
    database, a file already there, or one whose folder does not exist yet is left to `migrate` as before."""
    if "://" in database_url and not database_url.startswith("sqlite:///"):
        return database_url
    target = Path(database_url.removeprefix("sqlite:///"))
    if target.exists() or not target.parent.is_dir():  # a file there, or a directory to create: as the test made it
        return database_url
    if not _MIGRATED:
        import tempfile

        from storage.db import create_db_engine, migrate

        template = Path(tempfile.mkdtemp(prefix="hubwatch-migrated-")) / "migrated.db"
        engine = create_db_engine(f"sqlite:///{template}")
        migrate(engine)
        engine.dispose()
        _MIGRATED.append(template)
    copy_sqlite(_MIGRATED[0], target)
    return database_url
