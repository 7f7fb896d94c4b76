"""Snapshot.contents: a dict of file bytes whose entries may be read on first use, once."""

from __future__ import annotations

import pytest

from tracker.revision.snapshot import Contents, Snapshot


def _reader(data: bytes, calls: list[str], name: str):
    def read() -> bytes:
        calls.append(name)
        return data
    return read


def test_a_deferred_entry_is_held_and_read_once_when_asked_for() -> None:
    """`in`, len and iteration see a deferred path without reading it; the first read calls the reader, later
    ones do not; setting or deleting it drops the reader."""
    calls: list[str] = []
    contents = Contents({"config.json": b"{}"})
    contents.defer("tokenizer.json", _reader(b"big", calls, "tokenizer"))
    assert "tokenizer.json" in contents and len(contents) == 2 and sorted(contents) == ["config.json", "tokenizer.json"]
    assert contents.is_deferred("tokenizer.json") and calls == []
    assert contents.get("missing") is None and "missing" not in contents
    assert contents["tokenizer.json"] == b"big" and contents.get("tokenizer.json") == b"big"
    assert calls == ["tokenizer"] and not contents.is_deferred("tokenizer.json")
    contents.defer("README.md", _reader(b"x", calls, "readme"))
    contents["README.md"] = b"y"
    del contents["config.json"]
    assert dict(contents) == {"tokenizer.json": b"big", "README.md": b"y"} and calls == ["tokenizer"]
    with pytest.raises(KeyError):
        contents["config.json"]


def test_a_reader_handed_on_is_shared() -> None:
    """A snapshot deferring to its parent's reader (`loader`) and the parent read the bytes once between them."""
    calls: list[str] = []
    parent, child = Contents(), Contents()
    parent.defer("tokenizer.json", _reader(b"big", calls, "tokenizer"))
    child.defer("tokenizer.json", parent.loader("tokenizer.json"))
    assert child["tokenizer.json"] == b"big" and parent["tokenizer.json"] == b"big" and calls == ["tokenizer"]
    child.defer("config.json", Contents({"config.json": b"{}"}).loader("config.json"))
    assert child["config.json"] == b"{}"
    with pytest.raises(KeyError):
        parent.loader("absent")


def test_a_snapshot_given_a_dict_holds_contents() -> None:
    """Snapshot(contents={...}) wraps the dict; equality with a plain dict compares the bytes."""
    snap = Snapshot("org/model", "0" * 40, contents={"config.json": b"{}"})
    assert isinstance(snap.contents, Contents) and snap.contents == {"config.json": b"{}"}
    assert snap.text("config.json") == "{}"
