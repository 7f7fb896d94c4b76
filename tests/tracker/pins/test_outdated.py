"""`hubwatch outdated` and `hubwatch lock` end to end against the replay server (in-process; a subprocess where
the test sets HF_HOME or HF_HUB_CACHE, which huggingface_hub reads at import)."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

from tests.support.cli import run_cli, write_config
from tests.support.hf_cache import cache_model

EVERY = "hubwatch-tests/every-kind"
REWRITTEN = "hubwatch-tests/rewritten-model"
GATED = "hubwatch-tests/gated-model"
HEAD_CHECK = "/api/models/{repo}/revision/main"


@pytest.fixture
def config(replay, tmp_path: Path, database_url: str) -> Path:
    return write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url)


def outdated(config: Path, cache: Path | None, *args: str):
    """`hubwatch outdated ARGS`, of the cache `cache` when one is named (HF_HUB_CACHE itself: the tests that set it)."""
    cache_args = ("--cache-dir", str(cache)) if cache is not None else ()
    return run_cli("outdated", *cache_args, *args, config=config)


def outdated_json(config: Path, cache: Path | None, *args: str) -> tuple[int, dict]:
    result = outdated(config, cache, *args, "--json")
    assert result.returncode in (0, 1, 3), result.stderr[-2000:]
    return result.returncode, json.loads(result.stdout)


def test_cached_model_behind_lists_every_change_by_kind_and_severity(replay, config: Path, tmp_path: Path) -> None:
    """A cached revision six commits behind reports those commits' changes, summarised by kind and severity."""
    replay.set_head(EVERY, 7)
    commits = replay.commits(EVERY)
    cache_model(tmp_path / "cache", EVERY, commits[0].sha)
    code, data = outdated_json(config, tmp_path / "cache")
    [model] = data["models"]
    assert code == 0 and data["bad_entries"] == []
    assert model["status"] == "behind" and model["commits_behind"] == 6
    assert model["head_sha"] == commits[6].sha and model["pinned_sha"] == commits[0].sha
    assert {"chat_template", "tokenizer", "custom_code", "weights", "config"} <= set(model["summary"])
    assert model["max_severity"] == "critical"
    assert {c["sha"] for c in model["changes"]} <= {c.sha for c in commits[1:7]}
    text = outdated(config, tmp_path / "cache")
    assert "6 commit(s) behind" in text.stdout and "[critical] custom_code" in text.stdout


@pytest.mark.parametrize("fail_on", ["critical", "warning", "info"])
def test_fail_on_exits_1_when_a_change_reaches_the_severity(replay, config, tmp_path, fail_on) -> None:
    """`--fail-on SEVERITY` exits 1 when a change at or above it happened since the pinned revision."""
    replay.set_head(EVERY, 7)
    cache_model(tmp_path / "cache", EVERY, replay.commits(EVERY)[0].sha)
    assert outdated(config, tmp_path / "cache", "--fail-on", fail_on).returncode == 1


def test_fail_on_passes_when_changes_stay_below(replay, config, tmp_path) -> None:
    """Changes below the `--fail-on` severity (a licence change in the README is a warning) leave the exit code 0."""
    replay.set_head(EVERY, 8)
    commits = replay.commits(EVERY)
    cache_model(tmp_path / "cache", EVERY, commits[5].sha)  # 0006-custom-code; 0008 only edits the README
    code, data = outdated_json(config, tmp_path / "cache", "--fail-on", "critical")
    assert code == 0, data
    assert data["models"][0]["commits_behind"] == 1 and data["models"][0]["max_severity"] == "warning"


def test_second_run_is_answered_from_stored_history(replay, config, tmp_path) -> None:
    """A second run costs one head check per model and fetches nothing already stored."""
    replay.set_head(EVERY, 7)
    cache_model(tmp_path / "cache", EVERY, replay.commits(EVERY)[0].sha)
    _, first = outdated_json(config, tmp_path / "cache")
    replay.reset_requests()
    _, second = outdated_json(config, tmp_path / "cache")
    assert [r.path for r in replay.requests] == [HEAD_CHECK.format(repo=EVERY)]
    assert second["models"] == first["models"]


def test_up_to_date_model_costs_one_request(replay, config, tmp_path) -> None:
    """A model at its branch head is reported up to date after one head check and nothing else."""
    cache_model(tmp_path / "cache", EVERY, replay.head_sha(EVERY))
    replay.reset_requests()
    code, data = outdated_json(config, tmp_path / "cache", "--fail-on", "info")
    assert code == 0 and data["models"][0]["status"] == "up_to_date"
    assert data["models"][0]["commits_behind"] == 0 and replay.count_requests() == 1


