"""JSON Lines and CSV data files: columns from the first range, rows counted when the file is read whole."""

from __future__ import annotations

import json

import pytest

from tracker.formats import text_shards
from tracker.formats.ranged import BytesSource


def _jsonl(rows: int) -> bytes:
    return b"".join(json.dumps({"id": i, "text": f"row {i}", "score": 0.5, "tags": ["a"]}).encode() + b"\n"
                    for i in range(rows))


def test_a_small_jsonl_file_is_counted():
    """Read whole: its columns (JSON types of the first record) and its rows."""
    facts, kept, note = text_shards.scan(BytesSource(_jsonl(100)), "data/train.jsonl")
    assert note is None and kept == b""
    assert facts == {"format": "jsonl", "columns": [["id", "int"], ["text", "string"], ["score", "float"], ["tags", "list"]],
                     "rows": 100, "rows_counted": True}


def test_a_large_jsonl_file_is_its_columns_and_size():
    """Over WHOLE_FILE: one range of FIRST_RANGE bytes, the columns, and rows said to be not counted."""
    data = _jsonl(40_000)
    assert len(data) > text_shards.WHOLE_FILE
    source = BytesSource(data)
    facts, _, note = text_shards.scan(source, "train.jsonl")
    assert source.bytes_read == text_shards.FIRST_RANGE
    assert facts["columns"][0] == ["id", "int"] and facts["rows"] is None and facts["rows_counted"] is False
    assert note.startswith("rows not counted:")


def test_csv_rows_with_quoted_newlines_count_once():
    """A CSV's header row gives the columns; a quoted newline is not a row."""
    data = b'question,answer\n"two\nlines",yes\nplain,no\n'
    facts, _, note = text_shards.scan(BytesSource(data), "test.csv")
    assert note is None and facts["columns"] == [["question", "string"], ["answer", "string"]] and facts["rows"] == 2


def test_tsv_uses_tabs():
    """A .tsv splits on tabs."""
    facts, _, _ = text_shards.scan(BytesSource(b"a\tb\n1\t2\n"), "x.tsv")
    assert facts["columns"] == [["a", "string"], ["b", "string"]] and facts["rows"] == 1


@pytest.mark.parametrize(("path", "data", "says"), [
    ("train.jsonl.gz", b"\x1f\x8b" + bytes(100), "compressed: size only"),
    ("train.jsonl", b"not json\n", "not readable: the first line is not JSON"),
    ("train.jsonl", b"[1, 2]\n", "not readable: the first record is a JSON list"),
])
def test_what_cannot_be_read_is_said(path, data, says):
    """Compressed files are size only; a first line that is not a JSON object is a note, never an error."""
    facts, _, note = text_shards.scan(BytesSource(data), path)
    assert facts["rows"] is None and note.startswith(says)


@pytest.mark.parametrize(("path", "fmt"), [("a/train.jsonl", "jsonl"), ("x.ndjson", "jsonl"), ("t.csv.zst", "csv"),
                                          ("t.TSV", "tsv"), ("t.parquet", None), ("README.md", None)])
def test_formats_by_suffix(path, fmt):
    """The format a path is read as, compressed or not."""
    assert text_shards.shard_format(path) == fmt
