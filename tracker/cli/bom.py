"""`hubwatch bom REPO[@REV]` and `hubwatch bom --lock FILE`: a CycloneDX 1.6 JSON bill of materials on stdout
(or --output FILE), from the revisions hubwatch stores (ingested first when they are not)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click

from storage.errors import NotStored
from tracker.cli.app import App
from tracker.cli.outdated import _print_bad, _repo_at
from tracker.cli.root import app_of, hubwatch_version
from tracker.errors import BadInput
from tracker.pins.cache import SHA_RE, BadEntry, Pin
from tracker.pins.outdated import OutdatedCheck


@click.command()
@click.argument("target", required=False, metavar="REPO[@REV]")
@click.option("--lock", "lock_file", type=click.Path(path_type=Path), help="Every model (and dataset) of this lock file.")
@click.option("--output", "-o", type=click.Path(path_type=Path), help="Write the document here (default: stdout).")
@click.option("--with-template", is_flag=True,
              help="Put each model's chat template text in its model card (its sha256 is always there).")
@click.option("--vex", "vex_only", is_flag=True,
              help="A VEX document: the vulnerabilities with their analysis for each revision, and the components "
                   "they affect, without the files and model cards.")
@click.pass_context
def bom(ctx: click.Context, target: str | None, lock_file: Path | None, output: Path | None, with_template: bool,
        vex_only: bool) -> None:
    """A CycloneDX 1.6 JSON bill of materials: REPO[@REV] (a commit sha, or a branch: its head; default main),
    or every model of a lock file (a dataset, `datasets/ORG/NAME`, is a `data` component). Exit 1 when a model
    could not be listed (named on stderr).

    Every hubwatch record about each repo is analysed for the listed revision (exploitable, resolved, not
    affected); --vex writes only those."""
    from tracker.formats.local_files import replace_file
    from tracker.pins.bom import render_bom, stored_model

    if (target is None) == (lock_file is None):
        raise click.UsageError("give REPO[@REV] or --lock FILE (one of them)")
    app = app_of(ctx)
    if lock_file is not None:
        from tracker.pins.lockfile import read_lock

        pins, bad = read_lock(lock_file)
    else:
        pins, bad = [_target_pin(app, target or "")], []
    models = []
    for pin in pins:
        revision, problem = _stored_revision(app, pin)
        if revision is None:
            bad.append(BadEntry(pin.entry, problem or "not stored"))
            continue
        models.append(stored_model(app.store, revision))
    document = render_bom(models, app.settings.hub.endpoint, app.clock(), hubwatch_version(), with_template, vex_only)
    if output is not None:
        replace_file(output, document.encode("utf-8"), what="the bill of materials")
    else:
        click.echo(document)
    _print_bad(bad)
    if bad:
        ctx.exit(1)


def _target_pin(app: App, target: str) -> Pin:
    """REPO@SHA pins that commit (followed on main); REPO@BRANCH or REPO its branch's head now."""
    repo, _, rev = target.partition("@")
    if rev and SHA_RE.match(rev):
        repo_id, _ = _repo_at(repo)
        return Pin(repo_id, "main", rev, target)
    repo_id, branch = _repo_at(target)
    if rev and not SHA_RE.match(rev) and all(c in "0123456789abcdefABCDEF" for c in rev) and len(rev) >= 7:
        raise BadInput(f"{target}: give the full 40-hex commit sha or a branch name")
    head = app.hub.head(repo_id, branch)
    return Pin(repo_id, branch, head.sha, target)


def _stored_revision(app: App, pin: Pin):  # noqa: ANN202 -- (Revision | None, problem | None)
    """The pin's revision from the stored history, ingesting the branch back to it first when needed. A repo renamed
    on the Hub is read under its new name (where its history moved, or is ingested)."""
    try:
        return app.store.history.find_revision(app.store.read_model.renamed_to(pin.repo_id) or pin.repo_id, pin.sha), None
    except NotStored:
        pass
    check = OutdatedCheck(app.store, app.hub, app.ingestor, app.settings.default_interval_s)
    report = check.check(pin)
    if not report.checked:
        return None, f"{report.status}: {report.message}"
    stored_as = replace(pin, repo_id=report.moved_to or pin.repo_id)
    if report.head_sha == pin.sha:
        app.ingestor.poll(check.watch_of(stored_as))  # the head itself: stored as the watch's baseline
    try:
        return app.store.history.find_revision(stored_as.repo_id, pin.sha), None
    except NotStored:
        return None, f"{pin.sha[:12]} could not be stored ({report.status}{': ' + report.message if report.message else ''})"
