"""`hubwatch outdated` and `hubwatch lock`: what changed upstream since the revisions you have, and the
lock file that pins them."""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tracker.cli.root import app_of, branch_arg, emit_json, hubwatch_version, repo_arg
from tracker.cli.scan_output import scan_json, scan_pins

if TYPE_CHECKING:
    from tracker.cli.app import App
    from tracker.pins.base_lineage import BaseComparison
    from tracker.pins.cache import BadEntry, Pin
    from tracker.pins.code_scan import CodeScan
    from tracker.pins.code_write import Move
    from tracker.pins.gguf_lineage import GgufReport
    from tracker.pins.outdated import ModelReport

SEVERITY_CHOICE = click.Choice(["info", "notice", "warning", "critical"])
FORMAT_CHOICE = click.Choice(["text", "json", "markdown", "sarif"])
DEFAULT_LOCK = "hubwatch.lock"
MAX_ERROR_LINES = 20  # a lock file of bad entries gets this many lines, then a count of the rest


@click.command()
@click.option("--lock", "lock_file", type=click.Path(path_type=Path), help="A lock file (default: the local HF cache).")
@click.option("--scan", "scan_path", type=click.Path(path_type=Path),
              help="A source tree (or one file): the model revisions its code, scripts and configs pin.")
@click.option("--write", is_flag=True, help="With --scan: move each pin behind its branch head to the head, in its file.")
@click.option("--cache-dir", type=click.Path(path_type=Path), help="The HF cache (default: $HF_HUB_CACHE, $HF_HOME/hub).")
@click.option("--fail-on", type=SEVERITY_CHOICE, help="Exit 1 when a change at or above this severity happened since a pin.")
@click.option("--format", "output_format", type=FORMAT_CHOICE, default="text", show_default=True,
              help="markdown: a pull-request body or CI job summary; sarif: SARIF 2.1.0 code-scanning results on "
                   "the pins' lines.")
@click.option("--json", "as_json", is_flag=True, help="The same as --format json.")
@click.option("--gguf", "gguf_path", type=click.Path(path_type=Path),
              help="A local .gguf file: which change of its base's chat template, bos/eos or vocabulary it does not carry.")
@click.option("--local", "local_path", type=click.Path(path_type=Path),
              help="A model directory on disk (a quantization or fine-tune): which base change its chat template, "
                   "special tokens, stop set, vocabulary or generation defaults do not carry.")
@click.option("--base", "base", metavar="REPO",
              help="With --gguf or --local: the base to compare with when the header or card names none.")
@click.pass_context
def outdated(ctx: click.Context, lock_file: Path | None, scan_path: Path | None, write: bool, cache_dir: Path | None,
             fail_on: str | None, output_format: str, as_json: bool, gguf_path: Path | None, local_path: Path | None,
             base: str | None) -> None:
    """What changed upstream since the revisions you have: every model of the local HF cache, or of a
    lock file. Exit 1 when a model could not be checked, or with --fail-on when a change reached it; else 3
    when a pin's repo is gone, disabled, gated, without its branch or renamed on the Hub; a followed
    derivative's pin behind its base on a behaviour part counts as a `warning`."""
    from tracker.pins.outdated import OutdatedCheck

    if lock_file is not None and scan_path is not None:
        raise click.UsageError("give --lock FILE or --scan PATH, not both")
    if write and scan_path is None:
        raise click.UsageError("--write moves pins found by --scan PATH")
    output_format = "json" if as_json else output_format
    if gguf_path is not None:
        if lock_file is not None or scan_path is not None or write:
            raise click.UsageError("--gguf PATH checks one file: not with --lock, --scan or --write")
        ctx.exit(_outdated_gguf(ctx, gguf_path, repo_arg(base, "--base") if base else None, output_format))
    if local_path is not None:
        if lock_file is not None or scan_path is not None or write:
            raise click.UsageError("--local DIR checks one directory: not with --lock, --scan or --write")
        ctx.exit(_outdated_local(ctx, local_path, repo_arg(base, "--base") if base else None, output_format, fail_on))
    if base is not None:
        raise click.UsageError("--base REPO goes with --gguf PATH or --local DIR")
    scan = _scan(scan_path) if scan_path is not None else None
    pins, bad = scan_pins(scan) if scan is not None else _read_pins(lock_file, cache_dir)
    app = app_of(ctx)
    check = OutdatedCheck(app.store, app.hub, app.ingestor, app.settings.default_interval_s)
    reports = [check.check(pin) for pin in pins]
    _attach_lineage(app, reports, cache_dir)
    moved = _write_moves(scan, reports) if scan is not None and write else None
    if output_format == "json":
        data: dict[str, Any] = {"models": [r.to_dict() for r in reports], "bad_entries": [b.__dict__ for b in bad]}
        if scan is not None:
            data = scan_json(scan, reports, bad, moved)
        emit_json(data)
    elif output_format == "markdown":
        click.echo(_markdown(app, reports, bad, scan), nl=False)
    elif output_format == "sarif":
        emit_json(_sarif(app, reports, bad, scan, lock_file))
    else:
        _print_reports(reports, bad)
        if scan is not None:
            _print_scan(scan, moved)
    ctx.exit(outdated_exit_code(reports, bad, fail_on))


