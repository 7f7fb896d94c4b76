"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timezone

import sqlalchemy as sa


class UTCDateTime(sa.TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend (SQLite drops the zone; we put it back)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(timezone.utc)

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)
