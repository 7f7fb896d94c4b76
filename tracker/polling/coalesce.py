"""Triggers coalesced: however many Hub webhooks ask for a watch's poll, at most one poll of it waits behind
the one in flight.

The Hub retries its webhooks, and a push can send several: 50 triggers in a second used to cost 50 polls.
A poll reads the head when it starts, so one queued poll covers every trigger that arrived before it
started; a trigger while a poll is in flight still queues one more (a commit may have landed after the
poll in flight read the head). Both schedulers (tracker/polling/scheduler.py, shared.py) and `hubwatch
serve`'s own executor keep their queued polls here.
"""

from __future__ import annotations

import threading


class PendingPolls:
    """The watches ("repo@branch") with a poll asked for that has not started yet, each with the head its
    triggers named (a Hub webhook's new sha for the branch), kept only while they all named the same one."""

    def __init__(self) -> None:
        self._pending: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def ask(self, job_id: str, head_sha: str | None = None) -> bool:
        """A trigger for the watch: True when the caller queues a poll (none was waiting); False when one
        already waits and will see what this trigger announced (the trigger is dropped). A trigger that names
        no head, or another head than the waiting poll's, leaves that poll to ask the Hub for it."""
        with self._lock:
            if job_id in self._pending:
                if self._pending[job_id] != head_sha:
                    self._pending[job_id] = None
                return False
            self._pending[job_id] = head_sha
            return True

    def start(self, job_id: str) -> bool:
        """A poll of the watch starts: it covers every trigger so far. True when one was waiting."""
        return self.begin(job_id)[0]

    def begin(self, job_id: str) -> tuple[bool, str | None]:
        """`start`, with the head the waiting poll's triggers named (None when none, or not all the same)."""
        with self._lock:
            if job_id not in self._pending:
                return False, None
            return True, self._pending.pop(job_id)

    def forget(self, job_id: str) -> None:
        """The poll asked for will not run here (refused while stopping, or left to the database's request)."""
        with self._lock:
            self._pending.pop(job_id, None)
