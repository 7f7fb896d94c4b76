"""`hubwatch advisories REPO [--json]`, `hubwatch advisories export DIR`, `hubwatch advisories recheck`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

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
    hubwatch advisories export --osv-zip FILE [--since TIMESTAMP]
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
@click.argument("directory", required=False, type=click.Path(file_okay=False, writable=True))
@click.option("--osv-zip", "osv_zip", metavar="FILE", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the offline OSV database instead: FILE as osv.dev's per-ecosystem all.zip (one <ID>.json per "
                   "record, as the OSV API serves them) and modified_id.csv beside it (<modified>,<id>, newest first).")
@click.option("--since", metavar="TIMESTAMP", default=None,
              help="With --osv-zip: only the records modified at or after TIMESTAMP (RFC 3339, e.g. "
                   "2026-11-01T00:00:00Z; without an offset, UTC), for an incremental export.")
@click.pass_context
def export(ctx: click.Context, directory: str | None, osv_zip: str | None, since: str | None) -> None:
    """Write hubwatch's own advisories to DIRECTORY as an OSV database (one JSON file per record), or with
    --osv-zip FILE as osv.dev's offline database (all.zip and modified_id.csv)."""
    if (directory is None) == (osv_zip is None):
        raise click.UsageError("name a DIRECTORY or --osv-zip FILE (one of them)")
    if since is not None and osv_zip is None:
        raise click.UsageError("--since goes with --osv-zip")
    if osv_zip is not None:
        _export_zip(ctx, Path(osv_zip), _timestamp(since) if since is not None else None)
        return
    written = app_of(ctx).advisories.export(directory)
    records = [p for p in written if p.suffix == ".json"]
    click.echo(f"wrote {len(records)} OSV record(s) to {directory}" + (f" ({written[-1].parent.name}/)" if records else ""))


def _timestamp(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as err:
        raise click.BadParameter(f"{text!r} is not an RFC 3339 timestamp (e.g. 2026-11-01T00:00:00Z)", param_hint="--since") from err
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _export_zip(ctx: click.Context, path: Path, since: datetime | None) -> None:
    from feeds.osv.archive import write_archive
    from feeds.osv.database import OsvDatabase

    app = app_of(ctx)
    pages_url = app.settings.server.public_url.rstrip("/") or None  # the revision pages' links need a known address
    records = OsvDatabase(app.store).records_since(since, pages_url)
    try:
        archive = write_archive(records, path)
    except OSError as err:
        raise click.ClickException(f"cannot write {path}: {err.strerror or err}") from err
    scope = f" modified since {since.strftime('%Y-%m-%dT%H:%M:%SZ')}" if since else ""
    click.echo(f"wrote {archive.records} OSV record(s){scope} to {archive.zip_path} (index: {archive.index_path})")


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
