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
def fresh_database(path: Path, template: str | None = None) -> Iterator[str]:
    """The URL of a new database: the SQLite file `path`, or on PostgreSQL a new database (a copy of
    `template`, a database no one is connected to, when given) dropped on exit."""
    admin_url = postgres_admin_url()
    if not admin_url:
        yield database_url_for(path)
        return
    with postgres_database(admin_url, template=template) as url:
        yield url


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
