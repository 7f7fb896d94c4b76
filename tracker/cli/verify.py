"""`hubwatch verify`: the structure verifier's findings on a stored revision of a watched repo."""

from __future__ import annotations

import re

import click

from estimator.lint_rules import SEVERITIES
from estimator.lints import Finding, worst
from storage.kinds import SEVERITY_RANK
from tracker.cli.root import app_of, emit_json
from tracker.pipeline.verify import verify_snapshot
from tracker.revision.stored import load_snapshot

MARKS = {"critical": "CRIT", "warning": "WARN", "notice": "NOTE", "info": "INFO"}
# Upstream text (a token, a config value) in a finding reaches the terminal with its control characters escaped.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@click.command()
@click.argument("repo")
@click.option("--revision", default=None, help="A stored revision (default: the newest).")
@click.option("--fail-on", type=click.Choice(SEVERITIES), default="warning", show_default=True,
              help="Exit 1 when a finding is at or above this severity.")
@click.option("--json", "as_json", is_flag=True, help="The findings as JSON.")
@click.pass_context
def verify(ctx: click.Context, repo: str, revision: str | None, fail_on: str, as_json: bool) -> None:
    """The structure verifier on a stored revision of REPO: config, weight headers and tokenizer checked against each
    other; exit 1 when a finding reaches --fail-on, 3 for an unknown repo or revision, else 0. A repo hubwatch does
    not watch is read from the Hub at REV (a branch or a 40-hex sha; default main), and nothing is stored."""
    from tracker.cli.estimate import _repo_and_revision, _watched

    repo_id, revision = _repo_and_revision(repo, revision)
    app = app_of(ctx)
    if _watched(app, repo_id):
        stored = app.store.history.revision_at(repo_id, revision)
        findings = verify_snapshot(load_snapshot(app.store, stored))
    else:
        stored = unwatched_snapshot(app, repo_id, revision)
        findings = verify_snapshot(stored)
    reached = findings is not None and any(SEVERITY_RANK[f.severity] >= SEVERITY_RANK[fail_on] for f in findings)
    if as_json:
        emit_json({"repo_id": repo_id, "sha": stored.sha, "verified": findings is not None,
                   "worst": worst(findings or []), "fail_on": fail_on,
                   "findings": [f.to_dict() for f in findings or []]})
    else:
        click.echo(f"{repo_id} at {stored.sha[:12]}")
        click.echo(render_findings(findings))
    ctx.exit(1 if reached else 0)


def unwatched_snapshot(app, repo_id: str, revision: str | None):  # noqa: ANN001, ANN201 -- App, Snapshot
    """A revision of a repo hubwatch does not watch, fetched from the Hub as an ingest would (tracked files, weight
    headers by range), held in memory and never stored; ``.sha`` is its commit."""
    from tracker.errors import HubError
    from tracker.hub.remote_estimate import resolve_sha
    from tracker.pipeline.snapshot_io import fetch_snapshot

    try:
        sha = resolve_sha(app.hub, repo_id, revision or "main")
        fetched = fetch_snapshot(app.hub, app.store, repo_id, sha, app.settings.poll.max_file_mb * 1024 * 1024)
    except HubError as err:
        err.args = (f"no stored revision of {repo_id} (not watched), and from the Hub: {err}", *err.args[1:])
        raise
    return fetched.snapshot


def render_findings(findings: list[Finding] | None) -> str:
    """The findings as text: one block each (severity, id, sentence, evidence, fix), control characters escaped."""
    if findings is None:
        return "no config.json in this revision: nothing to verify"
    if not findings:
        return "no findings: the config, weights and tokenizer agree"
    lines = []
    for f in findings:
        lines.append(f"{MARKS[f.severity]} {f.id}: {f.message}")
        evidence = ", ".join(f"{k}={v}" for k, v in f.evidence.items() if k != "where")
        if evidence:
            lines.append(f"     evidence: {evidence}")
        lines.append(f"     fix: {f.fix}")
    return CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", "\n".join(lines))