def test_detached_snapshot_is_reported_as_such_against_main(replay, config, tmp_path) -> None:
    """A snapshot no ref names (downloaded by sha) is marked detached and compared with main."""
    replay.set_head(EVERY, 3)
    cache_model(tmp_path / "cache", EVERY, replay.commits(EVERY)[1].sha, ref=None)
    _, data = outdated_json(config, tmp_path / "cache")
    [model] = data["models"]
    assert model["detached"] is True and model["status"] == "behind" and model["commits_behind"] == 1
    assert "detached snapshot" in outdated(config, tmp_path / "cache").stdout


def test_gone_gated_and_rewritten_are_reported_not_crashed(replay, config, tmp_path) -> None:
    """A repo gone upstream, a gated one, and a pin dropped by a force-push each get their status."""
    cache = tmp_path / "cache"
    cache_model(cache, "hubwatch-tests/no-such-model", "a" * 40)
    cache_model(cache, GATED, "b" * 40)
    cache_model(cache, REWRITTEN, replay.commits(REWRITTEN)[1].sha)  # 0002-bad-edit, dropped by 0003
    cache_model(cache, EVERY, replay.head_sha(EVERY))
    code, data = outdated_json(config, cache)
    status = {m["repo_id"]: m["status"] for m in data["models"]}
    assert status == {"hubwatch-tests/no-such-model": "gone", GATED: "gated", REWRITTEN: "rewritten", EVERY: "up_to_date"}
    assert code == 3  # two models could not be checked, each for its repo's state (tests/tracker/pins/test_outdated_states.py)
    rewritten = next(m for m in data["models"] if m["repo_id"] == REWRITTEN)
    assert "not on main" in rewritten["message"] and rewritten["max_severity"] == "warning"
    _, again = outdated_json(config, cache)  # now from the stored history: still rewritten
    assert {m["repo_id"]: m["status"] for m in again["models"]} == status


def test_rewrite_seen_by_a_stored_watch_is_reported(replay, config, tmp_path) -> None:
    """A pin hubwatch stored before upstream force-pushed it away is reported rewritten, with the changes since."""
    replay.set_head(REWRITTEN, 2)
    pinned = replay.commits(REWRITTEN)[0].sha
    cache_model(tmp_path / "cache", REWRITTEN, pinned)
    _, first = outdated_json(config, tmp_path / "cache")
    assert first["models"][0]["status"] == "behind"
    cache_model(tmp_path / "cache2", REWRITTEN, replay.commits(REWRITTEN)[1].sha)
    replay.set_head(REWRITTEN, 3)
    _, data = outdated_json(config, tmp_path / "cache2")
    assert data["models"][0]["status"] == "rewritten"


def test_broken_cache_entries_are_named_and_the_others_still_reported(replay, config, tmp_path) -> None:
    """A broken symlink and a ref to a missing snapshot are errors naming their repo; the rest is reported."""
    cache = tmp_path / "cache"
    broken = cache_model(cache, "org/broken-link", "c" * 40)
    (broken / "blobs" / f"blob-{'c' * 8}").unlink()
    dangling = cache_model(cache, "org/dangling-ref", "d" * 40)
    (dangling / "refs" / "main").write_text("e" * 40, encoding="utf-8")
    cache_model(cache, EVERY, replay.head_sha(EVERY))
    result = outdated(config, cache)
    assert result.returncode == 1
    assert "up to date" in result.stdout
    assert f"cache: org/broken-link: blob missing (broken symlink): snapshots/{'c' * 40}/config.json" in result.stderr
    assert f"cache: org/dangling-ref: ref(s) naming a snapshot that is not in the cache: main -> {'e' * 40}" in result.stderr


def test_missing_cache_is_a_clear_error(config, tmp_path) -> None:
    """No cache where one is looked for: exit 2 naming the folder."""
    result = outdated(config, tmp_path / "nowhere")
    assert result.returncode == 2 and f"no Hugging Face cache at {tmp_path / 'nowhere'}" in result.stderr


def test_cache_written_by_hf_hub_download_under_hf_home(replay, config, tmp_path) -> None:
    """A cache the real client wrote (HF_HOME/hub) is found through HF_HOME and compared with upstream."""
    from huggingface_hub import hf_hub_download

    replay.set_head(EVERY, 2)
    hf_hub_download(EVERY, "config.json", revision="main", endpoint=replay.endpoint, cache_dir=tmp_path / "hf" / "hub")
    replay.set_head(EVERY, 4)
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_CACHE"}
    result = run_cli("outdated", "--json", config=config, env={**env, "HF_HOME": str(tmp_path / "hf")}, process=True)
    [model] = json.loads(result.stdout)["models"]
    assert model["pinned_sha"] == replay.commits(EVERY)[1].sha and model["commits_behind"] == 2


