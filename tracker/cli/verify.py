"""`hubwatch verify`: the structure verifier's findings on a stored revision of a watched repo."""

from __future__ import annotations

import re

import click

from estimator.lint_rules import SEVERITIES
from estimator.lints import Finding, worst
from storage.kinds import SEVERITY_RANK
from tracker.cli.root import app_of, emit_json, repo_arg
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
    other; exit 1 when a finding reaches --fail-on, 3 for an unknown repo or revision, else 0."""
    repo_id = repo_arg(repo)
    app = app_of(ctx)
    stored = app.store.history.revision_at(repo_id, revision)
    findings = verify_snapshot(load_snapshot(app.store, stored))
    reached = findings is not None and any(SEVERITY_RANK[f.severity] >= SEVERITY_RANK[fail_on] for f in findings)
    if as_json:
        emit_json({"repo_id": repo_id, "sha": stored.sha, "verified": findings is not None,
                   "worst": worst(findings or []), "fail_on": fail_on,
                   "findings": [f.to_dict() for f in findings or []]})
    else:
        click.echo(f"{repo_id} at {stored.sha[:12]}")
        click.echo(render_findings(findings))
    ctx.exit(1 if reached else 0)


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
