"""The lock file and the cache's pins: parsing, bad entries named, round trip, the stored chain."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tracker.errors import BadInput
from tracker.pins.cache import Pin, pins_from_cache
from tracker.pins.cache_scan import CachedRevision
from tracker.pins.lockfile import read_lock, render_lock
from tracker.pins.outdated import stored_chain

SHA = "0123456789abcdef0123456789abcdef01234567"


def _lock(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hubwatch.lock"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (f'repo = "org/a"\nrevision = "{SHA}"\npinned = true', "model 1 (org/a): unknown key 'pinned'"),
        ('repo = "org/a"\nrevision = "ABC"', "model 1 (org/a): revision 'ABC' is not a 40-hex commit sha"),
        (f'repo = "org/a"\nrevision = "{SHA.upper()}"', "is not a 40-hex commit sha"),
        (f'repo = "not a repo"\nrevision = "{SHA}"', "is not a Hub repo id"),
        (f'repo = "org/a"\nrevision = "{SHA}"\nbranch = "a..b"', "branch 'a..b' is not a branch name"),
        (f'repo = "org/a"\nrevision = "{SHA}"\nfiles = {{"config.json" = 1}}', "files must be a table"),
    ],
)
def test_bad_lock_entries_are_named(tmp_path: Path, entry: str, message: str) -> None:
    """Each kind of bad [[model]] entry is reported with its number and repo; a good entry beside it is read."""
    path = _lock(tmp_path, f'[[model]]\n{entry}\n\n[[model]]\nrepo = "org/good"\nrevision = "{SHA}"\n')
    pins, bad = read_lock(path)
    assert [p.repo_id for p in pins] == ["org/good"]
    assert any(message in f"{b.entry}: {b.message}" for b in bad), bad


def test_lock_round_trips(tmp_path: Path) -> None:
    """What render_lock writes, read_lock reads back to the same pins (odd characters in paths included)."""
    pins = [Pin("org/b", "dev", SHA, "x", files={'tok "en".json': "f" * 40}), Pin("org/a", "main", SHA, "y")]
    read, bad = read_lock(_lock(tmp_path, render_lock(pins)))
    assert bad == []
    assert [(p.repo_id, p.branch, p.sha, p.files) for p in read] == [
        ("org/a", "main", SHA, {}),
        ("org/b", "dev", SHA, {'tok "en".json': "f" * 40}),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [("[[model]\n", "not valid TOML"), ("version = 2\n", "version 2 is not supported"), ("model = 1\n", "array of tables")],
)
def test_unreadable_lock_file_is_bad_input(tmp_path: Path, text: str, message: str) -> None:
    """A lock file that cannot be read as a whole raises BadInput naming the file."""
    path = _lock(tmp_path, text)
    with pytest.raises(BadInput, match=message) as info:
        read_lock(path)
    assert str(path) in str(info.value)


def test_duplicate_and_unknown_top_level_keys_are_named(tmp_path: Path) -> None:
    """A repo pinned twice on one branch and an unknown top-level key are both reported."""
    entry = f'[[model]]\nrepo = "org/a"\nrevision = "{SHA}"\n'
    pins, bad = read_lock(_lock(tmp_path, f"models = 1\n{entry}{entry}"))
    assert len(pins) == 1
    assert {b.message for b in bad} == {"unknown key 'models' (known: version, model)", "org/a@main is pinned twice"}


def test_cache_pins_one_per_ref_and_detached_only_without_refs() -> None:
    """Each ref is a pin; a snapshot no ref names is a detached pin only when its repo has no ref at all."""
    other = "f" * 40
    revisions = [
        CachedRevision("org/a", SHA, ("main", "v1")),
        CachedRevision("org/a", other, ()),
        CachedRevision("org/b", other, ()),
        CachedRevision("org/c", "not-a-sha", ("main",)),
    ]
    pins, bad = pins_from_cache(revisions, [("org/d", "Blob missing")])
    assert [(p.repo_id, p.branch, p.sha, p.detached) for p in pins] == [
        ("org/a", "main", SHA, False),
        ("org/a", "v1", SHA, False),
        ("org/b", "main", other, True),
    ]
    assert [b.entry for b in bad] == ["cache: org/d", "cache: org/c"]


@pytest.mark.parametrize(
    ("head", "pinned", "expected"),
    [("c", "a", ["c", "b"]), ("c", "c", []), ("c", "x", None), ("b", "a", ["b"]), ("z", "a", None)],
)
def test_stored_chain_follows_parents_to_the_pin(head: str, pinned: str, expected: list[str] | None) -> None:
    """The chain from the head back to the pin follows parents; a pin not on it gives None."""
    revisions = [SimpleNamespace(sha="a", parent_sha=None), SimpleNamespace(sha="b", parent_sha="a"),
                 SimpleNamespace(sha="c", parent_sha="b")]
    chain = stored_chain(revisions, head, pinned)  # type: ignore[arg-type]
    assert (None if chain is None else [r.sha for r in chain]) == expected
