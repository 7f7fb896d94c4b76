"""The `hubwatch` command: the composition root that wires config, storage, the Hub and the daemon.

Exit codes scripts can trust: 0 success; 1 a repo failed or an operation did; 2 bad usage;
3 unknown repo, revision or watch; 4 bad configuration or database.
"""

from __future__ import annotations

import gc
import json
import sys
import threading
from typing import Any

import click

from storage.kinds import SEVERITIES
from storage.errors import AmbiguousRevision, RevisionNotStored, WatchExists
from tracker import present
from tracker.advisories.cli import advisories as advisories_group
from tracker.app import App
from tracker.config import load_settings, parse_interval, validate_repo_id
from tracker.differs import diff_snapshots
from tracker.errors import ConfigError, HubwatchError, UnknownRevision
from tracker.logs import configure_logging
from tracker.snapshot_io import load_snapshot


def _emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def _app(ctx: click.Context) -> App:
    return ctx.ensure_object(dict)["app_factory"]()


def _repo_arg(repo: str) -> str:
    try:
        return validate_repo_id(repo)
    except ConfigError as err:
        raise click.BadParameter(str(err)) from err


def _revision(app: App, repo: str, ref: str):  # noqa: ANN202
    try:
        return app.store.find_revision(repo, ref)
    except (RevisionNotStored, AmbiguousRevision) as err:
        raise UnknownRevision(str(err)) from err


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_file", metavar="FILE", help="Config file (default: $HUBWATCH_CONFIG, ./hubwatch.toml).")
@click.pass_context
def cli(ctx: click.Context, config_file: str | None) -> None:
    """hubwatch: watch Hugging Face Hub repos and keep the history of what changed."""
    state = ctx.ensure_object(dict)
    holder: dict[str, App] = {}

    def factory() -> App:
        if "app" not in holder:
            settings = load_settings(config_file)
            configure_logging(settings.log)
            holder["app"] = App(settings)
        return holder["app"]

    state["app_factory"] = factory


@cli.group()
def watch() -> None:
    """Add, list and remove watched repos."""


@watch.command("add")
@click.argument("repo")
@click.option("--branch", default="main", show_default=True)
@click.option("--interval", default=None, help="Poll interval, e.g. 15m (default: [poll] default_interval).")
@click.option("--backfill", default=0, show_default=True, type=click.IntRange(0, 10_000),
              help="On the first poll, also ingest this many commits before the head.")
@click.option("--no-check", is_flag=True, help="Do not check with the Hub that the repo and branch exist.")
@click.pass_context
def watch_add(ctx: click.Context, repo: str, branch: str, interval: str | None, backfill: int, no_check: bool) -> None:
    """Watch REPO (org/name)."""
    app = _app(ctx)
    repo = _repo_arg(repo)
    try:
        interval_s = parse_interval(interval, "--interval") if interval else app.settings.default_interval_s
    except ConfigError as err:
        raise click.BadParameter(str(err), param_hint="--interval") from err
    head = None if no_check else app.hub.head(repo, branch)
    try:
        app.store.add_watch(repo, branch, interval_s, source="cli", backfill=backfill)
    except WatchExists as err:
        raise click.ClickException(str(err)) from err
    where = f"at {head.sha[:12]}" if head else "(not checked)"
    gated = f"; the repo is gated ({head.gated}): set ${app.settings.hub.token_env}" if head and head.gated else ""
    click.echo(f"watching {repo}@{branch} every {interval_s}s, head {where}{gated}")


@watch.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def watch_list(ctx: click.Context, as_json: bool) -> None:
    """List watched repos with the outcome of their last poll."""
    watches = _app(ctx).store.list_watches()
    if as_json:
        _emit_json([present.watch_dict(w) for w in watches])
        return
    if not watches:
        click.echo("no repos watched (add one with: hubwatch watch add ORG/NAME)")
    for w in watches:
        click.echo(present.watch_text(w))


@watch.command("remove")
@click.argument("repo")
@click.option("--branch", default=None, help="Only this branch (default: every watched branch).")
@click.pass_context
def watch_remove(ctx: click.Context, repo: str, branch: str | None) -> None:
    """Stop watching REPO; its stored history stays queryable."""
    removed = _app(ctx).store.remove_watch(_repo_arg(repo), branch)
    if not removed:
        ctx.exit(_fail(f"{repo} is not watched", 3))
    click.echo(f"stopped watching {repo} ({removed} branch{'es' if removed > 1 else ''}); history kept")


