"""`hubwatch run` (scheduler, HTTP server and webhook dispatcher) and `hubwatch serve` (HTTP alone)."""

from __future__ import annotations

from typing import Any

import click

from tracker.cli.root import app_of

FEED_WARM_DELAY_S = 1.0  # after a poll stored revisions: their deliveries have left by then


@click.command()
@click.pass_context
def run(ctx: click.Context) -> None:
    """The daemon: poll every watch at its interval, serve HTTP ([server]) and deliver webhooks,
    until Ctrl-C or SIGTERM. Hub webhooks to /hooks/hub poll their repo at once."""
    import threading

    from tracker.cli.builder import build_polling
    from tracker.cli.deferred import DeferredCall
    from tracker.cli.wiring import start_dispatcher, start_http_server

    app = app_of(ctx)
    server_holder: list[Any] = []
    # New revisions' feed entries are rendered a moment after the poll, off its thread: their webhooks go first.
    warm_feeds = DeferredCall(lambda: server_holder and server_holder[0].warm_feeds(), FEED_WARM_DELAY_S,
                              "feed-warm-up").start()
    polling = build_polling(app, on_revisions=warm_feeds.ask)
    app.ingestor  # noqa: B018 - the ingest stack is loaded before serving: no Hub webhook's ingest waits for its imports
    server = start_http_server(app, trigger=polling.trigger, poll_state=polling.state)
    server_holder.append(server)
    stop_deliveries = start_dispatcher(app)
    try:
        polling.scheduler.run_until_signalled()
    finally:
        # The polls in flight have finished (their deliveries are in the outbox): the HTTP server and the
        # dispatcher stop side by side, so that a stop takes the longer of the two, not their sum.
        warm_feeds.stop()
        server_stopped = threading.Thread(target=server.stop, name="http-stop")
        server_stopped.start()
        try:
            stop_deliveries()
        finally:
            server_stopped.join()


@click.command()
@click.pass_context
def serve(ctx: click.Context) -> None:
    """The HTTP server alone (feeds, pages, API, Hub webhooks) until Ctrl-C or SIGTERM; no polling."""
    import signal
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from tracker.cli.wiring import start_http_server
    from tracker.polling.coalesce import PendingPolls

    app = app_of(ctx)
    ingests = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest")
    pending = PendingPolls()  # a burst of Hub webhooks: the ingest running and one more, not one each

    def ingest(repo_id: str, branch: str) -> None:
        _, head_sha = pending.begin(f"{repo_id}@{branch}")
        app.poller.poll_if_due(repo_id, branch, head_sha)

    def ingest_now(repo_id: str, branch: str | None, head_sha: str | None = None) -> bool:
        branch = branch or "main"
        if pending.ask(f"{repo_id}@{branch}", head_sha):
            ingests.submit(ingest, repo_id, branch)
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
