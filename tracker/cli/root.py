"""The root `hubwatch` group and what every command shares: the App built on first use, repo-id
arguments, JSON output and error lines.

Only click is imported here: `hubwatch --help` must not pay for the database, the Hub client or the
HTTP stack. The root group imports a command's module (which imports its stack at its top) only when
that command runs; `hubwatch --help` lists each command with the summary written in COMMANDS.
"""

from __future__ import annotations

import importlib
import json
from typing import TYPE_CHECKING, Any

import click

from storage.errors import AmbiguousRevision, InvalidSubscription, NotStored, StorageError, StoreLookupError
from tracker.errors import ConfigError, HubwatchError

if TYPE_CHECKING:
    from tracker.cli.app import App
    from tracker.config import Settings


def exit_code_of(err: HubwatchError | StoreLookupError | StorageError) -> int:
    """The exit code of an error no command handled: 3 for what is not stored, 4 for a database that
    cannot be opened or written, else the error's own code (1 by default)."""
    if isinstance(err, NotStored | AmbiguousRevision):
        return 3
    if isinstance(err, StorageError):
        return 4
    return getattr(err, "exit_code", 1)


# Every command of the root group: name -> (its module in tracker/cli/, the command's name there, the
# summary `hubwatch --help` shows: the first sentence of its docstring, as click would shorten it; a test
# checks that the two agree).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "advisories": ("advisories", "advisories",
                   "OSV advisories, loader advice and hubwatch's own advisories of a watched repo."),
    "bom": ("bom", "bom",
            "A CycloneDX 1.6 JSON bill of materials: REPO[@REV] (a commit sha, or a branch: its head; default main), or "
            "every model of a lock file (a dataset, `datasets/ORG/NAME`, is a `data` component)."),
    "deliveries": ("deliveries", "deliveries", "The outbound webhook delivery log: list deliveries, redeliver one."),
    "demo": ("demo", "demo", "The whole pipeline offline, against the bundled Hub replay."),
    "diff": ("diff", "diff", "What changed in REPO between two stored revisions."),
    "estimate": ("estimate", "estimate",
                 "Parameters and GPU memory: of a stored revision of REPO, or of a config.json file; with --serve, the "
                 "memory to serve it on each card."),
    "feed": ("feed", "feed",
             "The feed document on stdout: byte for byte what the server answers at [server] public_url."),
    "history": ("history", "history", "Revisions of REPO, newest first, with their changes."),
    "lock": ("outdated", "lock",
             "Write a lock file: REPO[@BRANCH] pinned at its branch head, or every model of the local HF cache "
             "at the revision you have; --update REPO moves one pin after review."),
    "outdated": ("outdated", "outdated",
                 "What changed upstream since the revisions you have: every model of the local HF cache, or of "
                 "a lock file."),
    "poll": ("watch", "poll", "One ingest pass now, then exit (exit code 1 if a repo failed; 3 if every failure was the repo's "
                              "state: gone, gated, disabled or its branch missing)."),
    "run": ("daemon", "run",
            "The daemon: poll every watch at its interval, serve HTTP ([server]) and deliver webhooks, until "
            "Ctrl-C or SIGTERM."),
    "serve": ("daemon", "serve",
              "The HTTP server alone (feeds, pages, API, Hub webhooks) until Ctrl-C or SIGTERM; no polling."),
    "show": ("history", "show", "One stored revision of REPO with its files and changes."),
    "tree": ("tree", "tree",
             "A base's derivatives (relation, publisher, downloads) and, per behaviour part, whether each carries the "
             "base's latest, is behind it (by how many changes) or diverged."),
    "verify": ("verify", "verify",
               "The structure verifier on a stored revision of REPO: config, weight headers and tokenizer checked "
               "against each other; exit 1 when a finding reaches --fail-on, 3 for an unknown repo or revision, else 0."),
    "watch": ("watch", "watch", "Add, list and remove watched repos."),
}


def load_command(name: str) -> click.Command:
    """The command `name` of COMMANDS, its module imported (with the stack it imports at its top)."""
    module, attr, _ = COMMANDS[name]
    command: click.Command = getattr(importlib.import_module(f"tracker.cli.{module}"), attr)
    return command


