"""The one writer of Event rows: each event id written once, its webhook deliveries queued with it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from storage import summaries
from storage.delivery_queue import enqueue
from storage.models import Event


@dataclass(frozen=True)
class NewEvent:
    event_id: str
    kind: str
    title: str
    severity: str
    security: bool = False
    payload: dict[str, Any] = field(default_factory=dict)


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
