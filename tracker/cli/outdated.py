"""`hubwatch outdated` and `hubwatch lock`: what changed upstream since the revisions you have, and the
lock file that pins them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tracker.cli.root import app_of, branch_arg, emit_json, repo_arg

if TYPE_CHECKING:
    from tracker.pins.cache import BadEntry, Pin
    from tracker.pins.outdated import ModelReport

SEVERITY_CHOICE = click.Choice(["info", "notice", "warning", "critical"])
DEFAULT_LOCK = "hubwatch.lock"
MAX_ERROR_LINES = 20  # a lock file of bad entries gets this many lines, then a count of the rest


@click.command()
@click.option("--lock", "lock_file", type=click.Path(path_type=Path), help="A lock file (default: the local HF cache).")
@click.option("--cache-dir", type=click.Path(path_type=Path), help="The HF cache (default: $HF_HUB_CACHE, $HF_HOME/hub).")
@click.option("--fail-on", type=SEVERITY_CHOICE, help="Exit 1 when a change at or above this severity happened since a pin.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def outdated(ctx: click.Context, lock_file: Path | None, cache_dir: Path | None, fail_on: str | None, as_json: bool) -> None:
    """What changed upstream since the revisions you have: every model of the local HF cache, or of a
    lock file. Exit 1 when a model could not be checked, or with --fail-on when a change reached it."""
    from tracker.pins.outdated import OutdatedCheck

    pins, bad = _read_pins(lock_file, cache_dir)
    app = app_of(ctx)
    check = OutdatedCheck(app.store, app.hub, app.ingestor, app.settings.default_interval_s)
    reports = [check.check(pin) for pin in pins]
    if as_json:
        emit_json({"models": [r.to_dict() for r in reports], "bad_entries": [b.__dict__ for b in bad]})
    else:
        _print_reports(reports, bad)
    failed = bool(bad) or any(not r.checked for r in reports)
    if failed or (fail_on is not None and any(r.reaches(fail_on) for r in reports)):
        ctx.exit(1)


@click.command()
@click.argument("repos", nargs=-1)
@click.option("--lock", "lock_file", type=click.Path(path_type=Path), default=DEFAULT_LOCK, show_default=True,
              help="The lock file to write.")
@click.option("--update", "update", multiple=True, metavar="REPO",
              help="Move this repo's pin (REPO or REPO@BRANCH) to its branch head, keeping the other pins.")
@click.option("--cache-dir", type=click.Path(path_type=Path), help="The HF cache (default: $HF_HUB_CACHE, $HF_HOME/hub).")
@click.pass_context
def lock(ctx: click.Context, repos: tuple[str, ...], lock_file: Path, update: tuple[str, ...], cache_dir: Path | None) -> None:
    """Write a lock file: REPO[@BRANCH] pinned at its branch head, or every model of the local HF cache
    at the revision you have; --update REPO moves one pin after review."""
    from tracker.pins.lockfile import check_lock_target, read_lock, write_lock
    from tracker.pins.recorded_files import head_pin, locked

    if repos and update:
        raise click.UsageError("give REPOs to write a new lock file, or --update REPO to move pins, not both")
    check_lock_target(lock_file)  # before asking the Hub anything
    app = app_of(ctx)
    if update:
        pins, bad = read_lock(lock_file)
        if bad:
            _print_bad(bad)
            raise click.ClickException(f"{lock_file} has entries that cannot be read: fix them before --update")
        by_key = {(p.repo_id, p.branch): p for p in pins}
        for repo_id, branch in (_repo_at(r) for r in update):
            new = head_pin(app.store, app.hub, repo_id, branch)
            old = by_key.get((repo_id, branch))
            by_key[(repo_id, branch)] = new
            click.echo(f"{repo_id}@{branch}: {old.sha[:12] if old else 'not pinned'} -> {new.sha[:12]}")
        write_lock(lock_file, list(by_key.values()))
        return
    if repos:
        pins, bad = [head_pin(app.store, app.hub, *_repo_at(r)) for r in repos], []
    else:
        cached, bad = _cache_pins(cache_dir)
        pins = [locked(app.store, app.hub, p) for p in cached]
    write_lock(lock_file, pins)
    _print_bad(bad)
    click.echo(f"wrote {lock_file}: {len(pins)} model(s) pinned")
    if bad:
        ctx.exit(1)


def _repo_at(value: str) -> tuple[str, str]:
    """`org/name` or `org/name@branch` as (repo id, branch)."""
    repo, _, branch = value.partition("@")
    return repo_arg(repo, "REPO"), branch_arg(branch or "main", "REPO")


def _read_pins(lock_file: Path | None, cache_dir: Path | None) -> tuple[list[Pin], list[BadEntry]]:
    if lock_file is not None:
        from tracker.pins.lockfile import read_lock

        return read_lock(lock_file)
    return _cache_pins(cache_dir)


def _cache_pins(cache_dir: Path | None) -> tuple[list[Pin], list[BadEntry]]:
    from tracker.hub import default_cache_dir
    from tracker.pins.cache import pins_from_cache
    from tracker.pins.cache_scan import scan_cache

    scan = scan_cache(cache_dir or default_cache_dir())
    return pins_from_cache(scan.revisions, scan.problems)


def _print_bad(bad: list[BadEntry]) -> None:
    """One `error:` line per bad entry, the first MAX_ERROR_LINES of them, then how many more (--json lists all)."""
    for entry in bad[:MAX_ERROR_LINES]:
        click.echo(f"error: {entry.entry}: {entry.message}", err=True)
    if len(bad) > MAX_ERROR_LINES:
        click.echo(f"error: and {len(bad) - MAX_ERROR_LINES} more entries that cannot be used (--json lists them all)", err=True)


def _print_reports(reports: list[ModelReport], bad: list[BadEntry]) -> None:
    if not reports and not bad:
        click.echo("no models found")
    for report in reports:
        for line in _report_lines(report):
            click.echo(line)
    _print_bad(bad)


def _report_lines(report: ModelReport) -> list[str]:
    pin = report.pin
    name = f"{pin.repo_id}@{pin.branch}" + (" (detached snapshot: no ref, compared with main)" if pin.detached else "")
    status: dict[str, Any] = {
        "up_to_date": f"up to date at {pin.sha[:12]}",
        "behind": f"{report.commits_behind} commit(s) behind: {pin.sha[:12]} -> {(report.head_sha or '')[:12]}",
    }
    lines = [f"{name}  {status.get(report.status, report.status.replace('_', ' '))}"]
    if report.message:
        lines.append(f"    {report.message}")
    summary = report.summary()
    if summary:
        counted = (f"{kind}: " + ", ".join(f"{n} {sev}" for sev, n in counts.items()) for kind, counts in summary.items())
        lines.append("    " + "; ".join(counted))
    for change in report.changes:
        if change.severity != "info":
            lines.append(f"    {change.sha[:12]}  [{change.severity}] {change.kind}: {change.summary}")
    return lines
