"""`hubwatch history` and `show`: reading the stored history of a repo."""

from __future__ import annotations

from typing import Any

import click

from tracker.cli import output
from tracker.cli.root import app_of, emit_json, fail, repo_arg, stored_repo


@click.command()
@click.argument("repo")
@click.option("--limit", default=None, type=click.IntRange(1), help="At most this many revisions.")
@click.option("--json", "as_json", is_flag=True, help="The revisions and their changes as JSON.")
@click.pass_context
def history(ctx: click.Context, repo: str, limit: int | None, as_json: bool) -> None:
    """Revisions of REPO, newest first, with their changes."""
    app = app_of(ctx, logs=False)
    repo = stored_repo(app, repo_arg(repo))
    revisions = app.store.history.list_revisions(repo, limit=limit)
    if not revisions and app.store.watches.get_watch(repo) is None:
        ctx.exit(fail(f"no history for {repo}: it is not watched (hubwatch watch add {repo})", 3))
    changes = app.store.history.changes_by_revision(r.id for r in revisions)  # type: ignore[misc]
    if as_json:
        from tracker.pipeline.behaviour_store import BehaviourStore
        from tracker.pipeline.template_matrix import MatrixStore

        matrices, behaviours = MatrixStore(app.store), BehaviourStore(app.store)
        emit_json([stored_json(app.store, r, changes[r.id], matrices, behaviours) for r in revisions])  # type: ignore[index]
        return
    if not revisions:
        click.echo(f"{repo}: watched, nothing ingested yet (run: hubwatch poll {repo})")
    for r in revisions:
        for line in output.revision_text(r, changes[r.id]):  # type: ignore[index]
            click.echo(line)


@click.command()
@click.argument("repo")
@click.argument("revision")
@click.option("--json", "as_json", is_flag=True, help="The revision, its files and changes as JSON.")
@click.pass_context
def show(ctx: click.Context, repo: str, revision: str, as_json: bool) -> None:
    """One stored revision of REPO with its files and changes.

    REVISION: a commit sha or a unique prefix of one (at least 4 characters)."""
    app = app_of(ctx, logs=False)
    rev = app.store.history.find_revision(stored_repo(app, repo_arg(repo)), revision)
    files = app.store.history.revision_files(rev.id)  # type: ignore[arg-type]
    changes = app.store.history.changes_by_revision([rev.id])[rev.id]  # type: ignore[list-item,index]
    if as_json:  # the differs load only here: a plain `show` or `history` reads the database alone
        from tracker.pipeline.behaviour_store import checked_revision
        from tracker.pipeline.template_matrix import MatrixStore, json_fields
        from tracker.revision.stored import load_snapshot

        scans = app.store.history.read_file_scans(f.lfs_sha256 or f.oid for f in files if f.kind == "weights")
        snapshot = load_snapshot(app.store, rev)
        matrix = MatrixStore(app.store).get(snapshot)[0]  # stored by key, else rendered now
        data = output.revision_dict(rev, changes)
        data["stop_tokens"] = output.stop_tokens_shown(data["stop_tokens"], snapshot)
        if data["tokenizer_behaviour"] is None:
            data["tokenizer_behaviour"] = checked_revision(app.store, rev)
        from tracker.pipeline.dataset_store import load_summary
        from tracker.pipeline.verify import verify_snapshot

        findings = verify_snapshot(snapshot)
        emit_json({**data, "files": [output.file_dict(f, scans.get(f.lfs_sha256 or f.oid)) for f in files],
                   "gguf_models": output.gguf_models(files, scans), **json_fields(matrix),
                   "lints": None if findings is None else [f.to_dict() for f in findings],
                   "dataset": load_summary(app.store, rev.repo_id, rev.sha)})  # a dataset's summary; None for a model
        return
    for line in output.revision_text(rev, changes):
        click.echo(line)
    click.echo(f"  files ({len(files)}):")
    for f in files:
        note = f"  ({f.note})" if f.note else ""
        click.echo(f"    {f.kind:<13} {f.size:>14,}  {f.path}{note}")



def stored_json(store: Any, rev: Any, changes: Any, matrices: Any, behaviours: Any) -> dict[str, Any]:
    """`history --json`'s revision: as `show --json` gives it, less the files; the engine matrix only as stored
    (never rendered here), "checked, unchanged" tokenizer behaviour where the revision's tokenizer changed."""
    from tracker.pipeline.behaviour_store import checked_revision
    from tracker.pipeline.template_matrix import json_fields
    from tracker.revision.stored import load_snapshot

    data = output.revision_dict(rev, changes)
    snapshot = load_snapshot(store, rev)
    data.update(json_fields(matrices.find(snapshot)[1]))
    if data["tokenizer_behaviour"] is None and any(c.kind == "tokenizer" for c in changes):
        data["tokenizer_behaviour"] = checked_revision(store, rev, behaviours)
    return data
