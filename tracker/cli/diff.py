"""`hubwatch diff`: what changed between two stored revisions of a repo, diffed again from storage."""

from __future__ import annotations

import click

from tracker.cli import output
from tracker.cli.root import app_of, emit_json, repo_arg, stored_repo
from tracker.differs import diff_snapshots
from tracker.differs.dataset import licence_said_once
from tracker.pipeline.behaviour_store import BehaviourStore
from tracker.pipeline.dataset_revision import stored_changes
from tracker.pipeline.template_matrix import MatrixStore, json_fields, render_limits
from tracker.revision.stored import load_snapshot


@click.command()
@click.argument("repo")
@click.argument("rev_a")
@click.argument("rev_b")
@click.option("--json", "as_json", is_flag=True, help="The changes as JSON.")
@click.pass_context
def diff(ctx: click.Context, repo: str, rev_a: str, rev_b: str, as_json: bool) -> None:
    """What changed in REPO between two stored revisions.

    REV_A and REV_B: the revisions compared, from REV_A to REV_B, each a commit sha or a unique prefix of one
    (at least 4 characters)."""
    app = app_of(ctx)
    repo = stored_repo(app, repo_arg(repo))
    a, b = app.store.history.find_revision(repo, rev_a), app.store.history.find_revision(repo, rev_b)
    old, new = load_snapshot(app.store, a), load_snapshot(app.store, b)
    matrices = MatrixStore(app.store, render_limits(app.settings))  # stored matrices by key; one not stored yet is rendered, not written
    engine_changes, _, _ = matrices.changes(old, new)
    BehaviourStore(app.store).load(old, new)  # stored tokenizer behaviours: an unchanged tokenizer is not run again
    # a dataset's stored changes too, its licence said once (by dataset.licence_changed, not again by the card)
    changes = licence_said_once(diff_snapshots(old, new, render_limits=matrices.limits) + engine_changes
                                + stored_changes(app.store, old, new))
    if as_json:
        before = json_fields(matrices.get(old)[0])["template_engines"]
        keys = output.behaviour_keys(changes)
        if keys["tokenizer_behaviour"] is None:
            keys["tokenizer_behaviour"] = BehaviourStore(app.store).checked(old, new)
        emit_json({"repo_id": repo, "from": a.sha, "to": b.sha, "changes": [c.to_dict() for c in changes],
                   **json_fields(matrices.get(new)[0]), "template_engines_from": before, **keys})
        return
    click.echo(f"{repo}: {a.sha[:12]} -> {b.sha[:12]}: {len(changes)} change(s)")
    for line in output.change_lines(changes, indent="  "):
        click.echo(line)
