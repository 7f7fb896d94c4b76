"""Whether the database can be written: a cheap write probe, and which errors mean it cannot.

The tracker pauses polling while writes fail (no Hub requests spent on work that cannot be stored) and
asks `probe_write` when to resume; `write_failure` tells a failing database (disk full, read-only,
locked past the busy timeout, server gone) from a bug, without the tracker knowing SQL's exceptions.
"""

from __future__ import annotations

import errno

import sqlalchemy as sa

from storage.errors import StorageError

# What the operating system says when a disk cannot take more (or any) writes.
_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO})


def probe_write(engine: sa.Engine) -> None:
    """One write transaction that changes nothing: the schema version row rewritten in place. Raises what
    a failed write raises (a read-only or locked database, one that cannot be reached, no room left for
    the journal)."""
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = version_num"))


def write_failure(err: BaseException) -> str | None:
    """Why the database cannot be written, when `err` says so; None for any other error (a bug)."""
    if isinstance(err, sa.exc.OperationalError):
        return _first_line(err.orig if err.orig is not None else err)
    if isinstance(err, StorageError):
        return _first_line(err)
    if isinstance(err, OSError) and err.errno in _DISK_ERRNOS:
        return _first_line(err)
    return None


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
