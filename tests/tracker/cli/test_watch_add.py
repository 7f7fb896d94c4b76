"""`hubwatch watch add` with several names, a file of names and the ORG/* form, against the replay server."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from storage.listing_state import author_scope
from tests.support.cli import run_cli, write_config
from tests.support.settings import settings_for
from tracker.cli import cli
from tracker.cli.app import App
from tracker.standins.replay.control import ReplayServer
from tracker.standins.replay.history import synthetic_history

BROKEN = "hubwatch-tests/broken-model"
EVERY = "hubwatch-tests/every-kind"


@pytest.fixture
def acme() -> Iterator[ReplayServer]:
    """A Hub with two authors of small in-memory repos."""
    with ReplayServer(roots=[]) as server:
        for name in ("acme/a", "acme/b", "acme/c", "other/x"):
            server.add_repo(synthetic_history(name, commits=2))
        yield server


def invoke(app: App, *args: str, stdin: str | None = None):
    return CliRunner().invoke(cli, ["watch", *args], obj={"app_factory": lambda logs=True: app}, input=stdin)


@pytest.fixture
def acme_app(acme: ReplayServer, database_url: str) -> Iterator[App]:
    app = App(settings_for(acme.endpoint, database_url))  # type: ignore[arg-type]
    yield app
    if "store" in app.__dict__:
        app.store.engine.dispose()


def watched(app: App) -> list[str]:
    return [w.repo_id for w in app.store.watches.list_watches()]


def test_single_repo_output_is_unchanged(app: App, replay: ReplayServer) -> None:
    """One name: the same line as always, with the head's sha, and exit 0."""
    result = invoke(app, "add", BROKEN, "--interval", "10m")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"watching {BROKEN}@main every 600s, head at {replay.head_sha(BROKEN)[:12]}\n"


@pytest.mark.parametrize(
    ("name", "code", "message"),
    [("not a repo", 2, "not a Hub repo id"), ("hubwatch-tests/no-such-model", 3, "does not exist")],
)
def test_single_bad_repo_exits_as_before(app: App, name: str, code: int, message: str) -> None:
    """One bad name keeps its old exit code and message, and nothing is stored."""
    result = invoke(app, "add", name)
    assert result.exit_code == code and message in result.output
    assert watched(app) == []


def test_several_repos_add_the_good_and_name_the_bad(app: App, replay: ReplayServer) -> None:
    """Good names are added; each bad one gets its own error line; the exit code is the first failure's."""
    result = invoke(app, "add", BROKEN, "bad name", "hubwatch-tests/no-such-model", EVERY)
    assert result.exit_code == 2, result.output
    assert sorted(watched(app)) == [BROKEN, EVERY]
    assert "error: 'bad name' is not a Hub repo id" in result.stderr
    assert "error: hubwatch-tests/no-such-model: " in result.stderr and "does not exist" in result.stderr
    assert f"watching {EVERY}@main every 900s, head at {replay.head_sha(EVERY)[:12]}" in result.stdout
    assert "2 of 4 added or already watched, 2 failed" in result.stdout


def test_several_repos_exit_code_of_first_failure(app: App) -> None:
    """A name missing on the Hub before a malformed one: exit 3 (the first failure's code)."""
    result = invoke(app, "add", "hubwatch-tests/no-such-model", "bad name", BROKEN)
    assert result.exit_code == 3, result.output
    assert watched(app) == [BROKEN]


def test_file_of_names_from_stdin_skips_comments_and_rerun_is_harmless(app: App) -> None:
    """`--file -` reads names from stdin (blank lines, # comments skipped); a rerun leaves them as they are."""
    text = f"# our models\n{BROKEN}\n\n{EVERY}   # the kitchen sink\n"
    first = invoke(app, "add", "--file", "-", "--no-check", stdin=text)
    assert first.exit_code == 0, first.output
    assert sorted(watched(app)) == [BROKEN, EVERY]
    again = invoke(app, "add", "--file", "-", "--no-check", stdin=text)
    assert again.exit_code == 0, again.output
    assert again.stdout.count("is already watched: left as it is") == 2
    assert sorted(watched(app)) == [BROKEN, EVERY]


def test_file_and_arguments_together(app: App, tmp_path) -> None:
    """Names on the command line and in a file are all added."""
    names = tmp_path / "names.txt"
    names.write_text(f"{EVERY}\n", encoding="utf-8")
    result = invoke(app, "add", BROKEN, "--file", str(names), "--no-check")
    assert result.exit_code == 0, result.output
    assert sorted(watched(app)) == [BROKEN, EVERY]


def test_no_names_is_a_usage_error(app: App) -> None:
    """`watch add` with neither names nor --file exits 2."""
    assert invoke(app, "add").exit_code == 2


