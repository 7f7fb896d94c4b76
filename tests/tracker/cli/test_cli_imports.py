"""The CLI starts fast: each command imports only what it uses (checked in fresh processes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tracker.cli import cli
from tracker.cli.root import COMMANDS, load_command

ROOT = Path(__file__).resolve().parents[3]
# What a command that reads the database must not load: the HTTP stack, the Hub client, the differs,
# the advisory service and its HTTP client, Alembic once the schema is current, and structlog (only
# commands that log configure it).
HEAVY = ("fastapi", "uvicorn", "starlette", "huggingface_hub", "tracker.hub.client", "tracker.differs", "deepdiff",
         "tracker.advisories.service", "httpx", "feedgen", "alembic", "estimator", "structlog")
# --help needs click alone.
DATABASE = ("sqlmodel", "sqlalchemy", "pydantic")

_PROBE = """
import atexit, json, sys
atexit.register(lambda: open(sys.argv[1], "w").write(json.dumps(sorted(sys.modules))))
from tracker.cli import main
main(sys.argv[2:])
"""


def _modules_after(tmp_path: Path, *args: str) -> set[str]:
    out = tmp_path / "modules.json"
    env = {"HUBWATCH_STORAGE_URL": f"sqlite:///{tmp_path / 'h.db'}", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    subprocess.run([sys.executable, "-c", _PROBE, str(out), *args], cwd=ROOT, env=env, capture_output=True, check=False)
    return set(json.loads(out.read_text()))


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if n in modules)


def test_importing_the_cli_loads_click_alone(tmp_path):
    """`import tracker.cli` (and so `hubwatch --help`) loads neither the database nor any heavy stack."""
    modules = _modules_after(tmp_path, "--help")
    assert "click" in modules
    assert _loaded(modules, HEAVY + DATABASE) == []


@pytest.mark.parametrize("args", [("watch", "list"), ("history", "org/model"), ("show", "org/model", "abcd")])
def test_database_reads_load_no_heavy_stack(tmp_path, args):
    """Commands that only read the database (after the first run migrated it) load no heavy stack."""
    _modules_after(tmp_path, "watch", "add", "org/model", "--no-check")  # creates and migrates the database
    modules = _modules_after(tmp_path, *args)
    assert "sqlmodel" in modules  # it did reach the database
    assert _loaded(modules, HEAVY) == []


# The table modules a `watch list` never needs (storage/models/: each table costs milliseconds to define).
NOT_WATCH_SIDE = ("storage.models.history", "storage.models.outbox", "storage.models.advisories", "storage.models.workers")
_CONFIG = """
[[watch]]
repo = "org/from-config"

[[webhooks]]
url = "https://hooks.example.com/hubwatch"
format = "generic"
secret_env = "HUBWATCH_TEST_SECRET"
"""


def test_watch_list_defines_the_watch_side_tables_alone(tmp_path):
    """`watch list`, the config's watches and [[webhooks]] synced as at every start, defines the watch and
    subscription tables and none of the history, outbox, advisory or worker ones (nor imports their stores)."""
    config = tmp_path / "hubwatch.toml"
    config.write_text(_CONFIG, encoding="utf-8")
    _modules_after(tmp_path, "--config", str(config), "watch", "add", "org/model", "--no-check")
    modules = _modules_after(tmp_path, "--config", str(config), "watch", "list")
    assert {"storage.models.watches", "storage.models.subscriptions", "storage.subscription_store"} <= modules
    assert _loaded(modules, NOT_WATCH_SIDE + ("storage.history", "storage.outbox", "storage.advisories")) == []


def test_diff_loads_the_differs(tmp_path):
    """The probe can fail: a command that needs the differs does load them."""
    _modules_after(tmp_path, "watch", "add", "org/model", "--no-check")
    assert "tracker.differs" in _modules_after(tmp_path, "diff", "org/model", "abcd", "abce")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_table_summaries_are_the_commands_own(name):
    """Each command the root group loads lazily is the one named, and `hubwatch --help` shows for it, at
    any width, the short help click would make from the command itself."""
    command = load_command(name)
    stand_in = click.Command(name, help=COMMANDS[name][2])
    assert command.name == name
    assert not command.hidden
    for limit in (20, 45, 60, 80, 200):
        assert stand_in.get_short_help_str(limit) == command.get_short_help_str(limit)


def test_help_lists_what_an_eagerly_loaded_group_would():
    """`hubwatch --help` from the table reads exactly as it does with every command loaded."""
    lazy = CliRunner().invoke(cli, ["--help"], terminal_width=100)
    loaded = click.Group(commands={name: load_command(name) for name in COMMANDS})
    ctx = click.Context(loaded, info_name="hubwatch", terminal_width=100)
    formatter = ctx.make_formatter()
    loaded.format_commands(ctx, formatter)
    cli.format_epilog(ctx, formatter)  # the docs pointer click writes after the commands
    assert lazy.exit_code == 0
    assert lazy.output.endswith(formatter.getvalue())


def test_unknown_command_suggests_among_unloaded_ones():
    """A mistyped command is answered with the closest command, though none was loaded."""
    result = CliRunner().invoke(cli, ["wach"])
    assert result.exit_code == 2
    assert "No such command 'wach'. Did you mean 'watch'?" in result.output
