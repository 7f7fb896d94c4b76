"""`watch add` and `poll` on a repo the Hub deleted, disabled or hid: one exit code (3), the state named with what
to do, and never "unchanged" after a repo-level fact was recorded (the replay's `set_state`, `hubwatch` in a subprocess)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli, write_config
from tests.support.settings import settings_for
from tracker.cli.app import App

BROKEN = "hubwatch-tests/broken-model"
NEW = "hubwatch-tests/renamed-model"
EVERY = "hubwatch-tests/every-kind"


def _watched_and_polled(replay, database_url: str) -> None:
    """The repo watched with its first commit stored, in this process (only the command under test is a subprocess)."""
    replay.set_head(BROKEN, 1)
    app = App(settings_for(replay.endpoint, database_url))  # type: ignore[arg-type]
    app.store.watches.add_watch(BROKEN, "main", 900)
    assert [o.status for o in app.poller.poll()] == ["ingested"]
    app.store.engine.dispose()


@pytest.fixture(autouse=True)
def no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)


@pytest.mark.parametrize(("hub_state", "state", "words"), [
    ("deleted", "gone", "does not exist on the Hub, or is private"),
    ("private", "gone", "set the token variable to a token with access"),
    ("disabled", "disabled", "wait for the Hub to restore it"),
    ("branch_deleted", "branch_missing", "name a branch the repo has with --branch"),
    ("gated", "gated", "its files are refused (no token was sent)"),
    ("renamed", "moved", f"renamed to {NEW} on the Hub: watch it under its new name: hubwatch watch add {NEW}"),
])
def test_watch_add_of_a_repo_in_a_bad_state_exits_3_naming_it(replay, tmp_path: Path, database_url: str,
                                                             hub_state: str, state: str, words: str) -> None:
    """`watch add` exits 3 for every state alike (gone, private, disabled, a missing branch, gated without access,
    renamed), saying which state and what to do, and adds nothing: a renamed repo's new name is named, not watched
    in its place."""
    config = write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url)
    if hub_state == "renamed":
        replay.rename(BROKEN, NEW)
    else:
        replay.set_state(BROKEN, hub_state)
    result = run_cli("watch", "add", BROKEN, config=config)
    assert result.returncode == 3, result.stderr
    assert f"[repo state: {state}; what to do: " in result.stderr and "Traceback" not in result.stderr
    assert words in result.stderr
    assert run_cli("watch", "list", "--json", config=config).stdout.strip() == "[]"


def test_watch_add_of_several_names_adds_the_good_and_exits_3_for_a_renamed_one(replay, tmp_path: Path,
                                                                            database_url: str) -> None:
    """With several names, a renamed one is an error line naming its new name (exit 3), the others are added."""
    config = write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url)
    replay.rename(BROKEN, NEW)
    result = run_cli("watch", "add", BROKEN, EVERY, config=config)
    assert result.returncode == 3
    assert f"error: {BROKEN}: {BROKEN} was renamed to {NEW}" in result.stderr and "[repo state: moved;" in result.stderr
    assert [w["repo_id"] for w in json.loads(run_cli("watch", "list", "--json", config=config).stdout)] == [EVERY]


def test_watch_add_of_a_gated_repo_with_no_check_is_added(replay, tmp_path: Path, database_url: str) -> None:
    """--no-check adds a gated repo without asking the Hub (what the gated error suggests), exit 0."""
    config = write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url)
    replay.set_state(BROKEN, "gated")
    result = run_cli("watch", "add", BROKEN, "--no-check", config=config)
    assert result.returncode == 0 and "(not checked)" in result.stdout


def test_watch_add_of_a_gated_repo_with_a_granted_token_is_added(replay, tmp_path: Path, database_url: str) -> None:
    """A gated repo whose files this token may read is added (exit 0), its line saying so."""
    config = write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url)
    replay.set_state(BROKEN, "gated", granted=True)
    result = run_cli("watch", "add", BROKEN, config=config, env={"HF_TOKEN": "hf_granted"}, process=True)
    assert result.returncode == 0, result.stderr
    assert "the repo is gated (auto): this token may read its files" in result.stdout


def test_watch_add_of_the_old_name_of_a_followed_rename_says_the_new_one_is_watched(
    replay, tmp_path: Path, database_url: str
) -> None:
    """After a followed rename moved the watch and its history, `watch add OLD` exits 3 saying NEW is watched."""
    config = write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url)
    _watched_and_polled(replay, database_url)
    replay.rename(BROKEN, NEW)
    assert run_cli("poll", config=config).returncode == 0
    result = run_cli("watch", "add", BROKEN, config=config)
    assert result.returncode == 3
    assert f"renamed to {NEW} on the Hub (watched already: its history moved there)" in result.stderr


def test_poll_exits_3_for_a_gone_repo_and_says_restored_when_it_returns(replay, tmp_path: Path, database_url: str) -> None:
    """`poll` of a deleted repo exits 3 (as `watch add`), names the state and what to do; when it returns, the
    poll says restored and stores the commits made meanwhile."""
    config = write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url)
    _watched_and_polled(replay, database_url)
    replay.set_state(BROKEN, "deleted")
    gone = run_cli("poll", config=config)
    assert gone.returncode == 3, gone.stderr
    assert "FAILED: repo now gone: " in gone.stdout and "what to do: " in gone.stdout
    assert "unchanged" not in gone.stdout
    replay.set_state(BROKEN, "active")
    replay.set_head(BROKEN, 2)
    back = run_cli("poll", config=config)
    assert back.returncode == 0, back.stderr
    assert "repo restored: answers again after being gone" in back.stdout and "1 new revision(s)" in back.stdout


def test_poll_never_says_unchanged_after_recording_a_repo_fact(replay, tmp_path: Path, database_url: str) -> None:
    """A repo made private, seen through a token with access: the poll prints the fact it recorded, not "unchanged"."""
    config = write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url)
    env = {"HF_TOKEN": "hf_owner"}
    _watched_and_polled(replay, database_url)  # anonymous: the replay shows the same meta to both
    replay.set_state(BROKEN, "private")
    result = run_cli("poll", config=config, env=env, process=True)  # HF_TOKEN: a variable huggingface_hub reads at import
    assert result.returncode == 0, result.stderr
    assert "repo private: False -> True" in result.stdout and "unchanged" not in result.stdout