def test_org_watch_follows_every_model_of_the_author(acme_app: App, acme: ReplayServer) -> None:
    """`watch add 'acme/*'` watches each of acme's models (not other authors'), lists the author, and sets its mark."""
    result = invoke(acme_app, "add", "acme/*", "--interval", "1h")
    assert result.exit_code == 0, result.output
    assert "watching every model of acme/* every 3600s: 3 listed now, 3 newly watched" in result.stdout
    assert watched(acme_app) == ["acme/a", "acme/b", "acme/c"]
    assert {w.source for w in acme_app.store.watches.list_watches()} == {"author"}
    assert {w.interval_s for w in acme_app.store.watches.list_watches()} == {3600}
    listings = acme_app.store.listing
    state = listings.listing_state(author_scope("acme"))
    assert state is not None and state.high_water_at == max(acme.last_modified(r) for r in ("acme/a", "acme/b", "acme/c"))
    listed = invoke(acme_app, "list")
    assert "acme/*  every model of acme, every 3600s" in listed.stdout
    entries = json.loads(invoke(acme_app, "list", "--json").stdout)
    assert entries[0] == {**entries[0], "kind": "author", "repo_id": "acme/*", "author": "acme", "interval_s": 3600}
    assert [(e["kind"], e["repo_id"], e["source"]) for e in entries[1:]] == [
        ("repo", f"acme/{x}", "author") for x in "abc"]
    again = invoke(acme_app, "add", "acme/*")
    assert again.exit_code == 0 and "acme/* is already watched: left as it is" in again.stdout


def test_org_watch_with_others_in_one_call(acme_app: App) -> None:
    """An org and a single repo in one call: both followed."""
    result = invoke(acme_app, "add", "acme/*", "other/x")
    assert result.exit_code == 0, result.output
    assert watched(acme_app) == ["acme/a", "acme/b", "acme/c", "other/x"]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["nobody/*"], 3, "lists no models of nobody"),
        (["bad org/*"], 2, "is not an org or user"),
        (["a/b/*"], 2, "is not an org or user"),
        (["acme/*", "--branch", "dev"], 2, "--branch does not apply"),
    ],
)
def test_org_watch_bad_input(acme_app: App, args: list[str], code: int, message: str) -> None:
    """An unknown, malformed or branch-specific org watch is refused with a clear line; nothing is stored."""
    result = invoke(acme_app, "add", *args)
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert watched(acme_app) == [] and acme_app.store.listing.list_author_watches() == []


def test_org_watch_unchecked_then_remove(acme_app: App) -> None:
    """`--no-check` stores the org watch without asking the Hub; `watch remove 'acme/*'` drops it and its watches."""
    result = invoke(acme_app, "add", "acme/*", "--no-check")
    assert result.exit_code == 0, result.output
    assert watched(acme_app) == []
    assert [a.author for a in acme_app.store.listing.list_author_watches()] == ["acme"]
    removed = invoke(acme_app, "remove", "acme/*")
    assert removed.exit_code == 0 and "stopped watching acme/*" in removed.stdout
    assert acme_app.store.listing.list_author_watches() == []
    assert invoke(acme_app, "remove", "acme/*").exit_code == 3


def test_file_that_is_not_text_is_a_usage_error(app: App, tmp_path) -> None:
    """A --file that is not UTF-8 text exits 2 naming --file, and adds nothing."""
    names = tmp_path / "names.bin"
    names.write_bytes(b"acme/a\n\xff\xfe\x00junk\n")
    result = invoke(app, "add", "--file", str(names), "--no-check")
    assert result.exit_code == 2 and "--file" in result.output and "not UTF-8" in result.output
    assert watched(app) == []


def test_missing_file_is_a_usage_error(app: App, tmp_path) -> None:
    """A --file that does not exist exits 2."""
    assert invoke(app, "add", "--file", str(tmp_path / "nope.txt")).exit_code == 2


@pytest.fixture
def offline_config(tmp_path: Path) -> Path:
    """A config whose Hub is nowhere: `--no-check` and refused files never ask it."""
    return write_config(tmp_path / "hubwatch.toml", "http://127.0.0.1:9", tmp_path / "hubwatch.db")


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda p: p.symlink_to("/dev/zero"), "a character device, not a regular file"),
        (os.mkfifo, "a named pipe (FIFO), not a regular file"),
        (lambda p: p.write_bytes(b"acme/" + b"a" * 5_000_000 + b"\n"), "larger than 4,194,304 bytes"),
    ],
    ids=["dev-zero", "fifo", "5-MB-line"],
)
def test_file_that_is_not_a_small_regular_file_is_refused_in_one_line(offline_config, tmp_path, make, reason) -> None:
    """`--file` naming /dev/zero, a FIFO or a 5 MB line is refused with exit 2 and one short line, in a
    call that would time out if the read blocked or never ended."""
    names = tmp_path / "names"
    make(names)
    result = run_cli("watch", "add", "--file", str(names), "--no-check", config=offline_config, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr == f"error: refused --file {names}: {reason}\n"


def test_bad_lines_are_clipped_and_counted_not_echoed_whole(offline_config, tmp_path) -> None:
    """A 1 MB bad line and 30 more bad names: 20 error lines, each name clipped to 200 characters, then a
    count of the rest; the good name is still added."""
    names = tmp_path / "names"
    names.write_text("x" * 1_000_000 + "\n" + "".join(f"bad name {i}\n" for i in range(30)) + f"{EVERY}\n", encoding="utf-8")
    result = run_cli("watch", "add", "--file", str(names), "--no-check", config=offline_config, timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 21 and len(result.stderr) < 6_000
    assert lines[0].startswith("error: 'xxxx") and "... (1,000,000 characters) is not a Hub repo id" in lines[0]
    assert lines[1] == "error: 'bad name 0' is not a Hub repo id (expected 'org/name' or 'ORG/*')"
    assert lines[-1] == "error: and 11 more names failed (the first 20 are shown)"
    assert f"watching {EVERY}@main" in result.stdout and "1 of 32 added or already watched, 31 failed" in result.stdout
