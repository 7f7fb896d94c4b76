"""`hubwatch feed`: a feed document on stdout, byte for byte what the server answers."""

from __future__ import annotations

import sys

import click

from feeds.views.feed import FeedBuilder, FeedRequest
from storage.kinds import SEVERITIES, is_filter_kind
from tracker.cli.root import app_of, fail, repo_arg, stored_repo


@click.command()
@click.argument("repo", required=False)
@click.option("--all", "all_repos", is_flag=True, help="Every watched repo.")
@click.option("--org", default=None, help="Every watched repo of this org or user.")
@click.option("--security", is_flag=True, help="Security-relevant events of every repo.")
@click.option("--format", "fmt", type=click.Choice(["atom", "rss"]), default="atom", show_default=True,
              help="The feed format.")
@click.option("--kind", "kinds", multiple=True, help="Only this kind (repeatable): chat_template, revision.ingested, ...")
@click.option("--min-severity", type=click.Choice(SEVERITIES), default=None, help="Only events at or above this severity.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 1000), help="Newest entries shown.")
@click.pass_context
def feed(
    ctx: click.Context, repo: str | None, all_repos: bool, org: str | None, security: bool, fmt: str,
    kinds: tuple[str, ...], min_severity: str | None, limit: int,
) -> None:
    """The feed document on stdout: byte for byte what the server answers at [server] public_url.

    REPO: the watched repo whose feed is written; or one of --all, --org ORG, --security instead."""
    if sum([repo is not None, all_repos, org is not None, security]) != 1:
        raise click.UsageError("give exactly one of REPO, --all, --org ORG or --security")
    unknown = [k for k in kinds if not is_filter_kind(k)]
    if unknown:
        raise click.BadParameter(f"unknown kind(s): {', '.join(unknown)}", param_hint="--kind")
    app = app_of(ctx)
    queries = app.store.read_model
    if repo is not None:
        repo = stored_repo(app, repo_arg(repo))
        if not queries.repo_known(repo):
            ctx.exit(fail(f"no feed for {repo}: it is not watched (hubwatch watch add {repo})", 3))
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
