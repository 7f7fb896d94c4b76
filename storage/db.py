"""Engines and migrations: SQLite in WAL mode by default, PostgreSQL through the same URL setting."""

from __future__ import annotations

import re
import threading
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
        # A server connection can die between uses (pre-ping finds out); a SQLite file cannot: no ping there.
        engine = sa.create_engine(url, future=True, pool_pre_ping=not url.startswith("sqlite"))
    except (sa.exc.ArgumentError, ImportError) as err:
        raise StorageError(f"cannot use database URL {_redact(url)}: {err}") from err
    if engine.dialect.name == "sqlite":
        database = engine.url.database
        if database and database != ":memory:":
            _make_directory(Path(database).parent)
        sa.event.listen(engine, "connect", _sqlite_pragmas)
        WriterTurns().attach(engine)
    sa.event.listen(engine, "handle_error", _missing_table)
    return engine


def _make_directory(directory: Path) -> None:
    """The SQLite file's directory, created if missing; StorageError says what is in the way."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        blocker = next((p for p in (directory, *directory.parents) if p.exists() and not p.is_dir()), None)
        reason = f"{blocker} is a file" if blocker is not None else (err.strerror or str(err)).lower()
        raise StorageError(f"cannot create {directory}: {reason}") from err


# What SQLite and PostgreSQL say of a table that is not there ("main." and a schema name are dropped).
_NO_SUCH_TABLE = re.compile(r'no such table: (?:\w+\.)?(\w+)|relation "(?:\w+\.)?(\w+)" does not exist')


def _missing_table(context: sa.engine.ExceptionContext) -> None:
    """A statement on a table the database lacks (dropped by hand, a partial restore) raises StorageError
    naming the table instead of the driver's error: every command reports it as a database it cannot use
    (exit 4), and the daemon as a failing database, never with a traceback."""
    if context.is_pre_ping or context.engine is None:
        return
    found = _NO_SUCH_TABLE.search(str(context.original_exception))
    if found is None:
        return
    table = found.group(1) or found.group(2)
    raise StorageError(  # SQLAlchemy chains the driver's error to it as its cause
        f"the database {_where(context.engine)} is missing table '{table}': restore it from a backup, "
        "or point [storage] url at another database"
    )


def _sqlite_pragmas(dbapi_connection: object, _record: object) -> None:
    cursor = dbapi_connection.cursor()  # type: ignore[attr-defined]
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


# The statements before which the sqlite3 module opens a write transaction (it BEGINs before no others).
_SQLITE_WRITE = re.compile(r"\s*(INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)
_TURN_KEY = "hubwatch_writer_turn"
BUSY_TIMEOUT_S = 30.0  # PRAGMA busy_timeout above, in seconds


class WriterTurns:
    """The writers of one SQLite engine take turns on a lock, each woken the moment the previous one ends.

    SQLite has one writer at a time; one that finds the file locked sleeps in SQLite's busy handler in steps
    (1, 2, 5, 10, 15, 20, 25 ms...) and wakes up to a step after the lock was freed. A revision's commit, the
    dispatcher's claim and the polls' updates met there on every Hub webhook, each wait adding up to a step.
    A connection takes the turn before its first write statement (where the sqlite3 module begins its
    transaction) and hands it on when it goes back to the pool (a session does at its commit or rollback, a
    `with engine.begin()` at its end). A thread that holds the turn on another connection does not wait
    for itself: it meets SQLite's own wait, as every writer did before; so does one past the busy timeout,
    and so do other processes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder: int | None = None  # the thread holding the turn

    def attach(self, engine: sa.Engine) -> None:
        sa.event.listen(engine, "before_cursor_execute", self._before_execute)
        sa.event.listen(engine.pool, "checkin", self._returned)
        sa.event.listen(engine.pool, "invalidate", self._returned)

    def _before_execute(self, conn: sa.Connection, _cursor: object, statement: str, *_args: object) -> None:
        if conn.info.get(_TURN_KEY) or not _SQLITE_WRITE.match(statement):
            return
        me = threading.get_ident()
        if self._holder == me:
            return
        if self._lock.acquire(timeout=BUSY_TIMEOUT_S):
            self._holder = me
            conn.info[_TURN_KEY] = True

    def _returned(self, _dbapi_connection: object, record: object, *_args: object) -> None:
        if getattr(record, "info", {}).pop(_TURN_KEY, False):
            self._holder = None
            self._lock.release()


def alembic_config(engine: sa.Engine) -> AlembicConfig:
    from alembic.config import Config as AlembicConfig

    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = engine
    return cfg


def migrate(engine: sa.Engine) -> None:
    """Bring the schema to the newest migrations (safe to call at every start). "heads": feature
    branches of the migration graph (outbox, advisories) may be applied side by side.

    A database already at the heads costs one query: Alembic (0.6 s to import) is loaded only to upgrade.
    StorageError, in words a person can act on, when the file is not a database, when a newer hubwatch
    wrote it, or when the upgrade fails."""
    applied = applied_revisions(engine) or set()
    known, heads = _script_graph()
    if applied == heads:
        return
    newer = applied - known
    if newer:
        raise StorageError(
            f"{_where(engine)} was written by a newer hubwatch (schema {max(newer)}; this one knows up to "
            f"{max(heads)}): upgrade hubwatch"
        )
    from alembic import command

    try:
        command.upgrade(alembic_config(engine), "heads")
    except sa.exc.DBAPIError as err:
        raise _unreadable(engine, err, "migrate") from err


def script_heads() -> set[str]:
    """The newest revision of each branch of the migration scripts, read from their source."""
    return _script_graph()[1]


def _script_graph() -> tuple[set[str], set[str]]:
    """Every revision the migration scripts define, and the heads among them."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
        for key, value in _REVISION_LINE.findall(path.read_text(encoding="utf-8")):
            (revisions if key == "revision" else parents).update(_QUOTED.findall(value))
    return revisions, revisions - parents


def applied_revisions(engine: sa.Engine) -> set[str] | None:
    """The revisions the database says it is at; None when it has no version table yet. StorageError
    when the database cannot be opened or read (not a database, a damaged file, no server)."""
    try:
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table("alembic_version"):
                return None
            return {row[0] for row in conn.execute(sa.text("SELECT version_num FROM alembic_version"))}
    except sa.exc.DBAPIError as err:
        raise _unreadable(engine, err) from err


# What SQLite says of a file that is not (or no longer) a whole SQLite database.
_NOT_A_DATABASE = ("file is not a database", "database disk image is malformed")


def _unreadable(engine: sa.Engine, err: sa.exc.DBAPIError, doing: str = "open") -> StorageError:
    reason = str(err.orig).strip() or type(err.orig).__name__
    if any(phrase in reason for phrase in _NOT_A_DATABASE):
        return StorageError(f"{_where(engine)} is not a hubwatch database ({reason})")
    return StorageError(f"cannot {doing} {_where(engine)}: {reason}")


def _where(engine: sa.Engine) -> str:
    """The SQLite file, or the URL without its password."""
    if engine.dialect.name == "sqlite" and engine.url.database not in (None, "", ":memory:"):
        return str(engine.url.database)
    return _redact(str(engine.url))


def _redact(url: str) -> str:
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return "<unparseable URL>"