def outdated_exit_code(reports: list[ModelReport], bad: list[BadEntry], fail_on: str | None) -> int:
    """1 when an entry cannot be used, a model could not be checked for another reason than its repo's state (the
    Hub unreachable), or a change reaches `fail_on`; else 3 when a pin's repo is in a state to act on (gone,
    disabled, gated, branch missing, renamed), as `poll` exits for them; else 0."""
    if bad or any(not r.checked and r.repo_state is None for r in reports):
        return 1
    if fail_on is not None and any(r.reaches(fail_on) for r in reports):
        return 1
    return 3 if any(r.repo_state is not None for r in reports) else 0


@click.command()
@click.argument("repos", nargs=-1)
@click.option("--lock", "lock_file", type=click.Path(path_type=Path), default=DEFAULT_LOCK, show_default=True,
              help="The lock file to write.")
@click.option("--update", "update", multiple=True, metavar="REPO",
              help="Move this repo's pin (REPO or REPO@BRANCH) to its branch head, keeping the other pins.")
@click.option("--cache-dir", type=click.Path(path_type=Path), help="The HF cache (default: $HF_HUB_CACHE, $HF_HOME/hub).")
@click.option("--scan", "scan_path", type=click.Path(path_type=Path),
              help="Pin the revisions a source tree's code, scripts and configs pin (by sha).")
@click.pass_context
def lock(ctx: click.Context, repos: tuple[str, ...], lock_file: Path, update: tuple[str, ...], cache_dir: Path | None,
         scan_path: Path | None) -> None:
    """Write a lock file: REPO[@BRANCH] pinned at its branch head, or every model of the local HF cache
    at the revision you have; --update REPO moves one pin after review.

    REPOS: the models to pin, each REPO or REPO@BRANCH (default: every model of the local HF cache)."""
    from tracker.pins.lockfile import check_lock_target, read_lock, write_lock
    from tracker.pins.outdated import behaviour_since
    from tracker.pins.recorded_files import head_pin, locked

    if sum(map(bool, (repos, update, scan_path))) > 1:
        raise click.UsageError("give REPOs to write a new lock file, --update REPO to move pins, or --scan PATH: one of them")
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
            if old is not None and old.sha != new.sha:
                for change in behaviour_since(app.store, repo_id, old.sha, new.sha) or []:
                    click.echo(f"warning: {change.sha[:12]} changes what the model does: [{change.severity}] {change.kind}: "
                               f"{change.summary}", err=True)
        write_lock(lock_file, list(by_key.values()))
        return
    if repos:
        pins, bad = [head_pin(app.store, app.hub, *_repo_at(r)) for r in repos], []
    elif scan_path is not None:
        scan = _scan(scan_path)
        found, bad = scan_pins(scan)
        pins = [locked(app.store, app.hub, p) for p in _canonical_pins(app, found, bad)]
        _print_scan(scan, None)
    else:
        cached, bad = _cache_pins(cache_dir)
        pins = [locked(app.store, app.hub, p) for p in cached]
    write_lock(lock_file, pins)
    _print_bad(bad)
    click.echo(f"wrote {lock_file}: {len(pins)} model(s) pinned")
    if bad:
        ctx.exit(1)


def _outdated_gguf(ctx: click.Context, path: Path, base: str | None, output_format: str) -> int:
    """One local GGUF against its base's stored history; 1 when it could not be compared."""
    from tracker.errors import BadInput
    from tracker.pins.gguf_lineage import check_gguf, read_gguf_header

    try:
        facts, note = read_gguf_header(path)
    except BadInput as err:  # RefusedFile included: one line naming the path and why
        raise click.ClickException(str(err)) from err
    if note:
        click.echo(f"note: {path}: {note}", err=True)
    report = check_gguf(app_of(ctx).store, path, facts, base)
    _echo_comparison(path, report, output_format, {"gguf": report.to_dict()})
    return 0 if report.checked else 1


