"""The CLI reference's command table: every command and subcommand of the root group with the summary
`--help` lists it with, linked to its section (which mkdocs-click writes from the same click objects).

Rendered before mkdocs-click runs on the page, it also loads every command of the lazy root group, so
mkdocs-click (which lists a group's loaded commands when it has any) documents them all.
"""

from __future__ import annotations

from collections.abc import Iterator

import click
from markdown.extensions.toc import slugify

from refdocs.markdown import cell, table
from tracker.cli import cli

PROG = "hubwatch"
SUMMARY_CHARS = 400  # long enough that click never shortens a first sentence


def walk(command: click.Command, ctx: click.Context | None = None) -> Iterator[tuple[click.Context, click.Command]]:
    """Every command under `command` (itself first), each with its context, hidden ones included."""
    ctx = ctx or click.Context(command, info_name=PROG)
    yield ctx, command
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None:
                yield from walk(sub, click.Context(sub, parent=ctx, info_name=name))


def anchor(ctx: click.Context) -> str:
    """The id mkdocs-click gives a command's heading (with attr_list): its path, slugified."""
    return slugify(ctx.command_path, "-")


def render() -> str:
    rows = [(f"[`{ctx.command_path}`](#{anchor(ctx)})", cell(command.get_short_help_str(SUMMARY_CHARS)))
            for ctx, command in walk(cli) if ctx.parent is not None and not command.hidden]
    return table(("Command", "What it does"), rows)