class _Root(click.Group):
    """The root group loads a command when it runs (or when its own help is asked for), lists every
    command in its help from COMMANDS without loading any, and maps hubwatch's errors to
    `error: message` and an exit code, once for every command."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.add_command(load_command(cmd_name), cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Click's own listing, of stand-ins that carry the summaries of the commands not loaded."""
        listed = {
            name: self.commands.get(name) or click.Command(name, help=COMMANDS[name][2])
            for name in self.list_commands(ctx)
        }
        click.Group(commands=listed).format_commands(ctx, formatter)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as err:  # "Did you mean": among every command, loaded or not
            raise click.exceptions.NoSuchCommand(err.command_name, possibilities=self.list_commands(ctx), ctx=ctx) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (HubwatchError, StoreLookupError, StorageError) as err:
            click.echo(f"error: {err}", err=True)
            ctx.exit(exit_code_of(err))


# Where `hubwatch --help` sends a reader: the documentation site's pages, as paths in the repository (the project
# declares no docs URL); `mkdocs serve` shows them. "\b" keeps click from re-wrapping the lines (it would break a
# path at its hyphens).
DOCS_EPILOG = (
    "\b\n"
    "Documentation (mkdocs serve): docs/index.md\n"
    "  getting started: docs/getting-started/demo.md\n"
    "  every command and option: docs/reference/cli.md\n"
    "  every setting, with its default: docs/reference/configuration.md"
)


@click.group(cls=_Root, context_settings={"help_option_names": ["-h", "--help"]}, epilog=DOCS_EPILOG)
@click.option("--config", "config_file", metavar="FILE", help="Config file (default: $HUBWATCH_CONFIG, ./hubwatch.toml).")
@click.pass_context
def cli(ctx: click.Context, config_file: str | None) -> None:
    """hubwatch: watch Hugging Face Hub repos and keep the history of what changed."""
    holder: dict[str, Any] = {}

    def factory(logs: bool = True) -> App:
        if "app" not in holder:
            from tracker.cli.app import App
            from tracker.config import load_settings

            settings = load_settings(config_file)
            if any(spec.format == "apprise" for spec in settings.webhooks):
                _check_apprise_urls(settings)
            holder["app"] = App(settings)
        if logs and "logs" not in holder:
            from tracker.cli.logs import configure_logging

            configure_logging(holder["app"].settings.log)
            holder["logs"] = True
        return holder["app"]

    # A caller that already built its App (a test, an embedding program) hands in its own factory.
    ctx.ensure_object(dict).setdefault("app_factory", factory)


def _check_apprise_urls(settings: Settings) -> None:
    """The config's apprise [[webhooks]] are URLs Apprise can read, for services the [delivery] policy takes
    (Apprise is imported only when there are some)."""
    from feeds.webhooks.apprise import check_config_entries
    from feeds.webhooks.safety import TargetPolicy

    d = settings.delivery
    policy = TargetPolicy(d.allow_private_targets, frozenset(d.apprise_allow_plugins), d.apprise_allow_insecure_tls)
    try:
        check_config_entries(settings.webhooks, policy)
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

    try:
        return validate_repo_id(repo)
    except ConfigError as err:
        raise click.BadParameter(str(err), param_hint=param_hint) from err


def stored_repo(app: App, repo: str) -> str:
    """The name `repo`'s history is stored under: `repo` itself, or the new name its history moved to after a
    rename on the Hub (said on stderr, so --json output stays the document alone)."""
    queries = app.store.read_model
    if queries.repo_known(repo):
        return repo
    new = queries.renamed_to(repo)
    if new is None:
        return repo
    click.echo(f"note: {repo} was renamed to {new} on the Hub: its history is under {new}", err=True)
    return new


def branch_arg(branch: str, param_hint: str = "--branch") -> str:
    """`branch` if git and the Hub accept it as a branch name, else a usage error naming it."""
    from tracker.config import validate_branch

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


def hubwatch_version() -> str:
    """The installed hubwatch's version (the BOM's and SARIF's tool version), "unknown" when not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hubwatch")
    except PackageNotFoundError:
        return "unknown"
