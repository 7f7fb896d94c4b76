"""Local files read as hostile input: regular files only, a size cap, no symlink out of the tree, and a
whole-file write that never goes through what someone planted beside the target."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tracker.errors import BadInput, RefusedFile
from tracker.formats.local_files import read_regular_file, read_text_file, replace_file


def test_regular_file_within_the_limit_is_read(tmp_path: Path) -> None:
    """A regular file at the limit is read whole."""
    path = tmp_path / "f"
    path.write_bytes(b"x" * 64)
    assert read_regular_file(path, 64) == b"x" * 64


def test_file_over_the_limit_is_refused(tmp_path: Path) -> None:
    """One byte over the limit is refused, naming the path and the limit."""
    path = tmp_path / "f"
    path.write_bytes(b"x" * 65)
    with pytest.raises(RefusedFile, match=r"refused file .*/f: larger than 64 bytes"):
        read_regular_file(path, 64)


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda p: p.mkdir(), "a directory, not a regular file"),
        (lambda p: p.symlink_to("/dev/zero"), "a character device, not a regular file"),
    ],
)
def test_what_is_not_a_regular_file_is_refused_before_reading(tmp_path: Path, make, kind: str) -> None:
    """A directory and /dev/zero are refused unread (FIFOs: in a subprocess, in the CLI tests)."""
    path = tmp_path / "thing"
    make(path)
    with pytest.raises(RefusedFile) as info:
        read_regular_file(path, 1024, what="the lock file")
    assert str(info.value) == f"refused the lock file {path}: {kind}"


def test_symlink_inside_the_tree_is_followed_and_one_leaving_it_refused(tmp_path: Path) -> None:
    """With `within`, a symlink to a file inside the tree reads it; one to a file outside is refused unread."""
    tree, outside = tmp_path / "tree", tmp_path / "secret"
    tree.mkdir()
    (tree / "real").write_text("inside", encoding="utf-8")
    outside.write_text("secret text", encoding="utf-8")
    (tree / "near").symlink_to("real")
    (tree / "far").symlink_to(outside)
    assert read_regular_file(tree / "near", 100, within=tree) == b"inside"
    with pytest.raises(RefusedFile, match="a symlink out of") as info:
        read_regular_file(tree / "far", 100, within=tree)
    assert "secret text" not in str(info.value)


def test_text_that_is_not_utf8_is_refused_naming_the_byte(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 are refused with the offset of the first bad one."""
    path = tmp_path / "f"
    path.write_bytes(b"ok\n\xff\xfe")
    with pytest.raises(RefusedFile, match="not UTF-8 text .* at byte 3"):
        read_text_file(path, 100)


def test_missing_file_is_bad_input_not_a_traceback(tmp_path: Path) -> None:
    """A file that is not there is a BadInput saying so."""
    with pytest.raises(BadInput, match="cannot read file .*: No such file or directory"):
        read_regular_file(tmp_path / "nope", 100)


def test_write_ignores_a_planted_temporary_symlink(tmp_path: Path) -> None:
    """A symlink planted where a temporary file might go is neither written through nor renamed over the target."""
    victim = tmp_path / "victim"
    victim.write_text("untouched", encoding="utf-8")
    planted = tmp_path / ".hubwatch.lock.tmp"
    planted.symlink_to(victim)
    target = tmp_path / "hubwatch.lock"
    replace_file(target, b"new")
    assert victim.read_text(encoding="utf-8") == "untouched"
    assert not target.is_symlink() and target.read_bytes() == b"new"
    assert planted.is_symlink() and os.readlink(planted) == str(victim)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".hubwatch.lock.tmp", "hubwatch.lock", "victim"]


def test_write_replaces_a_symlink_at_the_target_instead_of_following_it(tmp_path: Path) -> None:
    """A target that is a symlink becomes a regular file; the file it pointed to is left as it was."""
    victim = tmp_path / "victim"
    victim.write_text("untouched", encoding="utf-8")
    target = tmp_path / "hubwatch.lock"
    target.symlink_to(victim)
    replace_file(target, b"new")
    assert not target.is_symlink() and target.read_bytes() == b"new"
    assert victim.read_text(encoding="utf-8") == "untouched"


def test_write_gets_the_permissions_of_a_new_file(tmp_path: Path) -> None:
    """The written file is readable as any file the user creates (umask applied), not private to them."""
    old = os.umask(0o022)
    try:
        replace_file(tmp_path / "f", b"x")
    finally:
        os.umask(old)
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o644


def test_write_to_a_directory_is_refused(tmp_path: Path) -> None:
    """A target that is a directory is one clear refusal; nothing is left behind."""
    target = tmp_path / "hubwatch.lock"
    target.mkdir()
    with pytest.raises(RefusedFile, match=f"refused the lock file {target}: a directory, not a file"):
        replace_file(target, b"x", what="the lock file")
    assert list(tmp_path.rglob(".*.tmp")) == [] and list(target.iterdir()) == []


def test_write_under_a_file_is_refused(tmp_path: Path) -> None:
    """A target whose parent is a file is one clear refusal naming that parent."""
    (tmp_path / "parent").write_text("a file", encoding="utf-8")
    target = tmp_path / "parent" / "hubwatch.lock"
    with pytest.raises(RefusedFile, match=f"{tmp_path / 'parent'} is not a directory"):
        replace_file(target, b"x", what="the lock file")
    assert (tmp_path / "parent").read_text(encoding="utf-8") == "a file"
