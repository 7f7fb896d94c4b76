"""`hubwatch watch add|list|remove` and `hubwatch poll`: the watch list and one ingest pass now."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from storage.errors import WatchExists
from storage.kinds import REPO_TYPES, is_repo_id, repo_key, short_dataset_name, split_repo_key
from tracker.cli import output
from tracker.cli.root import app_of, branch_arg, emit_json, exit_code_of, fail, repo_arg
from tracker.config import parse_interval
from tracker.errors import ConfigError, HubwatchError, RefusedFile, RepoGone
from tracker.formats.local_files import decode_utf8, quoted, read_regular_file

if TYPE_CHECKING:
    from tracker.cli.app import App
    from tracker.hub.client import RepoHead

_NO_WATCHES = "no repos watched (add one with: hubwatch watch add ORG/NAME)"
MAX_NAMES_FILE_BYTES = 4 * 1024 * 1024  # some 50,000 names
MAX_ERROR_LINES = 20  # a file of bad names gets this many error lines, then a count of the rest


@click.group()
def watch() -> None:
    """Add, list and remove watched repos."""


@watch.command("add")
@click.argument("repos", nargs=-1, metavar="REPO...")
@click.option("--file", "names_file", type=click.Path(allow_dash=True), default=None, metavar="FILE",
              help="Also watch the names in FILE, one a line ('-': stdin; blank lines and # comments skipped).")
@click.option("--type", "repo_type", type=click.Choice(REPO_TYPES), default="model", show_default=True,
              help="What the names are: models, or datasets (https://huggingface.co/datasets/ORG/NAME, stored as "
                   "datasets/ORG/NAME; ORG/* then follows every dataset of ORG). A model and a dataset of the same "
                   "name are two watches.")
@click.option("--branch", default="main", show_default=True, help="The branch to follow.")
@click.option("--interval", default=None, help="Poll interval, e.g. 15m (default: [poll] default_interval).")
@click.option("--backfill", default=0, show_default=True, type=click.IntRange(0, 10_000),
              help="On the first poll, also ingest this many commits before the head.")
@click.option("--no-check", is_flag=True, help="Do not check with the Hub that the repo and branch exist.")
@click.option("--derivatives", is_flag=False, flag_value="quantized,finetune", default=None, metavar="[RELATIONS]",
              help="Also follow the repo's derivatives of these relations (comma-separated: quantized, finetune, "
                   "adapter, merge; alone: quantized,finetune), checked on its poll schedule.")
@click.option("--derivatives-limit", default=100, show_default=True, type=click.IntRange(1, 10_000),
              help="Follow at most this many derivatives, the most downloaded first.")
@click.pass_context
def watch_add(
    ctx: click.Context,
    repos: tuple[str, ...],
    names_file: str | None,
    repo_type: str,
    branch: str,
    interval: str | None,
    backfill: int,
    no_check: bool,
    derivatives: str | None,
    derivatives_limit: int,
) -> None:
    """Watch REPO (org/name); several at once, or ORG/* for every model of an org or user, new ones
    included. With --type dataset the names are datasets (stored as datasets/org/name, the name every other
    command takes). With several names each bad one is reported and the others are added; the exit code is
    then that of the first name that failed (2 malformed, 3 not on the Hub, 1 Hub unreachable)."""
    names = list(repos) + (_names_in(names_file) if names_file is not None else [])
    if not names:
        raise click.UsageError("Missing argument 'REPO...'.")
    short_failed: list[int] = []
    if any(_is_short(n, repo_type) for n in names):
        names, short_failed = _canonical_names(ctx, names, repo_type, branch, no_check)
    names = [_typed(name, repo_type) for name in names]
    relations = _relations(derivatives)
    if relations and any(split_repo_key(n)[0] == "dataset" for n in names):
        raise click.UsageError("--derivatives follows a model's family; a dataset has none")
    if relations and (len(names) != 1 or names_file is not None or names[0].endswith("/*")):
        raise click.UsageError("--derivatives follows the family of one repo: name exactly one REPO")
    if len(names) == 1 and names_file is None and not names[0].endswith("/*") and not short_failed:
        _add_one(ctx, names[0], branch, interval, backfill, no_check, relations, derivatives_limit)
        return
    branch = branch_arg(branch)
    try:
        interval_s = parse_interval(interval, "--interval") if interval else None
    except ConfigError as err:
        raise click.BadParameter(str(err), param_hint="--interval") from err
    app = app_of(ctx)
    interval_s = interval_s or app.settings.default_interval_s
    failed = list(short_failed)
    for name in names:
        code, error = _add_named(app, name, branch, interval_s, backfill, no_check)
        if code:
            failed.append(code)
        if error is not None and len(failed) <= MAX_ERROR_LINES:
            click.echo(f"error: {error}", err=True)
    if len(failed) > MAX_ERROR_LINES:
        click.echo(f"error: and {len(failed) - MAX_ERROR_LINES} more names failed (the first {MAX_ERROR_LINES} are shown)", err=True)
    if len(names) + len(short_failed) > 1:
        total = len(names) + len(short_failed)
        click.echo(f"{total - len(failed)} of {total} added or already watched, {len(failed)} failed")
    if failed:
        ctx.exit(failed[0])


def _typed(name: str, repo_type: str) -> str:
    """The name as `--type` makes it: a dataset's `org/name` is its key `datasets/org/name` and its `ORG/*` the
    follow `datasets/ORG/*`; a name already written `datasets/...` stays as it is; a malformed name is left for
    the checks that report it."""
    if repo_type != "dataset":
        return name
    if name.endswith("/*"):
        author = name[:-2]
        return name if author.startswith("datasets/") else f"datasets/{author}/*"
    return repo_key(name, "dataset") if is_repo_id(split_repo_key(name)[1]) else name


def _is_short(name: str, repo_type: str) -> bool:
    """A dataset's canonical short name: `wikitext` with --type dataset, or `datasets/wikitext` (its URL path)."""
    shaped = (repo_type == "dataset" and "/" not in name) or (name.startswith("datasets/") and name.count("/") == 1)
    return shaped and short_dataset_name(name) is not None


def _canonical_names(ctx: click.Context, names: list[str], repo_type: str, branch: str,
                     no_check: bool) -> tuple[list[str], list[int]]:
    """Dataset names given as a canonical short name (`wikitext` with --type dataset, or `datasets/wikitext`: no
    org), each resolved through the Hub to
    the org name it redirects to (`Salesforce/wikitext`), said on a line; a key without an org is never stored. A
    short name the Hub does not resolve is an error naming what to do (exit 3; 2 with --no-check, which cannot ask);
    with several names the others are still added (the names left, and the exit codes of those that failed)."""
    from tracker.errors import HubUnavailable

    resolved, failed = [], []
    for given in names:
        if not _is_short(given, repo_type):
            resolved.append(given)
            continue
        name = short_dataset_name(given)
        if no_check:
            failed.append((2, f"{quoted(name)} is a dataset's short name without an org: hubwatch stores datasets as "
                              "datasets/ORG/NAME and --no-check cannot ask the Hub which org it moved to; drop "
                              "--no-check, or name it ORG/NAME (as its page https://huggingface.co/datasets/"
                              f"{name} shows)"))
            continue
        app = app_of(ctx)
        try:
            head = app.hub.head(f"datasets/{name}", branch_arg(branch))
        except HubUnavailable as err:
            failed.append((exit_code_of(err), f"{name}: {err}"))
            continue
        except HubwatchError as err:
            failed.append((exit_code_of(err), f"dataset {name} does not resolve on the Hub ({err}): the Hub moved the "
                                              "canonical short names under orgs (wikitext is Salesforce/wikitext): "
                                              "find the dataset's ORG/NAME on the Hub and watch that with --type "
                                              f"dataset{_state_advice(err)}"))
            continue
        key = head.repo_id
        if key is None or not is_repo_id(split_repo_key(key)[1]) or split_repo_key(key)[0] != "dataset":
            failed.append((3, f"dataset {name}: the Hub answered it without an org ({key or 'no id'}); hubwatch "
                              "stores datasets as datasets/ORG/NAME: watch it as ORG/NAME"))
            continue
        click.echo(f"{name} is a dataset's canonical short name: the Hub redirects it to {split_repo_key(key)[1]}; "
                   f"watching {key}")
        app.store.renames.record_short_name(f"datasets/{name}", key)  # readers (Renovate's lookups) answer it too
        resolved.append(key)
    for _, error in failed[:MAX_ERROR_LINES]:
        click.echo(f"error: {error}", err=True)
    if failed and not resolved:
        ctx.exit(failed[0][0])
    return resolved, [code for code, _ in failed]


def _relations(value: str | None) -> tuple[str, ...]:
    """--derivatives' relations, each one of DERIVATIVE_RELATIONS (a bad one is a usage error)."""
    from storage.kinds import DERIVATIVE_RELATIONS

    if value is None:
        return ()
    names = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    unknown = [n for n in names if n not in DERIVATIVE_RELATIONS]
    if unknown or not names:
        raise click.BadParameter(f"{', '.join(map(repr, unknown)) or 'nothing'} is not a relation (one of "
                                 f"{', '.join(DERIVATIVE_RELATIONS)})", param_hint="--derivatives")
    return names


def _add_one(ctx: click.Context, repo: str, branch: str, interval: str | None, backfill: int, no_check: bool,
             relations: tuple[str, ...] = (), derivatives_limit: int = 100) -> None:
    """The single-repo form, as it always was: errors are raised (usage errors exit 2, others by kind).
    With `relations`, the repo's family is followed too (also when the repo was watched already)."""
    repo, branch = repo_arg(repo), branch_arg(branch)
    app = app_of(ctx)
    try:
        interval_s = parse_interval(interval, "--interval") if interval else app.settings.default_interval_s
    except ConfigError as err:
        raise click.BadParameter(str(err), param_hint="--interval") from err
    try:
        head = None if no_check else checked_head(app, repo, branch)
    except HubwatchError as err:
        if getattr(err, "repo_state", None) is None:
            raise
        ctx.exit(fail(f"{err}{_state_advice(err)}", exit_code_of(err)))
    try:
        app.store.watches.add_watch(repo, branch, interval_s, source="cli", backfill=backfill)
        click.echo(_added_line(app, repo, branch, interval_s, head))
    except WatchExists:
        if not relations:
            raise
    if relations:
        app.store.derivatives.follow(repo, relations, derivatives_limit)
        click.echo(f"following {repo}'s derivatives ({', '.join(relations)}), the {derivatives_limit} most downloaded")


def checked_head(app: App, repo: str, branch: str) -> RepoHead:
    """The branch's head, when the repo can be watched as named: a repo in a state the Hub put it in raises its
    error (exit 3): gone, disabled, the branch missing, gated with its files refused to this token (one more
    request: one byte of one file), or renamed (RepoMoved naming the new name: the name asked for is not
    watched in its place)."""
    from tracker.errors import RepoGated, RepoMoved

    try:
        head = app.hub.head(repo, branch)
    except RepoGone as err:
        raise RepoGone(f"{err}{_other_kind_hint(app, repo)}", token_sent=err.token_sent) from err
    if head.repo_id and head.repo_id.casefold() != repo.casefold():
        moved = head.repo_id
        there = " (watched already: its history moved there)" if app.store.watches.get_watch(moved, branch) else ""
        raise RepoMoved(f"{repo} was renamed to {moved} on the Hub{there}: watch it under its new name: "
                        f"hubwatch watch add {moved}", moved)
    if head.gated:
        try:
            app.hub.check_file_access(repo, head.sha)
        except RepoGated as err:
            sent = "this token has not been granted access" if app.settings.hub_token else "no token was sent"
            raise RepoGated(f"{repo} is gated ({head.gated}): its files are refused ({sent}); set "
                            f"${app.settings.hub.token_env} to a token that was granted access, or add it with "
                            "--no-check to follow what stays readable until then") from err
    return head


def _other_kind_hint(app: App, repo: str) -> str:
    """When a repo is not found as the kind it was named as, whether the Hub has the other kind of that name (one
    more request): a model id given with --type dataset, or a dataset's name given as a model."""
    repo_type, hub_id = split_repo_key(repo)
    other = "model" if repo_type == "dataset" else "dataset"
    try:
        exists = app.hub.repo_exists(repo_key(hub_id, other))
    except HubwatchError:
        return ""
    if not exists:
        return ""
    if other == "model":
        return f"; {hub_id} is a model on the Hub: watch it without --type dataset"
    return f"; {hub_id} is a dataset on the Hub: watch it with --type dataset (or as datasets/{hub_id})"


def _added_line(app: App, repo: str, branch: str, interval_s: int, head: RepoHead | None) -> str:
    where = f"at {head.sha[:12]}" if head else "(not checked)"
    gated = f"; the repo is gated ({head.gated}): this token may read its files" if head and head.gated else ""
    return f"watching {repo}@{branch} every {interval_s}s, head {where}{gated}"


def _names_in(names_file: str) -> list[str]:
    """The names of a --file: one a line, blank lines and `#` comments skipped. A regular file (or stdin,
    '-') of at most MAX_NAMES_FILE_BYTES of UTF-8 text; anything else is refused (BadInput, exit 2)."""
    if names_file == "-":
        with click.open_file("-", "rb") as stdin:  # stdin is left open
            data = stdin.read(MAX_NAMES_FILE_BYTES + 1)
        if len(data) > MAX_NAMES_FILE_BYTES:
            raise RefusedFile("-", f"more than {MAX_NAMES_FILE_BYTES:,} bytes on stdin", "--file")
    else:
        data = read_regular_file(names_file, MAX_NAMES_FILE_BYTES, what="--file")
    text = decode_utf8(data, names_file, "--file")
    return [name for name in (line.split("#", 1)[0].strip() for line in text.splitlines()) if name]


def _add_named(app: App, name: str, branch: str, interval_s: int, backfill: int, no_check: bool) -> tuple[int, str | None]:
    """Add one name of a several-names `watch add`: its exit code (0: added) and, when it failed, the
    error line to print (the caller caps how many are printed)."""
    try:
        if name.endswith("/*"):
            author = name[:-2]
            org = author.removeprefix("datasets/")
            if "/" in org or not is_repo_id(f"{org}/x"):
                return 2, f"{quoted(name)} is not an org or user (expected 'ORG/*')"
            if branch != "main":
                return 2, f"{name}: ORG/* follows each repo's main branch; --branch does not apply"
            click.echo(_follow(app, author, interval_s, no_check))
            return 0, None
        if not is_repo_id(split_repo_key(name)[1]):
            return 2, f"{quoted(name)} is not a Hub repo id (expected 'org/name' or 'ORG/*')"
        head = None if no_check else checked_head(app, name, branch)
        app.store.watches.add_watch(name, branch, interval_s, source="cli", backfill=backfill)
        click.echo(_added_line(app, name, branch, interval_s, head))
        return 0, None
    except WatchExists as err:
        click.echo(f"{err}: left as it is")
        return 0, None
    except HubwatchError as err:
        return exit_code_of(err), f"{name}: {err}{_state_advice(err)}"


# What to do about a repo `watch add` finds in a state (nothing was added): what `poll` advises for a watched one
# (tracker/pipeline/repo_state.py ADVICE), told to someone who has not watched it yet.
ADD_ADVICE = {
    "gone": "if it is private, set the token variable to a token with access and add it again; if it was deleted, "
            "there is nothing to watch",
    "disabled": "wait for the Hub to restore it, then add it again",
    "gated": "request access on the repo's Hub page and set the token variable to a token that was granted it",
    "branch_missing": "name a branch the repo has with --branch",
    "moved": "watch the new name (`hubwatch watch add NEW`)",
}


def _state_advice(err: HubwatchError) -> str:
    """For a repo in a state the Hub put it in: which state, and what to do ("" for any other error)."""
    state = getattr(err, "repo_state", None)
    if state is None:
        return ""
    return f" [repo state: {state}; what to do: {ADD_ADVICE[state]}]"


def _follow(app: App, author: str, interval_s: int, no_check: bool) -> str:
    from tracker.polling.listing import follow_author  # here: it loads the Hub client, which `watch list` never needs

    listings = app.store.listing
    org = author.removeprefix("datasets/")
    what = "dataset" if org != author else "model"
    models = None if no_check else list(
        app.hub.list_models_by_modification(org, repo_type="dataset") if what == "dataset"
        else app.hub.list_models_by_modification(author))
    if models == []:
        raise RepoGone(f"the Hub lists no {what}s of {org} (--no-check follows it before it publishes)")
    outcome = follow_author(listings, author, interval_s, models)
    if models is None:
        return f"watching every {what} of {author}/* every {interval_s}s (not checked: the next listing pass finds them)"
    return (
        f"watching every {what} of {author}/* every {interval_s}s: {outcome.listed} listed now, "
        f"{len(outcome.added)} newly watched, new ones as they appear"
    )


@watch.command("list")
@click.option("--json", "as_json", is_flag=True, help="The watches as JSON.")
@click.pass_context
def watch_list(ctx: click.Context, as_json: bool) -> None:
    """List followed authors (ORG/*) and watched repos with the outcome of their last poll."""
    watches = app_of(ctx, logs=False).store.watches.list_watches()
    authors = app_of(ctx, logs=False).store.listing.list_author_watches()
    if as_json:
        emit_json([output.author_watch_dict(a) for a in authors] + [output.watch_dict(w) for w in watches])
        return
    if not watches and not authors:
        click.echo(_NO_WATCHES)
    for a in authors:
        what = "dataset" if a.author.startswith("datasets/") else "model"
        click.echo(f"{a.author}/*  every {what} of {a.author.removeprefix('datasets/')}, every {a.interval_s}s")
    for w in watches:
        click.echo(output.watch_text(w))


@watch.command("remove")
@click.argument("repo")
@click.option("--branch", default=None, help="Only this branch (default: every watched branch).")
@click.pass_context
def watch_remove(ctx: click.Context, repo: str, branch: str | None) -> None:
    """Stop watching REPO (or ORG/* and the watches it made); its stored history stays queryable."""
    if repo.endswith("/*") and branch is None:
        removed = app_of(ctx, logs=False).store.listing.remove_author_watch(repo[:-2])
        if not removed:
            ctx.exit(fail(f"{repo} is not watched", 3))
        click.echo(f"stopped watching {repo} ({removed - 1} of its repos); history kept")
        return
    repo, branch = repo_arg(repo), (branch_arg(branch) if branch is not None else None)
    app = app_of(ctx, logs=False)
    removed = app.store.watches.remove_watch(repo, branch)
    if not removed:
        new = app.store.read_model.renamed_to(repo)
        moved = f": it was renamed to {new} on the Hub and its watch moved there (hubwatch watch remove {new})" if new else ""
        ctx.exit(fail(f"{repo} is not watched{moved}", 3))
    click.echo(f"stopped watching {repo} ({removed} branch{'es' if removed > 1 else ''}); history kept")


@click.command()
@click.argument("repos", nargs=-1)
@click.option("--backfill", default=None, type=click.IntRange(0, 10_000),
              help="For watches polled for the first time: also ingest this many earlier commits.")
@click.option("--json", "as_json", is_flag=True, help="Each repo's outcome as JSON.")
@click.pass_context
def poll(ctx: click.Context, repos: tuple[str, ...], backfill: int | None, as_json: bool) -> None:
    """One ingest pass now, then exit (exit code 1 if a repo failed; 3 if every failure was the repo's state:
    gone, gated, disabled or its branch missing).

    A gated repo without access is followed through what stays readable: its new commits are stored, the files the
    Hub refused are named (`unread_files` in --json), and it counts as a failure of its state (exit 3).

    REPOS: the watched repos to poll (default: every watch)."""
    app = app_of(ctx)
    outcomes = app.poller.poll([repo_arg(r) for r in repos], backfill=backfill)
    if as_json:
        emit_json([output.outcome_dict(o) for o in outcomes])
    else:
        if not outcomes:
            click.echo(_NO_WATCHES)
        for o in outcomes:
            for line in output.outcome_text(o):
                click.echo(line)
    # a gated repo without access is followed through what stays readable, but its files were not read: a state too
    failed = [o for o in outcomes if o.failed or o.repo_state == "gated"]
    if failed:  # 3: every failure is a repo state (gone, gated, disabled, branch missing), as `watch add` says it
        ctx.exit(3 if all(o.repo_state != "active" for o in failed) else 1)
