"""Engines and migrations: SQLite in WAL mode by default, PostgreSQL through the same URL setting."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from storage.errors import StorageError

if TYPE_CHECKING:
    from alembic.config import Config as AlembicConfig

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# `revision = '0004'` and `down_revision = '0002'` (or a tuple of ids, for a merge) in a migration script.
_REVISION_LINE = re.compile(r"^(revision|down_revision)\s*(?::[^=\n]*)?=\s*(.+)$", re.MULTILINE)
_QUOTED = re.compile(r"['\"]([^'\"]+)['\"]")


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
    from alembic.config import Config as AlembicConfig

    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = engine
    return cfg


def migrate(engine: sa.Engine) -> None:
    """Bring the schema to the newest migrations (safe to call at every start). "heads": feature
    branches of the migration graph (outbox, advisories) may be applied side by side.

    A database already at the heads costs one query: Alembic (0.6 s to import) is loaded only to upgrade."""
    if applied_revisions(engine) == script_heads():
        return
    from alembic import command

    try:
        command.upgrade(alembic_config(engine), "heads")
    except sa.exc.OperationalError as err:
        raise StorageError(f"cannot migrate {_redact(str(engine.url))}: {err.orig}") from err


def script_heads() -> set[str]:
    """The newest revision of each branch of the migration scripts, read from their source."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
        for key, value in _REVISION_LINE.findall(path.read_text(encoding="utf-8")):
            (revisions if key == "revision" else parents).update(_QUOTED.findall(value))
    return revisions - parents


def applied_revisions(engine: sa.Engine) -> set[str] | None:
    """The revisions the database says it is at; None when it has no version table yet (or cannot say)."""
    try:
        with engine.connect() as conn:
            return {row[0] for row in conn.execute(sa.text("SELECT version_num FROM alembic_version"))}
    except sa.exc.DBAPIError:
        return None


def _redact(url: str) -> str:
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return "<unparseable URL>"
