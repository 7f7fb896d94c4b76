"""Engines and migrations: SQLite in WAL mode by default, PostgreSQL through the same URL setting."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config as AlembicConfig

from storage.errors import StorageError

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def create_db_engine(url: str) -> sa.Engine:
    """An engine for `url`; SQLite files get WAL, foreign keys and a busy timeout."""
    try:
        engine = sa.create_engine(url, future=True, pool_pre_ping=True)
    except (sa.exc.ArgumentError, ImportError) as err:
        raise StorageError(f"cannot use database URL {_redact(url)}: {err}") from err
    if engine.dialect.name == "sqlite":
        database = engine.url.database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        sa.event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: object, _record: object) -> None:
    cursor = dbapi_connection.cursor()  # type: ignore[attr-defined]
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def alembic_config(engine: sa.Engine) -> AlembicConfig:
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = engine
    return cfg


def migrate(engine: sa.Engine) -> None:
    """Bring the schema to the newest migrations (safe to call at every start). "heads": feature
    branches of the migration graph (outbox, advisories) may be applied side by side."""
    try:
        command.upgrade(alembic_config(engine), "heads")
    except sa.exc.OperationalError as err:
        raise StorageError(f"cannot migrate {_redact(str(engine.url))}: {err.orig}") from err


def _redact(url: str) -> str:
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return "<unparseable URL>"
