"""`hubwatch deliveries list|redeliver`: the outbound webhook delivery log."""

from __future__ import annotations

import click

from tracker.cli import output
from tracker.cli.root import app_of, emit_json, fail


@click.group()
def deliveries() -> None:
    """The outbound webhook delivery log: list deliveries, redeliver one."""


@deliveries.command("list")
@click.option("--status", type=click.Choice(["pending", "delivered", "failed", "dead"]), default=None,
              help="Only deliveries with this status.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000),
              help="At most this many deliveries.")
@click.option("--json", "as_json", is_flag=True, help="The deliveries as JSON.")
@click.pass_context
def deliveries_list(ctx: click.Context, status: str | None, limit: int, as_json: bool) -> None:
    """Deliveries, newest first, with the outcome of their last attempt (URLs shown without their path)."""
    items = [item.as_dict() for item in app_of(ctx, logs=False).store.outbox.list_deliveries(status=status, limit=limit)]
    if as_json:
        emit_json(items)
        return
    if not items:
        click.echo(f"no {status + ' ' if status else ''}deliveries")
    for d in items:
        for line in output.delivery_lines(d):
            click.echo(line)


@deliveries.command("redeliver")
@click.argument("delivery_id")
@click.option("--queue-only", is_flag=True, help="Only queue it: the running daemon (hubwatch run) sends it.")
@click.pass_context
def deliveries_redeliver(ctx: click.Context, delivery_id: str, queue_only: bool) -> None:
    """Send delivery DELIVERY_ID again now, with the same webhook-id (receivers deduplicate on it)."""
    app = app_of(ctx)
    app.store.outbox.redeliver(delivery_id)
    if queue_only:
        click.echo(f"{delivery_id} queued; the daemon sends it")
        return
    from tracker.cli.wiring import build_dispatcher  # here: the HTTP stack, which `deliveries list` never needs

    dispatcher = build_dispatcher(app)
    try:
        attempt = dispatcher.deliver_now(delivery_id)
    finally:
        dispatcher.close()
    if attempt is None:
        click.echo(f"{delivery_id} queued; another dispatcher is sending it")
    elif attempt.outcome == "delivered":
        code = f"{attempt.status_code}, " if attempt.status_code is not None else ""  # apprise: no HTTP status seen
        click.echo(f"{delivery_id} delivered ({code}{attempt.duration_ms} ms)")
    else:
        item = app.store.outbox.get_delivery(delivery_id)
        after = f"next try {item.delivery.next_attempt_at}" if item and item.delivery.status == "pending" else (
            f"now {item.delivery.status}" if item else "")
        ctx.exit(fail(f"{delivery_id} not delivered: {attempt.error}; {after}", 1))
