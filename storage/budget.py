"""The Hub request budget the processes of one database share: per pool, a window and the requests
claimed in it (tracker's request budget claims its blocks here)."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from storage.models import HubBudgetWindow
from storage.sessions import EngineStore


class BudgetStore(EngineStore):
    """The Hub request budget shared by every process on this database, claimed in blocks."""

    def claim(self, pool: str, wanted: int, limit: int, window_s: float) -> tuple[int, float]:
        """Claim up to `wanted` requests of `pool`'s current window of `limit` (a new window of `window_s`
        starts when the last one is over): (granted, seconds until the window turns). Conditional UPDATEs
        only, so processes racing for the last requests never claim more than `limit` between them."""
        now = self.clock()
        table = HubBudgetWindow.__table__  # type: ignore[attr-defined]
        row = table.c.pool == pool
        try:
            with self.engine.begin() as conn:
                conn.execute(sa.insert(table).values(pool=pool, window_ends_at=None, used=0))
        except IntegrityError:
            pass  # there already
        with self.engine.begin() as conn:
            fresh = conn.execute(
                sa.update(table)
                .where(row, sa.or_(table.c.window_ends_at.is_(None), table.c.window_ends_at <= now))
                .values(used=min(wanted, limit), window_ends_at=now + timedelta(seconds=window_s))
            )
            if fresh.rowcount:
                return min(wanted, limit), window_s
            for n in dict.fromkeys((wanted, 1)):
                taken = conn.execute(
                    sa.update(table)
                    .where(row, table.c.window_ends_at > now, table.c.used + n <= limit)
                    .values(used=table.c.used + n)
                )
                if taken.rowcount:
                    ends = conn.execute(sa.select(table.c.window_ends_at).where(row)).scalar_one()
                    return n, max(0.0, (ends - now).total_seconds())
            ends = conn.execute(sa.select(table.c.window_ends_at).where(row)).scalar_one()
            return 0, max(0.0, (ends - now).total_seconds())
