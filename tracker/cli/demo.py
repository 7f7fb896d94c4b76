"""`hubwatch demo`: replay the bundled Hub histories commit by commit and show what a user would see."""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import click

from tracker.cli import output
from tracker.cli.app import App
from tracker.cli.logs import configure_logging
from tracker.config import settings_from_mapping
from tracker.standins.osv import OsvFake
from tracker.standins.replay.control import BUNDLED_ROOT, ReplayServer

Echo = Callable[[str], None]


@click.command()
@click.option("--data-dir", default=None, help="Keep the demo's database here (default: a temporary folder).")
@click.option("--delay", default=0.0, type=click.FloatRange(0), help="Seconds to pause between steps.")
def demo(data_dir: str | None, delay: float) -> None:
    """The whole pipeline offline, against the bundled Hub replay."""
    run_demo(data_dir=data_dir, delay_s=delay, echo=click.echo)


def run_demo(data_dir: str | None = None, delay_s: float = 0.0, echo: Echo = print) -> App:
    """Watch every bundled repo from its first commit, then reveal one commit at a time and poll; then the Hub deletes
    a repo, restores it and renames another, each polled."""
    folder = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="hubwatch-demo-"))
    folder.mkdir(parents=True, exist_ok=True)
    with ReplayServer(roots=[BUNDLED_ROOT]) as server, OsvFake() as osv:
        settings = settings_from_mapping(
            {
                "hub": {"endpoint": server.endpoint},
                "osv": {"api_url": osv.endpoint},
                "storage": {"url": f"sqlite:///{folder / 'hubwatch.db'}"},
                "log": {"level": "warning"},
            },
            env={},
            source="demo",
        )
        configure_logging(settings.log)
        app = App(settings)
        repos = server.repo_ids()
        echo(f"hubwatch demo: replaying {len(repos)} recorded Hub repos from {server.endpoint}")
        echo(f"advisories from the bundled OSV fake at {osv.endpoint}")
        echo(f"database: {folder / 'hubwatch.db'}\n")
        for repo_id in repos:
            server.set_head(repo_id, 1)
            app.store.watches.add_watch(repo_id, "main", settings.default_interval_s, source="demo")
        _poll_and_show(app, echo)
        step = 0
        while True:
            moved = [repo_id for repo_id in repos if server.advance(repo_id)]
            if not moved:
                break
            step += 1
            time.sleep(delay_s)
            echo(f"--- step {step}: upstream moved in {', '.join(moved)}")
            _poll_and_show(app, echo, moved)
        _lifecycle(app, server, repos, echo, delay_s)
        _summary(app, repos, echo, folder)
    return app


# What the Hub does to repos themselves, shown on two of the bundled ones (the first of each pair that is served).
DELETED = ("sentence-transformers/all-MiniLM-L6-v2",)
RENAMED = (("microsoft/phi-2", "microsoft/phi-2-renamed"),)


def _lifecycle(app: App, server: ReplayServer, repos: list[str], echo: Echo, delay_s: float) -> None:
    """The Hub deletes a repo, then restores it, and renames another: each poll says what happened (the events go
    out through every channel as for any change; docs/concepts/repo-lifecycle.md)."""
    deleted = next((r for r in DELETED if r in repos), None)
    if deleted is not None:
        for state, words in (("deleted", "the Hub deletes"), ("active", "the Hub restores")):
            time.sleep(delay_s)
            echo(f"--- {words} {deleted}")
            server.set_state(deleted, state)
            _poll_and_show(app, echo, [deleted])
    for old, new in RENAMED:
        if old in repos:
            time.sleep(delay_s)
            echo(f"--- the owner renames {old} to {new}")
            server.rename(old, new)
            _poll_and_show(app, echo, [old])


def _poll_and_show(app: App, echo: Echo, repo_ids: list[str] | None = None) -> None:
    for outcome in app.poller.poll(repo_ids or []):
        for line in output.outcome_text(outcome):
            echo(line)
    echo("")


def _summary(app: App, repos: list[str], echo: Echo, folder: Path) -> None:
    kinds: Counter[str] = Counter()
    revisions = 0
    for repo_id in app.store.history.repo_ids():  # a renamed repo's history is under its new name now
        rows = app.store.history.list_revisions(repo_id)
        revisions += len(rows)
        for changes in app.store.history.changes_by_revision(r.id for r in rows).values():  # type: ignore[misc]
            kinds.update(c.kind for c in changes)
    echo(f"done: {revisions} revisions stored; changes by kind: "
         + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    config = folder / "hubwatch.toml"
    config.write_text(f'[storage]\nurl = "sqlite:///{folder / "hubwatch.db"}"\n', encoding="utf-8")
    echo(f"explore the history: hubwatch --config {config} history {repos[0]}")