def test_lock_outdated_and_update_round_trip(replay, config, tmp_path) -> None:
    """`lock REPO` pins the head with its behaviour files; `outdated --lock` sees upstream move; `--update` moves the pin."""
    lock_file = tmp_path / "models.lock"
    replay.set_head(EVERY, 3)
    written = run_cli("lock", EVERY, "--lock", str(lock_file), config=config)
    assert written.returncode == 0, written.stderr
    [entry] = tomllib.loads(lock_file.read_text())["model"]
    assert entry["repo"] == EVERY and entry["revision"] == replay.head_sha(EVERY) and entry["branch"] == "main"
    assert "config.json" in entry["files"] and "README.md" not in entry["files"]
    assert outdated(config, None, "--lock", str(lock_file), "--fail-on", "info").returncode == 0

    replay.set_head(EVERY, 4)  # 0004-chat-template
    result = outdated(config, None, "--lock", str(lock_file), "--fail-on", "warning")
    assert result.returncode == 1 and "chat_template" in result.stdout

    moved = run_cli("lock", "--update", EVERY, "--lock", str(lock_file), config=config)
    assert moved.returncode == 0 and replay.head_sha(EVERY)[:12] in moved.stdout
    assert outdated(config, None, "--lock", str(lock_file), "--fail-on", "info").returncode == 0


def test_lock_from_the_cache(replay, config, tmp_path) -> None:
    """`lock` with no repo pins every cached model at the revision on disk."""
    sha = replay.commits(EVERY)[2].sha
    cache_model(tmp_path / "cache", EVERY, sha)
    result = run_cli("lock", "--lock", str(tmp_path / "l.toml"), config=config, env={"HF_HUB_CACHE": str(tmp_path / "cache")},
                     process=True)
    assert result.returncode == 0, result.stderr
    [entry] = tomllib.loads((tmp_path / "l.toml").read_text())["model"]
    assert entry["revision"] == sha and entry["files"]


def test_bad_lock_entries_are_named_and_the_others_still_reported(replay, config, tmp_path) -> None:
    """A lock entry with an unknown key or a malformed sha is an error naming it; good entries are checked."""
    lock_file = tmp_path / "bad.lock"
    lock_file.write_text(
        f'version = 1\n[[model]]\nrepo = "{EVERY}"\nrevision = "{replay.head_sha(EVERY)}"\n'
        f'[[model]]\nrepo = "org/typo"\nrevison = "{"a" * 40}"\n'
        '[[model]]\nrepo = "org/short"\nrevision = "abc123"\n',
        encoding="utf-8",
    )
    result = outdated(config, None, "--lock", str(lock_file))
    assert result.returncode == 1 and "up to date" in result.stdout
    assert "error: model 2 (org/typo): unknown key 'revison'" in result.stderr
    assert "error: model 3 (org/short): revision 'abc123' is not a 40-hex commit sha" in result.stderr


def test_lock_file_that_is_not_toml_exits_2(config, tmp_path) -> None:
    """A lock file that is not TOML at all is refused with exit code 2 and its path."""
    lock_file = tmp_path / "bad.lock"
    lock_file.write_text("[[model]\n", encoding="utf-8")
    result = outdated(config, None, "--lock", str(lock_file))
    assert result.returncode == 2 and str(lock_file) in result.stderr and "not valid TOML" in result.stderr



PHI = "microsoft/phi-2"


def test_advisories_since_the_pin_are_in_the_summary(replay, config, tmp_path) -> None:
    """Advisory events of the revisions after the pin (hubwatch's own records for custom-code changes) are
    reported as kind `advisories`; a later pin drops those of the commits it already has."""
    commits = replay.commits(PHI)
    replay.set_head(PHI, len(commits))
    after_first = {c.sha for c in commits[1:]}
    cache_model(tmp_path / "old", PHI, commits[0].sha)
    _, data = outdated_json(config, tmp_path / "old")
    [model] = data["models"]
    advisories = [c for c in model["changes"] if c["kind"] == "advisories"]
    assert advisories and sum(model["summary"]["advisories"].values()) == len(advisories)
    assert {c["sha"] for c in advisories} <= after_first and len({c["sha"] for c in advisories}) > 1
    assert all(c["security"] and c["path"] and c["summary"].startswith(f"{c['path']}: ") for c in advisories), advisories
    assert any(c["path"].startswith("x_HUBWATCH-") for c in advisories)  # hubwatch's own records for the custom code
    assert "advisories: " in outdated(config, tmp_path / "old").stdout
    cache_model(tmp_path / "recent", PHI, commits[-2].sha)
    _, later = outdated_json(config, tmp_path / "recent")
    [recent] = later["models"]
    assert recent["commits_behind"] == 1
    assert {c["sha"] for c in recent["changes"] if c["kind"] == "advisories"} == {commits[-1].sha}
    assert len([c for c in recent["changes"] if c["kind"] == "advisories"]) < len(advisories)