def _outdated_local(ctx: click.Context, path: Path, base: str | None, output_format: str, fail_on: str | None) -> int:
    """One model directory against its base's stored history; 1 when it could not be compared (or, with
    --fail-on warning or lower, when a part is behind)."""
    from storage.kinds import SEVERITY_RANK
    from tracker.errors import BadInput
    from tracker.family.lineage import lacking_parts, parts_of
    from tracker.pins.base_lineage import BaseComparison, compare_with_base
    from tracker.pins.local_copy import read_copy

    cached = _cache_repo_id(path)
    try:
        copy = read_copy(path, within=path.resolve().parent.parent if cached else None)
    except BadInput as err:
        raise click.ClickException(str(err)) from err
    for note in copy.notes:
        click.echo(f"note: {note}", err=True)
    app = app_of(ctx)
    followed = [r.base_repo_id for r in app.store.derivatives.rows_of(cached)] if cached else []
    base_repo_id, base_from = ((copy.bases[0], "card") if copy.bases else (base, "--base") if base
                               else (followed[0], "derivatives") if followed else (None, None))
    mine = parts_of(copy.snapshot)
    if base_repo_id is None:
        report = BaseComparison(None, None, "no_base", lines=[
            "could not tell which base this directory derives from: no README.md base_model, no GGUF "
            "general.base_model keys; give --base REPO"])
    elif not mine:
        report = BaseComparison(base_repo_id, base_from, "no_parts", lines=[
            "no behaviour part found: no tokenizer_config.json, chat_template.jinja, tokenizer.json, "
            "generation_config.json, config.json or GGUF file hubwatch could read"])
    else:
        report = compare_with_base(app.store, base_repo_id, base_from, mine, lacking_parts(copy.paths), "this copy")
    _echo_comparison(path, report, output_format, {"local": {"path": str(path), **report.to_dict(), "notes": copy.notes}})
    if not report.checked:
        return 1
    return 1 if fail_on is not None and report.behind and SEVERITY_RANK["warning"] >= SEVERITY_RANK[fail_on] else 0


def _echo_comparison(path: Path, report: GgufReport | BaseComparison, output_format: str, document: dict[str, Any]) -> None:
    """A local copy's comparison with its base (`--gguf`, `--local`): `document` as JSON, or markdown, or text."""
    if output_format == "json":
        emit_json(document)
        return
    status = report.status.replace("_", " ")
    if output_format == "markdown":
        base_words = f"against `{report.base_repo_id}`" if report.base_repo_id else "(base unknown)"
        click.echo(f"### `{path.name}` {base_words}: {status}\n")
        for line in report.lines:
            click.echo(f"- {line}")
        return
    where = f" (base {report.base_repo_id}, from {report.base_from})" if report.base_repo_id else ""
    click.echo(f"{path}{where}  {status}")
    for line in report.lines:
        click.echo(f"    {line}")


def _cache_repo_id(path: Path) -> str | None:
    """The repo id of an HF cache snapshot directory (`models--org--name/snapshots/<sha>`), else None."""
    from storage.kinds import is_repo_id

    real = path.resolve()
    folder = real.parent.parent.name
    if real.parent.name != "snapshots" or not folder.startswith("models--"):
        return None
    repo_id = folder[len("models--"):].replace("--", "/", 1)
    return repo_id if is_repo_id(repo_id) else None


def _attach_lineage(app: App, reports: list[ModelReport], cache_dir: Path | None) -> None:
    """For each pin of a followed derivative, where its copy stands against the base (tracker/pins/pin_lineage.py)."""
    from tracker.hub.client import default_cache_dir
    from tracker.pins.pin_lineage import check_pin_lineage

    where = str(cache_dir) if cache_dir is not None else default_cache_dir()
    for report in reports:
        report.lineage = check_pin_lineage(app.store, report.pin, where, app.hub, app.settings.poll.max_file_mb * 2**20)


