"""Daemon wiring: the HTTP server from feeds/ and the webhook dispatcher, built from an App.

Imported only by the commands that serve or deliver (`run`, `serve`, `deliveries redeliver`), so
commands that read the database never load the HTTP stack; the HTTP app and what it reads (the differs, the
stored snapshots, the verification and behaviour readers) are imported by `start_http_server` alone, so
`deliveries redeliver` loads the dispatcher without them.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from feeds.webhooks import Links
from feeds.webhooks.dispatcher import DeliveryOptions, Dispatcher
from tracker.cli.app import App
from tracker.errors import ConfigError

if TYPE_CHECKING:
    from feeds.http.app import ServerThread

Trigger = Callable[[str, str | None, str | None], Any]


def start_http_server(app: App, trigger: Trigger, poll_state: Callable[[], dict[str, Any]] | None = None) -> ServerThread:
    """Feeds, pages, API and Hub webhooks on [server] host:port, started in a background thread.
    `poll_state`: the scheduler's overdue polls, for /healthz and /metrics."""
    from datetime import UTC, datetime

    from estimator.cost import reprice
    from feeds.http.app import ServerOptions, ServerThread, create_app
    from tracker.differs import diff_snapshots
    from tracker.pipeline.behaviour_store import extras_reader
    from tracker.pipeline.dataset_revision import tables_reader
    from tracker.pipeline.template_matrix import render_limits
    from tracker.pipeline.verify import lints_reader
    from tracker.revision.stored import load_snapshot

    settings = app.settings

    def differ(a: Any, b: Any) -> list[dict[str, Any]]:
        """Two stored revisions -> their changes as dicts (feeds may not import the differs)."""
        old, new = load_snapshot(app.store, a), load_snapshot(app.store, b)
        return [c.to_dict() for c in diff_snapshots(old, new, render_limits=render_limits(settings))]

    options = ServerOptions(
        public_url=settings.server.public_url.rstrip("/"),
        api_token=settings.api_token,
        read_token=settings.read_token,
        hub_webhook_secret=settings.hub_webhook_secret,
        default_interval_s=settings.default_interval_s,
        allow_private_targets=settings.delivery.allow_private_targets,
        apprise_allow_plugins=settings.delivery.apprise_allow_plugins,
        apprise_allow_insecure_tls=settings.delivery.apprise_allow_insecure_tls,
        hub_url=settings.hub.endpoint.rstrip("/"),
    )
    table, priced_on = settings.cost.card_table(), datetime.now(UTC).date().isoformat()

    def repricer(cost: dict[str, Any]) -> dict[str, Any] | None:
        """A stored cost section at [cost] cards' prices as read at start (feeds may not import the estimator)."""
        return reprice(cost, table, on=priced_on)

    http_app = create_app(
        app.store,
        options=options,
        trigger=trigger,
        subscriptions=app.store.subscriptions,
        diff=differ,
        extras=extras_reader(app.store),
        verify=lints_reader(app.store),
        tables=tables_reader(app.store),
        reprice=repricer,
        storage_state=app.poller.gate.state,
        poll_state=poll_state,
    )
    try:
        server = ServerThread(http_app, settings.server.host, settings.server.port)
    except OSError as err:
        raise ConfigError(f"cannot listen on {settings.server.host}:{settings.server.port}: {err.strerror or err}") from err
    # A long-lived server: what start-up made lives for ever. Frozen, the collector's full passes stop
    # walking it; those passes were the API's p99 tail (100+ ms pauses at 100 requests/s).
    gc.collect()
    gc.freeze()
    started = server.start()
    threading.Thread(target=server.warm_feeds, name="feed-warm-up", daemon=True).start()
    return started


def build_dispatcher(app: App) -> Dispatcher:
    """The webhook dispatcher over the outbox, with the [delivery] settings and the [[webhooks]] secrets."""
    settings, d = app.settings, app.settings.delivery
    options = DeliveryOptions(
        timeout_s=d.timeout_s,
        connect_timeout_s=d.connect_timeout_s,
        retry_schedule_s=tuple(float(s) for s in d.retry_delays_s),
        retry_after_max_s=d.retry_after_max_s,
        allow_private_targets=d.allow_private_targets,
        apprise_allow_plugins=d.apprise_allow_plugins,
        apprise_allow_insecure_tls=d.apprise_allow_insecure_tls,
        concurrency=d.concurrency,
        poll_interval_s=d.poll_interval_s,
        lease_s=d.lease_s,
    )
    secrets = settings.webhook_secrets

    def secret_for(sub: Any) -> str | None:
        """API subscriptions carry their secret; config ones name a variable."""
        return sub.secret or secrets.get(sub.secret_env or "")

    links = Links(settings.hub.endpoint, settings.server.public_url)
    gate = app.poller.gate  # a database the dispatcher cannot use is the storage state /healthz shows
    return Dispatcher(app.store.outbox, options, secret_for=secret_for, links=links, clock=app.clock,
                      on_database_failed=gate.failed, on_database_back=gate.succeeded)


def start_dispatcher(app: App) -> Callable[[], None]:
    """Deliver webhooks from a background thread; returns the function that stops it (a delivery in
    flight finishes first)."""
    dispatcher = build_dispatcher(app)
    stop = threading.Event()
    thread = threading.Thread(target=dispatcher.run_forever, args=(stop,), name="webhook-dispatcher", daemon=True)
    thread.start()

    def stop_and_wait() -> None:
        stop.set()
        dispatcher.wake()  # an idle round returns at once, not at its next look at the stop event
        thread.join(timeout=app.settings.delivery.timeout_s + app.settings.delivery.connect_timeout_s + 5)

    return stop_and_wait
