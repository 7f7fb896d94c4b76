"""Polling: when each watch is polled, by which process, and at what cost in Hub requests.

scheduler.py (one process: APScheduler times every watch) and shared.py (several workers on one
PostgreSQL: due watches leased from the database); listing.py (change detection from the Hub's listing);
budget.py (the Hub request budget shared by every poll); storage_gate.py (no Hub request while the
database cannot be written); poller.py (one watch's poll, as the schedulers and `hubwatch poll` run it);
coalesce.py (however many triggers, one poll of a watch waiting behind the one in flight); outcome.py
(what one poll came to). Polling stands below the pipeline and the Hub client: what it polls with (the
ingest, the listing, the family check) is handed in by `hubwatch run`'s wiring, tracker/cli/builder.py.
"""