def _canonical_pins(app: App, pins: list[Pin], bad: list[BadEntry]) -> list[Pin]:
    """The pins, a dataset's canonical short name (`datasets/wikitext`) resolved through the Hub to its org name
    (said on a line); one the Hub does not resolve is a bad entry (a lock file never holds a name without an org)."""
    from tracker.pins.cache import BadEntry
    from tracker.pins.recorded_files import canonical

    kept = []
    for pin in pins:
        resolved, line = canonical(app.hub, pin)
        if resolved is None:
            bad.append(BadEntry(pin.entry, line))
            continue
        if line:
            click.echo(line)
        if resolved.repo_id != pin.repo_id:  # a short name resolved: readers (Renovate's lookups) answer it too
            with suppress(ValueError):  # an answer that is not a dataset's ORG/NAME is not kept
                app.store.renames.record_short_name(pin.repo_id, resolved.repo_id)
        kept.append(resolved)
    return kept


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
    from tracker.hub.client import default_cache_dir
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
    if report.status == "moved":
        status["moved"] = (f"moved to {report.moved_to}: " + (f"up to date at {pin.sha[:12]}" if report.commits_behind == 0
                           else f"{report.commits_behind} commit(s) behind: {pin.sha[:12]} -> {(report.head_sha or '')[:12]}"))
    lines = [f"{name}  {status.get(report.status, report.status.replace('_', ' '))}"]
    if report.message:
        lines.append(f"    {report.message}")
    if report.advice:
        lines.append(f"    what to do: {report.advice}")
    summary = report.summary()
    if summary:
        counted = (f"{kind}: " + ", ".join(f"{n} {sev}" for sev, n in counts.items()) for kind, counts in summary.items())
        lines.append("    " + "; ".join(counted))
    for change in report.changes:
        if change.severity != "info":
            lines.append(f"    {change.sha[:12]}  [{change.severity}] {change.kind}: {change.summary}")
    if report.lineage is not None:
        lines.append(f"    {report.lineage.base_from}: {report.lineage.status.replace('_', ' ')}")
        lines += [f"      {line}" for line in report.lineage.lines]
    return lines


def _scan(path: Path) -> CodeScan:
    from tracker.pins.code_scan import scan_tree

    return scan_tree(path)


def _write_moves(scan: CodeScan, reports: list[ModelReport]) -> tuple[list[Move], list[tuple[str, str]]]:
    """Move every pin whose model is behind (or rewritten) to its branch head, in its file."""
    from tracker.pins.code_write import Move, write_moves

    heads = {(r.pin.repo_id, r.pin.sha): r.head_sha for r in reports if r.status in ("behind", "rewritten") and r.head_sha}
    moves = [Move(p, heads[(p.repo_id, p.sha)]) for p in scan.pins if (p.repo_id, p.sha) in heads]
    return write_moves(scan.root, moves)


def _print_scan(scan: CodeScan, moved: tuple[list[Move], list[tuple[str, str]]] | None) -> None:
    """Branch pins and unpinned uses on stdout; skipped files as `note:` lines on stderr; moves made."""
    for pin in scan.branch_pins:
        click.echo(f"{pin.repo_id}  follows {pin.branch!r}, not a commit: {pin.location}")
    for pin in scan.unpinned:
        click.echo(f"{pin.repo_id}  unpinned (no revision): {pin.location}")
    for path, why in scan.skipped[:MAX_ERROR_LINES]:
        click.echo(f"note: skipped {path}: {why}", err=True)
    if len(scan.skipped) > MAX_ERROR_LINES:
        click.echo(f"note: and {len(scan.skipped) - MAX_ERROR_LINES} more files skipped (--json lists them all)", err=True)
    if moved is not None:
        done, left = moved
        for move in done:
            click.echo(f"moved {move.pin.location}: {move.pin.repo_id} {move.pin.sha[:12]} -> {move.new_sha[:12]}")  # type: ignore[index]
        for location, why in left:
            click.echo(f"error: not moved {location}: {why}", err=True)


def _sarif(app: App, reports: list[ModelReport], bad: list[BadEntry], scan: CodeScan | None,
           lock_file: Path | None) -> dict[str, Any]:
    """`--format sarif`: each pin on its sites (a scan's lines of code, a lock file's entry; a cached copy by name)."""
    from tracker.pins.sarif import lock_sites, render_sarif, scan_sites

    sites, root_uri = scan_sites(scan) if scan is not None else lock_sites(lock_file, reports) if lock_file else ({}, None)
    return render_sarif(reports, sites, bad, hubwatch_version(), root_uri, app.settings.hub.endpoint)


def _markdown(app: App, reports: list[ModelReport], bad: list[BadEntry], scan: CodeScan | None) -> str:
    from tracker.cli.scan_output import scan_markdown_extra
    from tracker.pins.markdown import render_markdown

    locations = None
    extra: list[str] = []
    if scan is not None:
        locations = {}
        for pin in scan.pins:
            locations.setdefault((pin.repo_id, pin.sha), []).append(pin.location)
        extra = scan_markdown_extra(scan)
    return render_markdown(reports, bad, app.settings.hub.endpoint, app.settings.server.public_url, locations, extra)
