"""The `hubwatch` command: the composition root that wires config, storage, the Hub and the daemon.

Exit codes scripts can trust: 0 success; 1 a repo failed or an operation did; 2 bad usage;
3 unknown repo, revision or watch; 4 bad configuration or database. Errors are mapped to exit codes
once, by the root group (`tracker/cli/root.py`); commands raise and do not translate.
"""

from __future__ import annotations

import sys

import click

from tracker.cli.advisories import advisories
from tracker.cli.daemon import run, serve
from tracker.cli.deliveries import deliveries
from tracker.cli.demo import demo
from tracker.cli.estimate import estimate
from tracker.cli.feed import feed
from tracker.cli.history import diff, history, show
from tracker.cli.outdated import lock, outdated
from tracker.cli.root import cli
from tracker.cli.watch import poll, watch
from tracker.errors import HubwatchError

for _command in (
    watch, poll, run, history, show, diff, estimate, serve, feed, demo, deliveries, advisories, outdated, lock
):
    cli.add_command(_command)


def main(argv: list[str] | None = None) -> None:
    try:
        code = cli.main(args=argv, prog_name="hubwatch", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except HubwatchError as err:  # raised outside a command: loading the settings for --config
        click.echo(f"error: {err}", err=True)
        sys.exit(err.exit_code)
    sys.exit(code if isinstance(code, int) else 0)


__all__ = ["cli", "main"]
