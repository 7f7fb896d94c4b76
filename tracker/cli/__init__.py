"""The `hubwatch` command: the composition root that wires config, storage, the Hub and the daemon.

Exit codes scripts can trust: 0 success; 1 a repo failed or an operation did; 2 bad usage;
3 unknown repo, revision or watch; 4 bad configuration or database. Errors are mapped to exit codes
once, by the root group (`tracker/cli/root.py`); commands raise and do not translate. The root group
imports a command's module only when that command runs (its table is `root.COMMANDS`).
"""

from __future__ import annotations

import sys

import click

from tracker.cli.root import cli
from tracker.errors import HubwatchError


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
