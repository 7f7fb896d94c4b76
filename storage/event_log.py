"""The one writer of Event rows: each event id written once, its webhook deliveries queued with it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from storage import summaries
from storage.delivery_queue import enqueue
from storage.models import Event

# The PostgreSQL advisory lock every event-writing transaction takes (a constant: "hubwatch events").
EVENT_WRITES_LOCK = 0x6875_6277_6576_6E74


@dataclass(frozen=True)
class NewEvent:
    event_id: str
    kind: str
    title: str
    severity: str
    security: bool = False
    payload: dict[str, Any] = field(default_factory=dict)


def order_event_writes(session: Session) -> None:
    """Take the event writers' turn: on PostgreSQL a transaction-level advisory lock, held until commit.

    An event's seq is drawn when it is inserted, but it becomes visible when its transaction commits; two
    writers in parallel could commit seq 11 before seq 10, and a dispatcher would send 11 first. Holding
    one lock from before the insert to the commit makes seqs commit in their order. Call it as the first
    statement of a transaction that writes events (write_events calls it too; taking it again is free), so
    that no writer waits for the lock while holding rows another writer needs. SQLite writers are one at a
    time already: nothing to do there."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": EVENT_WRITES_LOCK})


def write_events(
    session: Session,
    repo_id: str,
    events: Iterable[NewEvent],
    created_at: datetime,
    revision_id: int | None = None,
    sha: str | None = None,
    *,
    skip_stored: bool = True,
) -> list[Event]:
    """Add Event rows to `session` and queue their deliveries there, so they commit together (the
    caller commits). Events are never rewritten: with `skip_stored` (an event announced again) an id
    already stored is skipped, and of one id given twice the last is written; without it (a new
    revision's own events) a repeated id fails the transaction at the unique constraint. Returns the
    rows added."""
    new = _unstored(session, events) if skip_stored else list(events)
    if new:
        order_event_writes(session)
    rows = [
        Event(event_id=e.event_id, kind=e.kind, repo_id=repo_id, revision_id=revision_id, sha=sha,
              title=e.title, severity=e.severity, security=e.security, created_at=created_at, payload=e.payload)
        for e in new
    ]
    session.add_all(rows)
    enqueue(session, rows)
    summaries.add_events(session, repo_id, len(rows))
    return rows


def _unstored(session: Session, events: Iterable[NewEvent]) -> list[NewEvent]:
    """The events whose ids are not stored yet, each id once (the last given)."""
    wanted = {e.event_id: e for e in events}
    if not wanted:
        return []
    present = set(session.exec(select(Event.event_id).where(col(Event.event_id).in_(wanted))))
    return [e for e in wanted.values() if e.event_id not in present]
