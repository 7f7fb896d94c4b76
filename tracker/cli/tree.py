"""`hubwatch tree REPO`: a base's followed derivatives, and where each behaviour part of each stands."""

from __future__ import annotations

import click

from storage.errors import NotStored
from tracker.cli.root import app_of, emit_json, repo_arg
from tracker.family.lineage import PARTS

MARKS = {"carries": "carries", "behind": "behind", "diverged": "diverged", "absent": "-",
         "not_in_format": "not in this format"}


@click.command()
@click.argument("repo")
@click.option("--json", "as_json", is_flag=True, help="The whole tree as JSON.")
@click.pass_context
def tree(ctx: click.Context, repo: str, as_json: bool) -> None:
    """A base's derivatives (relation, publisher, downloads) and, per behaviour part, whether each carries
    the base's latest, is behind it (by how many changes) or diverged.

    REPO: a watched base model whose derivatives are followed (watch add --derivatives)."""
    repo = repo_arg(repo)
    app = app_of(ctx, logs=False)
    found = app.store.derivatives.tree(repo)
    if found is None:
        raise NotStored(f"{repo}'s derivatives are not followed (hubwatch watch add {repo} --derivatives)")
    if as_json:
        emit_json(found)
        return
    rows = found["derivatives"]
    click.echo(f"{repo}: {len(rows)} derivatives followed ({', '.join(found['relations'])}; at most {found['limit']})")
    for row in rows:
        head = (row["head_sha"] or "")[:12] or "not checked"
        click.echo(f"  {row['repo_id']}  {row['relation']}  by {row['publisher']}  {row['downloads']:,} downloads  @{head}")
        for part in PARTS:
            state = row["parts"].get(part)
            if not state or state["status"] == "absent":
                continue
            words = MARKS[state["status"]]
            if state["status"] == "behind":
                words += f" by {state['behind']} (matches {str(state['matched_sha'])[:12]})"
            elif state["status"] == "carries" and state.get("compared"):
                words += f" (compared on {', '.join(state['compared'])})"
            elif state["status"] == "carries" and not state.get("exact", True):
                words += " (after whitespace normalisation)"
            click.echo(f"      {part:15} {words}")
        if row["problem"]:
            click.echo(f"      problem: {row['problem']}")
    for problem in found["report"].get("problems", []):
        click.echo(f"note: {problem}")
