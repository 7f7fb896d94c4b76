"""`outdated` and `lock` on crafted local files (a CI runner's restored HF cache, a checked-out tree): what
is not a small regular file inside its tree is refused in one line, never read, echoed or written through.
Each test runs the CLI with a timeout (tests/support/cli.py), so a read that blocks fails the test instead of hanging."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

from tests.support.cli import run_cli, write_config
from tests.support.hf_cache import cache_model

EVERY = "hubwatch-tests/every-kind"
SECRET = "TOPSECRET-" * 60  # 600 characters: what the old scan quoted (up to 300) of a file a ref pointed to
QUICK_S = 60  # a refused file costs at most a process start; a FIFO read that blocks would run into this


@pytest.fixture
def config(replay, tmp_path: Path, database_url: str) -> Path:
    return write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url)


@pytest.fixture
def offline_config(tmp_path: Path) -> Path:
    """A config for commands refused before they reach the Hub or the database."""
    return write_config(tmp_path / "offline.toml", "http://127.0.0.1:9", tmp_path / "offline.db")


def assert_one_line_error(stderr: str, *parts: str) -> None:
    """stderr is one `error:` line holding every part, and no traceback."""
    assert "Traceback" not in stderr and stderr.count("\n") == 1, stderr[-2000:]
    assert stderr.startswith("error: ") and all(p in stderr for p in parts), stderr


def test_crafted_cache_refs_are_skipped_with_one_line_each_and_never_echoed(replay, config, tmp_path) -> None:
    """Refs that lead out of the cache, are /dev/zero, a FIFO, not UTF-8, too large or not a sha, and a
    snapshot linked out of the cache: each model skipped with one line naming it; the good model is checked."""
    cache, outside = tmp_path / "cache", tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET, encoding="utf-8")
    cache_model(cache, EVERY, replay.head_sha(EVERY))

    def ref_of(repo_id: str) -> Path:
        ref = cache_model(cache, repo_id, "1" * 40) / "refs" / "main"
        ref.unlink()
        return ref

    ref_of("org/leak").symlink_to(outside / "secret.txt")
    ref_of("org/zero").symlink_to("/dev/zero")
    os.mkfifo(ref_of("org/fifo"))
    ref_of("org/binary").write_bytes(b"\xff\xfe" + b"1" * 38)
    ref_of("org/huge").write_bytes(b"1" * 5000)
    ref_of("org/not-sha").write_text(SECRET, encoding="utf-8")
    snapshot_out = cache_model(cache, "org/snapshot-out", "2" * 40) / "snapshots" / ("3" * 40)
    snapshot_out.symlink_to(outside, target_is_directory=True)

    result = run_cli("outdated", "--cache-dir", str(cache), config=config, timeout=QUICK_S)
    assert result.returncode == 1 and "up to date" in result.stdout, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "TOPSECRET" not in result.stdout + result.stderr
    lines = sorted(result.stderr.splitlines())
    expected = [
        ("org/binary", "refused refs/main: not UTF-8 text"),
        ("org/fifo", "refused refs/main: a named pipe (FIFO), not a regular file"),
        ("org/huge", "refused refs/main: larger than 1,024 bytes"),
        ("org/leak", "refused refs/main: a symlink out of"),
        ("org/not-sha", "ref 'main' does not hold a 40-hex commit sha"),
        ("org/snapshot-out", f"snapshots/{'3' * 40} is a symlink out of the cache"),
        ("org/zero", "refused refs/main: a symlink out of"),
    ]
    assert len(lines) == len(expected), lines
    for line, (repo_id, reason) in zip(lines, expected, strict=True):
        assert line.startswith(f"error: cache: {repo_id}: ") and reason in line, line


def test_cache_path_that_is_a_file_is_one_line_exit_2(offline_config, tmp_path) -> None:
    """HF_HUB_CACHE naming a file is refused in one line naming it, exit 2."""
    (tmp_path / "cache").write_text("not a folder", encoding="utf-8")
    result = run_cli("outdated", config=offline_config, env={"HF_HUB_CACHE": str(tmp_path / "cache")}, timeout=QUICK_S,
                     process=True)
    assert result.returncode == 2
    assert_one_line_error(result.stderr, f"the Hugging Face cache {tmp_path / 'cache'} is not a directory")


def _nested(path: Path) -> None:
    path.write_text("version = 1\nx = " + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (_nested, "its TOML is nested too deep"),
        (lambda p: p.symlink_to("/dev/zero"), "a character device, not a regular file"),
        (os.mkfifo, "a named pipe (FIFO), not a regular file"),
        (lambda p: p.write_bytes(b"# padding\n" * 500_000), "larger than 4,194,304 bytes"),
        (lambda p: p.write_bytes(b"version = 1\n# \xff\n"), "not UTF-8 text"),
    ],
    ids=["nested-100000", "dev-zero", "fifo", "5-MB", "not-utf8"],
)
def test_hostile_lock_file_is_refused_in_one_line(offline_config, tmp_path, make, reason: str) -> None:
    """`outdated --lock` on TOML nested 100,000 deep, /dev/zero, a FIFO, a 5 MB file or bytes that are not
    UTF-8: exit 2 and one line naming the file and why, quickly."""
    lock_file = tmp_path / "hubwatch.lock"
    make(lock_file)
    result = run_cli("outdated", "--lock", str(lock_file), config=offline_config, timeout=QUICK_S)
    assert result.returncode == 2
    assert_one_line_error(result.stderr, str(lock_file), reason)


def test_lock_never_writes_through_a_planted_temporary_symlink(replay, config, tmp_path) -> None:
    """A `.hubwatch.lock.tmp` symlink planted beside the lock file: its target is untouched, the lock is a
    regular file with the pins, and the planted link is left as it was."""
    project, victim = tmp_path / "project", tmp_path / "victim.txt"
    project.mkdir()
    victim.write_text("untouched", encoding="utf-8")
    (project / ".hubwatch.lock.tmp").symlink_to(victim)
    lock_file = project / "hubwatch.lock"
    result = run_cli("lock", EVERY, "--lock", str(lock_file), config=config, timeout=QUICK_S)
    assert result.returncode == 0, result.stderr[-2000:]
    assert victim.read_text(encoding="utf-8") == "untouched"
    assert not lock_file.is_symlink() and tomllib.loads(lock_file.read_text(encoding="utf-8"))["model"][0]["repo"] == EVERY
    assert os.readlink(project / ".hubwatch.lock.tmp") == str(victim)
    assert sorted(p.name for p in project.iterdir()) == [".hubwatch.lock.tmp", "hubwatch.lock"]


@pytest.mark.parametrize("where", ["directory", "under-a-file"])
def test_lock_to_a_directory_or_under_a_file_is_one_line_exit_2(offline_config, tmp_path, where: str) -> None:
    """`lock --lock DIR` and `lock --lock FILE/x.lock`: exit 2 and one line, before asking the Hub anything."""
    if where == "directory":
        lock_file, reason = tmp_path / "locks", "a directory, not a file"
        lock_file.mkdir()
    else:
        (tmp_path / "plain").write_text("x", encoding="utf-8")
        lock_file, reason = tmp_path / "plain" / "hubwatch.lock", f"{tmp_path / 'plain'} is not a directory"
    result = run_cli("lock", EVERY, "--lock", str(lock_file), config=offline_config, timeout=QUICK_S)
    assert result.returncode == 2
    assert_one_line_error(result.stderr, f"refused the lock file {lock_file}", reason)


def test_bad_lock_entries_are_clipped_and_counted_not_echoed_whole(offline_config, tmp_path) -> None:
    """30 entries whose repo is a 100,000-character string: 20 error lines quoting at most 200 characters
    of it, then a count of the rest; `--json` still lists every bad entry."""
    lock_file = tmp_path / "hubwatch.lock"
    lock_file.write_text("".join(f'[[model]]\nrepo = "{i}{"x" * 100_000}"\n' for i in range(30)), encoding="utf-8")
    result = run_cli("outdated", "--lock", str(lock_file), config=offline_config, timeout=QUICK_S)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 21 and len(result.stderr) < 20_000, result.stderr[:2000]
    assert lines[0].startswith("error: model 1 (0xxx") and "... (100,001 characters)" in lines[0]
    assert lines[-1] == "error: and 40 more entries that cannot be used (--json lists them all)"
    listed = run_cli("outdated", "--lock", str(lock_file), "--json", config=offline_config, timeout=QUICK_S)
    assert len(json.loads(listed.stdout)["bad_entries"]) == 60
