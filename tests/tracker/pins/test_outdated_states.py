"""`hubwatch outdated` of pins whose repo is in a state on the Hub (deleted or private, disabled, gated, without the
branch, renamed): each its own status, what to do, and exit 3 (1 when something else failed too), against the
replay's `set_state` and `rename` with the real huggingface_hub client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli, write_config

BROKEN = "hubwatch-tests/broken-model"
NEW = "hubwatch-tests/renamed-model"
EVERY = "hubwatch-tests/every-kind"


@pytest.fixture(autouse=True)
def no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)


@pytest.fixture
def config(replay, tmp_path: Path, database_url: str) -> Path:
    return write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url)


def _lock(tmp_path: Path, *pins: tuple[str, str]) -> Path:
    path = tmp_path / "models.lock"
    path.write_text("version = 1\n" + "".join(f'[[model]]\nrepo = "{repo}"\nrevision = "{sha}"\n' for repo, sha in pins),
                    encoding="utf-8")
    return path


def _outdated(config: Path, lock: Path, *args: str):
    return run_cli("outdated", "--lock", str(lock), *args, config=config)


@pytest.mark.parametrize(("hub_state", "status", "advice"), [
    ("deleted", "gone", "cannot be fetched"),
    ("private", "gone", "token with access"),
    ("disabled", "disabled", "cannot be fetched until it restores it"),
    ("gated", "gated", "request access"),
    ("branch_deleted", "branch_missing", "pin another branch"),
])
def test_a_pin_of_a_repo_in_a_state_has_its_status_what_to_do_and_exit_3(
    replay, config: Path, tmp_path: Path, hub_state: str, status: str, advice: str
) -> None:
    """Each state is its own status in `--json` (with `repo_state` and `what_to_do`) and in the text lines; the
    other pins are still checked, and the exit code is 3 (a state to act on, as `poll` exits)."""
    replay.set_head(BROKEN, 2)
    lock = _lock(tmp_path, (BROKEN, replay.commits(BROKEN)[0].sha), (EVERY, replay.head_sha(EVERY)))
    replay.set_state(BROKEN, hub_state)
    result = _outdated(config, lock, "--json")
    assert result.returncode == 3, result.stderr[-2000:]
    models = {m["repo_id"]: m for m in json.loads(result.stdout)["models"]}
    assert (models[BROKEN]["status"], models[BROKEN]["repo_state"]) == (status, status)
    assert advice in models[BROKEN]["what_to_do"] and models[BROKEN]["message"]
    assert models[EVERY]["status"] == "up_to_date" and models[EVERY]["repo_state"] is None
    if status == "gated":  # followed through what stays readable: compared all the same, saying what was not read
        assert models[BROKEN]["commits_behind"] == 1 and "refused to this token" in models[BROKEN]["message"]
    else:
        assert models[BROKEN]["commits_behind"] is None
    text = _outdated(config, lock)
    assert text.returncode == 3 and f"{BROKEN}@main  {status.replace('_', ' ')}" in text.stdout
    assert f"    what to do: {models[BROKEN]['what_to_do']}" in text.stdout


def test_a_pin_of_a_renamed_repo_is_moved_compared_under_the_new_name(replay, config: Path, tmp_path: Path) -> None:
    """A pin of a repo renamed on the Hub is `moved`: compared under the new name (commits behind, changes), and
    told to update its repo id to it, in `--json`, text and markdown; exit 3."""
    replay.set_head(BROKEN, 1)
    pinned = replay.commits(BROKEN)[0].sha
    lock = _lock(tmp_path, (BROKEN, pinned))
    replay.rename(BROKEN, NEW)
    replay.set_head(NEW, 3)
    result = _outdated(config, lock, "--json")
    assert result.returncode == 3, result.stderr[-2000:]
    [model] = json.loads(result.stdout)["models"]
    assert (model["repo_id"], model["status"], model["moved_to"], model["commits_behind"]) == (BROKEN, "moved", NEW, 2)
    assert model["head_sha"] == replay.head_sha(NEW) and model["changes"]
    assert f"update the pin's repo id to {NEW}" in model["what_to_do"] and f"renamed to {NEW}" in model["message"]
    text = _outdated(config, lock).stdout
    assert f"{BROKEN}@main  moved to {NEW}: 2 commit(s) behind" in text and f"update the pin's repo id to {NEW}" in text
    markdown = _outdated(config, lock, "--format", "markdown").stdout
    assert f"renamed upstream to `{NEW}`, 2 commit(s) behind" in markdown


def test_a_renamed_repo_watched_under_its_old_name_moves_its_history_before_the_comparison(
    replay, config: Path, tmp_path: Path
) -> None:
    """When hubwatch watched the old name already, `outdated` lets that watch follow the rename (its history moves
    to the new name) and compares there: one history, under the new name."""
    replay.set_head(BROKEN, 2)
    pinned = replay.commits(BROKEN)[0].sha
    assert run_cli("watch", "add", BROKEN, config=config).returncode == 0
    assert run_cli("poll", config=config).returncode == 0
    replay.rename(BROKEN, NEW)
    replay.set_head(NEW, 3)
    result = _outdated(config, _lock(tmp_path, (BROKEN, pinned)), "--json")
    [model] = json.loads(result.stdout)["models"]
    assert (model["status"], model["commits_behind"]) == ("moved", 2)
    listed = json.loads(run_cli("watch", "list", "--json", config=config).stdout)
    assert [(w["repo_id"], w["repo_state"]) for w in listed] == [(NEW, "moved")]


def test_a_repo_state_and_a_failure_of_another_kind_exit_1(replay, config: Path, tmp_path: Path) -> None:
    """A pin whose repo is gone beside one the Hub cannot answer for (a 5xx) exits 1: something failed that no
    state explains."""
    lock = _lock(tmp_path, (BROKEN, replay.commits(BROKEN)[0].sha), (EVERY, replay.commits(EVERY)[0].sha))
    replay.set_state(BROKEN, "deleted")
    replay.inject(500, path=f"/api/models/{EVERY}/revision/main", times=10)
    result = _outdated(config, lock, "--json")
    assert result.returncode == 1
    assert {m["repo_id"]: m["status"] for m in json.loads(result.stdout)["models"]} == {BROKEN: "gone", EVERY: "unavailable"}
