"""`hubwatch advisories REPO [--json]`, `hubwatch advisories export DIR`, `hubwatch advisories recheck`."""

from __future__ import annotations

import json

import click

from tracker.cli.output import report_lines
from tracker.cli.root import app_of, repo_arg, stored_repo


class _RepoOrCommand(click.Group):
    """`advisories REPO` runs the hidden `show` command; `advisories export DIR` the subcommand."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and not args[0].startswith("-") and args[0] not in self.commands:
            args = ["show", *args]
        return super().parse_args(ctx, args)


@click.group("advisories", cls=_RepoOrCommand)
def advisories() -> None:
    """OSV advisories, loader advice and hubwatch's own advisories of a watched repo.

    \b
    hubwatch advisories REPO [--revision R] [--json]
    hubwatch advisories export DIR
    hubwatch advisories recheck [REPO ...]
    """


@advisories.command("show", hidden=True)
@click.argument("repo")
@click.option("--revision", default=None, help="A stored revision (default: the newest).")
@click.option("--json", "as_json", is_flag=True, help="The advisories as JSON.")
@click.pass_context
def show(ctx: click.Context, repo: str, revision: str | None, as_json: bool) -> None:
    """What is known to be dangerous about loading REPO: OSV matches, loader advice, own advisories."""
    repo = repo_arg(repo, param_hint="REPO")
    app = app_of(ctx)
    repo = stored_repo(app, repo)
    rev = app.store.history.revision_at(repo, revision)
    report = app.advisories.report(repo, rev)
    if as_json:
        click.echo(json.dumps(report, indent=2, default=str))
        return
    for line in report_lines(report):
        click.echo(line)


@advisories.command("export")
@click.argument("directory", type=click.Path(file_okay=False, writable=True))
@click.pass_context
def export(ctx: click.Context, directory: str) -> None:
    """Write hubwatch's own advisories to DIRECTORY as an OSV database (one JSON file per record)."""
    written = app_of(ctx).advisories.export(directory)
    records = [p for p in written if p.suffix == ".json"]
    click.echo(f"wrote {len(records)} OSV record(s) to {directory}" + (f" ({written[-1].parent.name}/)" if records else ""))


@advisories.command("recheck")
@click.argument("repos", nargs=-1)
@click.pass_context
def recheck(ctx: click.Context, repos: tuple[str, ...]) -> None:
    """Re-check watched heads against OSV now (what the daemon does daily), after judging stored pickle scans
    again if the pickle rules changed; exit 1 if OSV failed.

    REPOS: the watched repos to re-check (default: every watched repo)."""
    service = app_of(ctx).advisories
    judged = service.rejudge_pickles()
    if judged.scans:
        click.echo(f"judged {judged.scans} stored pickle scan(s) again under rules {judged.rules_version}: "
                   f"{len(judged.changed)} verdict(s) changed, {len(judged.events)} advisory event(s)"
                   + (f", {len(judged.withdrawn)} own record(s) withdrawn" if judged.withdrawn else ""))
    outcome = service.recheck([repo_arg(r) for r in repos] or None)
    click.echo(
        f"re-checked {outcome.repos} repo(s), {outcome.revisions} revision(s): {outcome.queries} queries in "
        f"{outcome.querybatch_requests} querybatch request(s), {outcome.detail_fetches} record(s) fetched, "
        f"{len(outcome.events)} advisory event(s)" + (f"; OSV failed: {outcome.error}" if outcome.error else "")
    )
    if outcome.error:
        ctx.exit(1)
