"""`hubwatch run` (scheduler, HTTP server and webhook dispatcher) and `hubwatch serve` (HTTP alone)."""

from __future__ import annotations

from typing import Any

import click

from tracker.cli.root import app_of


@click.command()
@click.pass_context
def run(ctx: click.Context) -> None:
    """The daemon: poll every watch at its interval, serve HTTP ([server]) and deliver webhooks,
    until Ctrl-C or SIGTERM. Hub webhooks to /hooks/hub poll their repo at once."""
    from tracker.cli.wiring import start_dispatcher, start_http_server
    from tracker.config import parse_interval

    app = app_of(ctx)
    jitter = app.settings.poll.jitter
    jitter_s = 0 if str(jitter).strip() in {"0", "0s"} else parse_interval(jitter, "[poll] jitter")
    server_holder: list[Any] = []

    def poll(repo_id: str, branch: str) -> None:
        """A scheduled poll; revisions it stored get their feed entries rendered before anyone asks."""
        outcome = app.poll_if_due(repo_id, branch)
        if outcome is not None and outcome.revisions and server_holder:
            server_holder[0].warm_feeds()

    from tracker.budget import budget_state
    from tracker.listing import start_listing

    triggers: list[Any] = []  # the listing triggers polls through the scheduler, built next
    # a pass may find many moved repos: they share the scheduled polls' threads (urgent ones are Hub webhooks')
    listing = start_listing(app, lambda repo_id, branch: triggers[0](repo_id, branch, urgent=False))
    scheduler = build_scheduler(app, poll, jitter_s, plan=listing.plan)
    triggers.append(scheduler.trigger)
    scheduler.add_periodic("__listing__", listing, listing.interval_s)
    osv = app.settings.osv
    if osv.enabled:
        every = parse_interval(osv.recheck_interval, "[osv] recheck_interval")
        scheduler.add_periodic("__osv_recheck__", app.advisories.recheck, every, app.advisories.recheck_due_at(every))
        scheduler.add_periodic(
            "__osv_pending__", app.advisories.retry_pending,
            parse_interval(osv.retry_pending_interval, "[osv] retry_pending_interval"),
        )
    app.ingestor  # noqa: B018 - the ingest stack is loaded before serving: no Hub webhook's ingest waits for its imports
    server = start_http_server(app, trigger=lambda repo_id, branch: scheduler.trigger(repo_id, branch or "main"),
                               poll_state=lambda: {**scheduler.poll_state(), "hub_budget": budget_state()})
    server_holder.append(server)
    stop_deliveries = start_dispatcher(app)
    try:
        scheduler.run_until_signalled()
    finally:
        server.stop()
        stop_deliveries()


def build_scheduler(app: Any, poll: Any, jitter_s: int, **options: Any) -> Any:
    """This process's scheduler: timing every watch itself (one worker: SQLite's default), or leasing due
    watches from the database beside other workers ([poll] coordination; shared is PostgreSQL's default)."""
    from tracker.config import parse_interval
    from tracker.scheduler import Scheduler

    mode = app.settings.poll.coordination
    if mode == "auto":
        mode = "shared" if app.store.engine.dialect.name == "postgresql" else "local"
    common = {"version": app.watch_list_version, **options}
    leases = app.store.leases
    if mode == "local":  # polls asked for (listing moves, Hub webhooks) are written down before they run
        return Scheduler(app.scheduled_watches, poll, jitter_s=jitter_s, requests=leases, **common)
    from tracker.workers import SharedScheduler

    lease_s = parse_interval(app.settings.poll.lease, "[poll] lease")
    return SharedScheduler(app.scheduled_watches, poll, jitter_s, leases, lease_s, clock=app.clock, **common)


@click.command()
@click.pass_context
def serve(ctx: click.Context) -> None:
    """The HTTP server alone (feeds, pages, API, Hub webhooks) until Ctrl-C or SIGTERM; no polling."""
    import signal
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from tracker.cli.wiring import start_http_server

    app = app_of(ctx)
    ingests = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest")

    def ingest_now(repo_id: str, branch: str | None) -> bool:
        ingests.submit(app.poll_if_due, repo_id, branch or "main")
        return True

    server = start_http_server(app, trigger=ingest_now)
    done = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: done.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        done.wait()
    finally:
        server.stop()
        ingests.shutdown(wait=True, cancel_futures=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
