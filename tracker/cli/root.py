"""The root `hubwatch` group and what every command shares: the App built on first use, repo-id
arguments, JSON output and error lines.

Only click is imported here: `hubwatch --help` must not pay for the database, the Hub client or the
HTTP stack. Each command imports what it uses when it runs.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from storage.errors import AmbiguousRevision, NotStored, StorageError, StoreLookupError
from tracker.errors import HubwatchError

if TYPE_CHECKING:
    from tracker.app import App
    from tracker.config import Settings


def exit_code_of(err: HubwatchError | StoreLookupError | StorageError) -> int:
    """The exit code of an error no command handled: 3 for what is not stored, 4 for a database that
    cannot be opened or written, else the error's own code (1 by default)."""
    if isinstance(err, NotStored | AmbiguousRevision):
        return 3
    if isinstance(err, StorageError):
        return 4
    return getattr(err, "exit_code", 1)


class _Root(click.Group):
    """The root group maps hubwatch's errors to `error: message` and an exit code, once for every command."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (HubwatchError, StoreLookupError, StorageError) as err:
            click.echo(f"error: {err}", err=True)
            ctx.exit(exit_code_of(err))


@click.group(cls=_Root, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_file", metavar="FILE", help="Config file (default: $HUBWATCH_CONFIG, ./hubwatch.toml).")
@click.pass_context
def cli(ctx: click.Context, config_file: str | None) -> None:
    """hubwatch: watch Hugging Face Hub repos and keep the history of what changed."""
    holder: dict[str, Any] = {}

    def factory(logs: bool = True) -> App:
        if "app" not in holder:
            from tracker.app import App
            from tracker.config import load_settings

            settings = load_settings(config_file)
            if any(spec.format == "apprise" for spec in settings.webhooks):
                _check_apprise_urls(settings)
            holder["app"] = App(settings)
        if logs and "logs" not in holder:
            from tracker.logs import configure_logging

            configure_logging(holder["app"].settings.log)
            holder["logs"] = True
        return holder["app"]

    # A caller that already built its App (a test, an embedding program) hands in its own factory.
    ctx.ensure_object(dict).setdefault("app_factory", factory)


def _check_apprise_urls(settings: Settings) -> None:
    """The config's apprise [[webhooks]] are URLs Apprise can read (Apprise is imported only when there are some)."""
    from feeds.webhooks.apprise import check_config_entries
    from storage.errors import InvalidSubscription
    from tracker.errors import ConfigError

    try:
        check_config_entries(settings.webhooks)
    except InvalidSubscription as err:
        raise ConfigError(f"{settings.source}: [[webhooks]] {err}") from err


def app_of(ctx: click.Context, logs: bool = True) -> App:
    """The App of this invocation: settings loaded, built once. `logs=False` for commands that only
    read the database and print: they skip configuring structlog (and importing it, 0.2 s)."""
    factory = ctx.ensure_object(dict)["app_factory"]
    return factory(logs) if logs is False else factory()


def repo_arg(repo: str, param_hint: str | None = None) -> str:
    """`repo` if it is a Hub repo id (`org/name`), else a usage error naming it."""
    from tracker.config import validate_repo_id
    from tracker.errors import ConfigError

    try:
        return validate_repo_id(repo)
    except ConfigError as err:
        raise click.BadParameter(str(err), param_hint=param_hint) from err


def branch_arg(branch: str, param_hint: str = "--branch") -> str:
    """`branch` if git and the Hub accept it as a branch name, else a usage error naming it."""
    from tracker.config import validate_branch
    from tracker.errors import ConfigError

    try:
        return validate_branch(branch)
    except ConfigError as err:
        raise click.BadParameter(str(err), param_hint=param_hint) from err


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def fail(message: str, code: int) -> int:
    """Print `error: message` on stderr; returns `code` for `ctx.exit`."""
    click.echo(f"error: {message}", err=True)
    return code
