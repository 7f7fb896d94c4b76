"""`hubwatch advisories REPO [--json]`, `hubwatch advisories export DIR`, `hubwatch advisories recheck`.

The group is registered by tracker/cli.py (`cli.add_command(advisories)`); it reaches the advisory service
as `app.advisories` through the app factory the root command puts in `ctx.obj`.
"""

from __future__ import annotations

import json
from typing import Any

import click

from storage.errors import AmbiguousRevision, RevisionNotStored
from tracker.config import validate_repo_id
from tracker.errors import ConfigError

_MARK = {"repo": "!!", "unclassified": "? ", "runtime": "  "}


class _RepoOrCommand(click.Group):
    """`advisories REPO` runs the hidden `show` command; `advisories export DIR` the subcommand."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and not args[0].startswith("-") and args[0] not in self.commands:
            args = ["show", *args]
        return super().parse_args(ctx, args)


def _service(ctx: click.Context) -> Any:
    app = ctx.ensure_object(dict)["app_factory"]()
    return app, app.advisories


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
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def show(ctx: click.Context, repo: str, revision: str | None, as_json: bool) -> None:
    """What is known to be dangerous about loading REPO: OSV matches, loader advice, own advisories."""
    try:
        repo = validate_repo_id(repo)
    except ConfigError as err:
        raise click.BadParameter(str(err), param_hint="REPO") from err
    app, service = _service(ctx)
    try:
        rev = app.store.find_revision(repo, revision) if revision else next(iter(app.store.list_revisions(repo, limit=1)), None)
    except (RevisionNotStored, AmbiguousRevision) as err:
        click.echo(f"error: {err}", err=True)
        ctx.exit(3)
    if rev is None:
        click.echo(f"error: no stored revision of {repo} (watch it and poll: hubwatch watch add {repo})", err=True)
        ctx.exit(3)
    report = service.report(repo, rev)
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
    _, service = _service(ctx)
    written = service.export(directory)
    records = [p for p in written if p.suffix == ".json"]
    click.echo(f"wrote {len(records)} OSV record(s) to {directory}" + (f" ({written[-1].parent.name}/)" if records else ""))


@advisories.command("recheck")
@click.argument("repos", nargs=-1)
@click.pass_context
def recheck(ctx: click.Context, repos: tuple[str, ...]) -> None:
    """Re-check watched heads against OSV now (what the daemon does daily); exit 1 if OSV failed."""
    _, service = _service(ctx)
    outcome = service.recheck([validate_repo_id(r) for r in repos] or None)
    click.echo(
        f"re-checked {outcome.repos} repo(s), {outcome.revisions} revision(s): {outcome.queries} queries in "
        f"{outcome.querybatch_requests} querybatch request(s), {outcome.detail_fetches} record(s) fetched, "
        f"{len(outcome.events)} advisory event(s)" + (f"; OSV failed: {outcome.error}" if outcome.error else "")
    )
    if outcome.error:
        ctx.exit(1)


def report_lines(report: dict[str, Any]) -> list[str]:
    """The plain-text view of `AdvisoryService.report`."""
    checked = report.get("checked_at") or "never"
    lines = [f"{report['repo_id']} @ {report['sha'][:12]} (committed {report['committed_at'][:10]}, checked {checked})"]
    advice = report.get("advice")
    if advice is None:
        lines.append("  not checked yet (run: hubwatch advisories recheck)")
    else:
        lines.append(f"  loader advice: {advice['sentence']}")
        for package in advice["packages"]:
            if not package["because"] and not package["unfixed"]:
                continue
            lines.append(f"    {package['package']} {package['floor'] or '(no fixed release sets a floor)'}")
            for b in package["because"] + package["unfixed"]:
                lines.append(f"      {b['floor']:<18} {b['key']:<22} {b['trigger']}: {b['summary'][:80]}")
            lines += [f"      note: {n}" for n in package["notes"]]
        if advice["runtime_only"]:
            lines.append(f"    runtime-only, not counted: {', '.join(advice['runtime_only'])}")
        if advice["unclassified"]:
            lines.append(f"    no rule matched, not counted: {', '.join(advice['unclassified'])}")
        lines += [f"    note: {n}" for n in advice["notes"]]
    matches = report.get("osv_matches") or []
    lines.append(f"  OSV matches for the versions this revision names ({len(matches)}):")
    for m in matches:
        others = ", ".join(i for i in m["ids"] if i != m["advisory"])
        lines.append(
            f"    {_MARK.get(m['verdict'], '  ')} {m['advisory']}" + (f" ({others})" if others else "")
            + f"  {m['package']} {m['version']}  {m['status']}  [{m['verdict']}: {m['rule'] or '-'}]  {m['summary'][:70]}"
        )
    own = report.get("own_advisories") or []
    lines.append(f"  hubwatch advisories ({len(own)}):")
    for record in own:
        ours = record["database_specific"]["hubwatch"]
        state = f"fixed at {ours['fixed_sha'][:12]}" if ours.get("fixed_sha") else "open"
        lines.append(f"    {record['id']}  {ours['severity']:<11} {record['summary'][len(report['repo_id']) + 2:][:80]}"
                     f"  introduced {ours['introduced_sha'][:12]}, {state}")  # fmt: skip
    facts = report.get("facts") or {}
    problems = facts.get("problems") or []
    if problems:
        lines.append(f"  could not be read ({len(problems)}):")
        lines += [f"    {p['reason']}" for p in problems]
    if report.get("pending"):
        lines.append(f"  OSV pending: {report['pending']} (asked again later)")
    return lines
