"""`hubwatch watch add|list|remove` and `hubwatch poll`: the watch list and one ingest pass now."""

from __future__ import annotations

import click

from tracker.cli.root import app_of, branch_arg, emit_json, fail, repo_arg

_NO_WATCHES = "no repos watched (add one with: hubwatch watch add ORG/NAME)"


@click.group()
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
    from tracker.config import parse_interval
    from tracker.errors import ConfigError

    repo, branch = repo_arg(repo), branch_arg(branch)
    app = app_of(ctx)
    try:
        interval_s = parse_interval(interval, "--interval") if interval else app.settings.default_interval_s
    except ConfigError as err:
        raise click.BadParameter(str(err), param_hint="--interval") from err
    head = None if no_check else app.hub.head(repo, branch)
    app.store.add_watch(repo, branch, interval_s, source="cli", backfill=backfill)
    where = f"at {head.sha[:12]}" if head else "(not checked)"
    gated = f"; the repo is gated ({head.gated}): set ${app.settings.hub.token_env}" if head and head.gated else ""
    click.echo(f"watching {repo}@{branch} every {interval_s}s, head {where}{gated}")


@watch.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def watch_list(ctx: click.Context, as_json: bool) -> None:
    """List watched repos with the outcome of their last poll."""
    from tracker.cli import output

    watches = app_of(ctx, logs=False).store.list_watches()
    if as_json:
        emit_json([output.watch_dict(w) for w in watches])
        return
    if not watches:
        click.echo(_NO_WATCHES)
    for w in watches:
        click.echo(output.watch_text(w))


@watch.command("remove")
@click.argument("repo")
@click.option("--branch", default=None, help="Only this branch (default: every watched branch).")
@click.pass_context
def watch_remove(ctx: click.Context, repo: str, branch: str | None) -> None:
    """Stop watching REPO; its stored history stays queryable."""
    repo, branch = repo_arg(repo), (branch_arg(branch) if branch is not None else None)
    removed = app_of(ctx, logs=False).store.remove_watch(repo, branch)
    if not removed:
        ctx.exit(fail(f"{repo} is not watched", 3))
    click.echo(f"stopped watching {repo} ({removed} branch{'es' if removed > 1 else ''}); history kept")


@click.command()
@click.argument("repos", nargs=-1)
@click.option("--backfill", default=None, type=click.IntRange(0, 10_000),
              help="For watches polled for the first time: also ingest this many earlier commits.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def poll(ctx: click.Context, repos: tuple[str, ...], backfill: int | None, as_json: bool) -> None:
    """One ingest pass now, then exit (exit code 1 if a repo failed)."""
    from tracker.cli import output

    app = app_of(ctx)
    outcomes = app.poll([repo_arg(r) for r in repos], backfill=backfill)
    if as_json:
        emit_json([output.outcome_dict(o) for o in outcomes])
    else:
        if not outcomes:
            click.echo(_NO_WATCHES)
        for o in outcomes:
            for line in output.outcome_text(o):
                click.echo(line)
    if any(o.failed for o in outcomes):
        ctx.exit(1)
