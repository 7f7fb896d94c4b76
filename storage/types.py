"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
import sqlalchemy.orm


class UTCDateTime(sa.TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend (SQLite drops the zone; we put it back)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


NUL_REPLACEMENT = "\u2400"  # SYMBOL FOR NULL: what pages and feeds show for a NUL anyway


def scrub_nul(value: object) -> object:
    """`value` with NUL characters replaced (PostgreSQL text and JSON cannot hold them), recursively."""
    if isinstance(value, str):
        return value.replace("\x00", NUL_REPLACEMENT) if "\x00" in value else value
    if isinstance(value, list):
        return [scrub_nul(v) for v in value]
    if isinstance(value, tuple):
        return tuple(scrub_nul(v) for v in value)
    if isinstance(value, dict):
        return {scrub_nul(k): scrub_nul(v) for k, v in value.items()}
    return value


def _scrub_before_flush(session: sa.orm.Session, _context: object, _instances: object) -> None:
    """Every string a row is about to write, NUL-free: a commit title with a NUL byte must not lose
    its revision on PostgreSQL, and SQLite stores the same text so both backends agree."""
    for obj in [*session.new, *session.dirty]:
        mapper = sa.inspect(obj).mapper
        for attr in mapper.column_attrs:
            value = getattr(obj, attr.key, None)
            if isinstance(value, str | list | dict | tuple):
                cleaned = scrub_nul(value)
                if cleaned is not value and cleaned != value:
                    setattr(obj, attr.key, cleaned)


sa.event.listen(sa.orm.Session, "before_flush", _scrub_before_flush)