@cli.command()
@click.argument("repos", nargs=-1)
@click.option("--backfill", default=None, type=click.IntRange(0, 10_000),
              help="For watches polled for the first time: also ingest this many earlier commits.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def poll(ctx: click.Context, repos: tuple[str, ...], backfill: int | None, as_json: bool) -> None:
    """One ingest pass now, then exit (exit code 1 if a repo failed)."""
    app = _app(ctx)
    outcomes = app.poll([_repo_arg(r) for r in repos], backfill=backfill)
    if as_json:
        _emit_json([present.outcome_dict(o) for o in outcomes])
    else:
        if not outcomes:
            click.echo("no repos watched (add one with: hubwatch watch add ORG/NAME)")
        for o in outcomes:
            for line in present.outcome_text(o):
                click.echo(line)
    if any(o.failed for o in outcomes):
        ctx.exit(1)


@cli.command()
@click.pass_context
def run(ctx: click.Context) -> None:
    """The daemon: poll every watch at its interval, serve HTTP ([server]) and deliver webhooks,
    until Ctrl-C or SIGTERM. Hub webhooks to /hooks/hub poll their repo at once."""
    from tracker.scheduler import Scheduler

    app = _app(ctx)
    jitter = app.settings.poll.jitter
    jitter_s = 0 if str(jitter).strip() in {"0", "0s"} else parse_interval(jitter, "[poll] jitter")
    server_holder: list[Any] = []

    def poll(repo_id: str, branch: str) -> None:
        """A scheduled poll; revisions it stored get their feed entries rendered before anyone asks."""
        outcome = app.poll_if_due(repo_id, branch)
        if outcome is not None and outcome.revisions and server_holder:
            server_holder[0].warm_feeds()

    scheduler = Scheduler(app.store.list_watches, poll, jitter_s=jitter_s)
    osv = app.settings.osv
    if osv.enabled:
        every = parse_interval(osv.recheck_interval, "[osv] recheck_interval")
        scheduler.add_periodic("__osv_recheck__", app.advisories.recheck, every, app.advisories.recheck_due_at(every))
        scheduler.add_periodic(
            "__osv_pending__", app.advisories.retry_pending,
            parse_interval(osv.retry_pending_interval, "[osv] retry_pending_interval"),
        )
    server = _http_server(app, trigger=lambda repo_id, branch: scheduler.trigger(repo_id, branch or "main"))
    server_holder.append(server)
    stop_deliveries = _start_dispatcher(app)
    try:
        scheduler.run_until_signalled()
    finally:
        server.stop()
        stop_deliveries()


@cli.command()
@click.argument("repo")
@click.option("--limit", default=None, type=click.IntRange(1), help="At most this many revisions.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def history(ctx: click.Context, repo: str, limit: int | None, as_json: bool) -> None:
    """Revisions of REPO, newest first, with their changes."""
    app = _app(ctx)
    repo = _repo_arg(repo)
    revisions = app.store.list_revisions(repo, limit=limit)
    if not revisions and app.store.get_watch(repo) is None:
        ctx.exit(_fail(f"no history for {repo}: it is not watched (hubwatch watch add {repo})", 3))
    changes = app.store.changes_by_revision(r.id for r in revisions)  # type: ignore[misc]
    if as_json:
        _emit_json([present.revision_dict(r, changes[r.id]) for r in revisions])  # type: ignore[index]
        return
    if not revisions:
        click.echo(f"{repo}: watched, nothing ingested yet (run: hubwatch poll {repo})")
    for r in revisions:
        for line in present.revision_text(r, changes[r.id]):  # type: ignore[index]
            click.echo(line)


@cli.command()
@click.argument("repo")
@click.argument("revision")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def show(ctx: click.Context, repo: str, revision: str, as_json: bool) -> None:
    """One stored revision of REPO with its files and changes."""
    app = _app(ctx)
    rev = _revision(app, _repo_arg(repo), revision)
    files = app.store.revision_files(rev.id)  # type: ignore[arg-type]
    changes = app.store.changes_by_revision([rev.id])[rev.id]  # type: ignore[list-item,index]
    if as_json:
        _emit_json({**present.revision_dict(rev, changes), "files": [present.file_dict(f) for f in files]})
        return
    for line in present.revision_text(rev, changes):
        click.echo(line)
    click.echo(f"  files ({len(files)}):")
    for f in files:
        note = f"  ({f.note})" if f.note else ""
        click.echo(f"    {f.kind:<13} {f.size:>14,}  {f.path}{note}")


@cli.command()
@click.argument("repo")
@click.argument("rev_a")
@click.argument("rev_b")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def diff(ctx: click.Context, repo: str, rev_a: str, rev_b: str, as_json: bool) -> None:
    """What changed in REPO between two stored revisions."""
    app = _app(ctx)
    repo = _repo_arg(repo)
    a, b = _revision(app, repo, rev_a), _revision(app, repo, rev_b)
    changes = diff_snapshots(load_snapshot(app.store, a), load_snapshot(app.store, b))
    if as_json:
        _emit_json({"repo_id": repo, "from": a.sha, "to": b.sha, "changes": [c.to_dict() for c in changes]})
        return
    click.echo(f"{repo}: {a.sha[:12]} -> {b.sha[:12]}: {len(changes)} change(s)")
    for line in present.change_lines(changes, indent="  "):
        click.echo(line)


@cli.command()
@click.argument("repo", required=False)
@click.option("--revision", default=None, help="A stored revision (default: the newest).")
@click.option("--config-file", type=click.Path(exists=True, dir_okay=False), help="Estimate a config.json file.")
@click.option("--manifest", type=click.Path(exists=True, dir_okay=False),
              help="With --config-file: a safetensors header (JSON: name -> {dtype, shape}) to count from.")
@click.option("--seq-len-cap", default=None, type=click.IntRange(1, 1_048_576),
              help="Cap on the sequence length (default: [estimate] seq_len_cap).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def estimate(
    ctx: click.Context, repo: str | None, revision: str | None, config_file: str | None, manifest: str | None,
    seq_len_cap: int | None, as_json: bool,
) -> None:
    """Parameters and GPU memory: of a stored revision of REPO, or of a config.json file."""
    from tracker.estimate_cmd import estimate_file, estimate_revision

    if (repo is None) == (config_file is None):
        raise click.UsageError("give either REPO or --config-file")
    if manifest and not config_file:
        raise click.UsageError("--manifest goes with --config-file")
    if config_file:
        cap = seq_len_cap or 2048
        result, header = estimate_file(config_file, manifest, cap), None
    else:
        app = _app(ctx)
        repo = _repo_arg(repo)  # type: ignore[arg-type]
        cap = seq_len_cap or app.settings.estimate.seq_len_cap
        result, header = estimate_revision(app, repo, revision, cap)
    if as_json:
        _emit_json({**({"repo_id": repo, **header} if header else {}), **result.to_dict()})
        return
    from estimator import render_table

    if header:
        click.echo(f"{repo} at {header['sha'][:12]} ({header['source']})")
    click.echo(render_table(result))


# -- the HTTP server and feeds (feeds/) --------------------------------------------------------------


def _http_server(app: App, trigger: Any):  # noqa: ANN202 - feeds.http.ServerThread, imported lazily
    """Feeds, pages, API and Hub webhooks on [server] host:port, started in a background thread."""
    from feeds.http import ServerOptions, ServerThread, create_app

    settings = app.settings

    def differ(a, b):  # noqa: ANN001, ANN202 - two stored revisions -> their changes as dicts
        return [c.to_dict() for c in diff_snapshots(load_snapshot(app.store, a), load_snapshot(app.store, b))]

    options = ServerOptions(
        public_url=settings.server.public_url.rstrip("/"),
        api_token=settings.api_token,
        read_token=settings.read_token,
        hub_webhook_secret=settings.hub_webhook_secret,
        default_interval_s=settings.default_interval_s,
        allow_private_targets=settings.delivery.allow_private_targets,
    )
    http_app = create_app(app.store, options=options, trigger=trigger, outbox=_outbox(app), diff=differ)
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


def _outbox(app: App) -> Any:
    """The outbound-webhook store, for the subscription routes."""
    return app.outbox


@cli.command()
@click.pass_context
def serve(ctx: click.Context) -> None:
    """The HTTP server alone (feeds, pages, API, Hub webhooks) until Ctrl-C or SIGTERM; no polling."""
    import signal
    import threading
    from concurrent.futures import ThreadPoolExecutor

    app = _app(ctx)
    ingests = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest")

    def ingest_now(repo_id: str, branch: str | None) -> bool:
        ingests.submit(app.poll_if_due, repo_id, branch or "main")
        return True

    server = _http_server(app, trigger=ingest_now)
    done = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: done.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        done.wait()
    finally:
        server.stop()
        ingests.shutdown(wait=True, cancel_futures=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@cli.command()
@click.argument("repo", required=False)
@click.option("--all", "all_repos", is_flag=True, help="Every watched repo.")
@click.option("--org", default=None, help="Every watched repo of this org or user.")
@click.option("--security", is_flag=True, help="Security-relevant events of every repo.")
@click.option("--format", "fmt", type=click.Choice(["atom", "rss"]), default="atom", show_default=True)
@click.option("--kind", "kinds", multiple=True, help="Only this kind (repeatable): chat_template, revision.ingested, ...")
@click.option("--min-severity", type=click.Choice(SEVERITIES), default=None)
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 1000), help="Newest entries shown.")
@click.pass_context
def feed(
    ctx: click.Context, repo: str | None, all_repos: bool, org: str | None, security: bool, fmt: str,
    kinds: tuple[str, ...], min_severity: str | None, limit: int,
) -> None:
    """The feed document on stdout: byte for byte what the server answers at [server] public_url."""
    from feeds.feed import FeedBuilder, FeedRequest
    from feeds.params import bad_kinds
    from storage.event_queries import EventQueries

    if sum([repo is not None, all_repos, org is not None, security]) != 1:
        raise click.UsageError("give exactly one of REPO, --all, --org ORG or --security")
    if bad_kinds(kinds):
        raise click.BadParameter(f"unknown kind(s): {', '.join(bad_kinds(kinds))}", param_hint="--kind")
    app = _app(ctx)
    queries = EventQueries(app.store.engine)
    if repo is not None:
        repo = _repo_arg(repo)
        if not queries.repo_known(repo):
            ctx.exit(_fail(f"no feed for {repo}: it is not watched (hubwatch watch add {repo})", 3))
        scope, key = "repo", repo
    elif org is not None:
        scope, key = "org", org
    else:
        scope, key = ("security" if security else "all"), None
    server = app.settings.server
    base = server.public_url.rstrip("/") or f"http://{server.host}:{server.port}"
    request = FeedRequest(scope, fmt, key, kinds, min_severity, limit)
    sys.stdout.buffer.write(FeedBuilder(app.store, queries).build(request, base).body)
    sys.stdout.buffer.flush()


@cli.command()
@click.option("--data-dir", default=None, help="Keep the demo's database here (default: a temporary folder).")
@click.option("--delay", default=0.0, type=click.FloatRange(0), help="Seconds to pause between steps.")
def demo(data_dir: str | None, delay: float) -> None:
    """The whole pipeline offline, against the bundled Hub replay."""
    from tracker.demo import run_demo

    run_demo(data_dir=data_dir, delay_s=delay, echo=click.echo)


# -- outbound webhooks (feeds/dispatcher.py) -------------------------------------------------------


def _dispatcher(app: App):  # noqa: ANN202 - feeds.dispatcher.Dispatcher, imported lazily
    """The webhook dispatcher over the outbox, with the [delivery] settings and the [[webhooks]] secrets."""
    from feeds.dispatcher import DeliveryOptions, Dispatcher
    from feeds.webhooks import Links

    settings, d = app.settings, app.settings.delivery
    options = DeliveryOptions(
        timeout_s=d.timeout_s,
        connect_timeout_s=d.connect_timeout_s,
        max_attempts=d.max_attempts,
        retry_after_max_s=d.retry_after_max_s,
        allow_private_targets=d.allow_private_targets,
        concurrency=d.concurrency,
        poll_interval_s=d.poll_interval_s,
    )
    secrets = settings.webhook_secrets

    def secret_for(sub: Any) -> str | None:  # API subscriptions carry their secret; config ones name a variable
        return sub.secret or secrets.get(sub.secret_env or "")

    links = Links(settings.hub.endpoint, settings.server.public_url)
    return Dispatcher(app.outbox, options, secret_for=secret_for, links=links, clock=app.clock)


def _start_dispatcher(app: App) -> Any:
    """Deliver webhooks from a background thread; returns the function that stops it (a delivery in
    flight finishes first)."""
    import threading

    dispatcher = _dispatcher(app)
    stop = threading.Event()
    thread = threading.Thread(target=dispatcher.run_forever, args=(stop,), name="webhook-dispatcher", daemon=True)
    thread.start()

    def stop_and_wait() -> None:
        stop.set()
        thread.join(timeout=app.settings.delivery.timeout_s + app.settings.delivery.connect_timeout_s + 5)

    return stop_and_wait


@cli.group()
def deliveries() -> None:
    """The outbound webhook delivery log: list deliveries, redeliver one."""


@deliveries.command("list")
@click.option("--status", type=click.Choice(["pending", "delivered", "failed", "dead"]), default=None,
              help="Only deliveries with this status.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def deliveries_list(ctx: click.Context, status: str | None, limit: int, as_json: bool) -> None:
    """Deliveries, newest first, with the outcome of their last attempt (URLs shown without their path)."""
    items = [item.as_dict() for item in _app(ctx).outbox.list_deliveries(status=status, limit=limit)]
    if as_json:
        _emit_json(items)
        return
    if not items:
        click.echo(f"no {status + ' ' if status else ''}deliveries")
    for d in items:
        event, sub = d["event"], d["subscription"]
        when = f"next try {d['next_attempt_at']}" if d["status"] == "pending" else (d["delivered_at"] or d["last_attempt_at"] or "")
        click.echo(
            f"{d['id']}  {d['status']:<9} {d['attempts']:>2} tries  {d['last_status_code'] or '-'!s:>3}  "
            f"#{sub['id']} {sub['format']} {sub['url']}  {event['kind']} {event['repo_id']}@{(event['sha'] or '')[:12]}  {when}"
        )
        if d["last_error"] and d["status"] != "delivered":
            click.echo(f"    {d['last_error']}")


@deliveries.command("redeliver")
@click.argument("delivery_id")
@click.option("--queue-only", is_flag=True, help="Only queue it: the running daemon (hubwatch run) sends it.")
@click.pass_context
def deliveries_redeliver(ctx: click.Context, delivery_id: str, queue_only: bool) -> None:
    """Send delivery DELIVERY_ID again now, with the same webhook-id (receivers deduplicate on it)."""
    from storage.errors import DeliveryNotFound, SubscriptionDisabled

    app = _app(ctx)
    try:
        app.outbox.redeliver(delivery_id)
    except DeliveryNotFound as err:
        ctx.exit(_fail(str(err), 3))
    except SubscriptionDisabled as err:
        ctx.exit(_fail(f"{err}: not redelivered", 1))
    if queue_only:
        click.echo(f"{delivery_id} queued; the daemon sends it")
        return
    dispatcher = _dispatcher(app)
    try:
        attempt = dispatcher.deliver_now(delivery_id)
    finally:
        dispatcher.close()
    if attempt is None:
        click.echo(f"{delivery_id} queued; another dispatcher is sending it")
    elif attempt.outcome == "delivered":
        click.echo(f"{delivery_id} delivered ({attempt.status_code}, {attempt.duration_ms} ms)")
    else:
        item = app.outbox.get_delivery(delivery_id)
        after = f"next try {item.delivery.next_attempt_at}" if item and item.delivery.status == "pending" else (
            f"now {item.delivery.status}" if item else "")
        ctx.exit(_fail(f"{delivery_id} not delivered: {attempt.error}; {after}", 1))


cli.add_command(advisories_group)


def _fail(message: str, code: int) -> int:
    click.echo(f"error: {message}", err=True)
    return code


def main(argv: list[str] | None = None) -> None:
    try:
        code = cli.main(args=argv, prog_name="hubwatch", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except HubwatchError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(err.exit_code)
    sys.exit(code if isinstance(code, int) else 0)
