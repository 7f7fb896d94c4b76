"""JSON Lines and CSV data files: columns from the first range, rows counted when the file is read whole; a larger
file's last record (from its last range, two requests in all) checked against the columns."""

from __future__ import annotations

import json

import pytest

from tracker.formats import text_shards
from tracker.formats.ranged import BytesSource, CountedSource, RangeError


def _jsonl(rows: int) -> bytes:
    return b"".join(json.dumps({"id": i, "text": f"row {i}", "score": 0.5, "tags": ["a"]}).encode() + b"\n"
                    for i in range(rows))


def test_a_small_jsonl_file_is_counted():
    """Read whole: its columns (JSON types of the first record) and its rows."""
    facts, kept, note = text_shards.scan(BytesSource(_jsonl(100)), "data/train.jsonl")
    assert note is None and kept == b""
    assert facts == {"format": "jsonl", "columns": [["id", "int"], ["text", "string"], ["score", "float"], ["tags", "list"]],
                     "rows": 100, "rows_counted": True}


class Counted(CountedSource):
    """Bytes served by range as the Hub serves them: each read one request, counted; `short` cuts the answer to
    a read at or past `short_from` by that many bytes (a server that stops early), `missing` makes the file's
    bytes end there although its listed size is larger (a file shorter than the range asked for)."""

    def __init__(self, data: bytes, short: int = 0, short_from: int = 0, missing: int | None = None) -> None:
        super().__init__(len(data))
        self.data, self.short, self.short_from, self.missing, self.requests = data, short, short_from, missing, []

    def _take(self, offset: int, stop: int) -> bytes:
        self.requests.append((offset, stop - offset))
        if self.missing is not None and stop > self.missing:
            raise RangeError(f"bytes {offset:,}+{stop - offset:,}: the server has only {self.missing:,} (416)")
        data = self.data[offset:stop]
        if self.short and offset >= self.short_from:
            data = data[: -self.short]
        self._read += len(data)
        return data


def test_a_large_jsonl_file_is_two_ranges_and_its_rows_estimated():
    """Over WHOLE_FILE: two requests (the first and the last range), the columns, the last record checked, rows
    not counted and an estimate labelled as one."""
    data = _jsonl(40_000)
    assert len(data) > text_shards.WHOLE_FILE
    source = Counted(data)
    facts, _, note = text_shards.scan(source, "train.jsonl")
    assert source.requests == [(0, text_shards.FIRST_RANGE), (len(data) - text_shards.LAST_RANGE, text_shards.LAST_RANGE)]
    assert source.bytes_read == text_shards.FIRST_RANGE + text_shards.LAST_RANGE and facts["ranges"] == 2
    assert facts["columns"][0] == ["id", "int"] and facts["rows"] is None and facts["rows_counted"] is False
    assert facts["last_record"] == "same" and "verdict" not in facts
    assert 0.9 * 40_000 < facts["rows_estimate"] < 1.1 * 40_000
    assert note.startswith("rows not counted:") and "(an estimate, never compared)" in note


def test_a_column_added_at_the_end_of_a_file_is_a_finding():
    """The last record has a key the first has not (and lacks one): `inconsistent`, the keys named."""
    data = _jsonl(40_000) + json.dumps({"id": 1, "text": "x", "tags": [], "source": "web"}).encode() + b"\n"
    facts, _, note = text_shards.scan(BytesSource(data), "train.jsonl")
    assert facts["verdict"] == "inconsistent" and facts["last_record"] == "differs"
    assert facts["columns_at_end"] == {"added": ["source"], "missing": ["score"]}
    assert "the last record's columns differ from the first's: added source; without score" in note
    assert facts["columns"] == [["id", "int"], ["text", "string"], ["score", "float"], ["tags", "list"]]


def test_a_file_cut_short_mid_record_is_said():
    """The file ends inside its last record (no newline, not JSON): `inconsistent`, the file may be cut short."""
    data = _jsonl(40_000) + b'{"id": 7, "text": "cut he'
    facts, _, note = text_shards.scan(BytesSource(data), "train.jsonl")
    assert facts["verdict"] == "inconsistent" and "the last record is not JSON" in note and "cut short" in note
    assert facts["columns"][0] == ["id", "int"]


def test_a_truncated_last_range_keeps_the_columns():
    """The server answers the last range with fewer bytes than asked: nothing is claimed of the last record, the
    first range's columns stay, the file is not called inconsistent."""
    data = _jsonl(40_000)
    facts, _, note = text_shards.scan(Counted(data, short=100, short_from=1), "train.jsonl")
    assert facts["last_record"] == "not checked" and "verdict" not in facts and facts["columns"][0] == ["id", "int"]
    assert "last record not checked: the last range came back short (65,436 of 65,536 bytes)" in note


def test_a_file_shorter_than_its_listed_size_keeps_the_columns():
    """The listing says more bytes than the server has: the last range is refused, said, the columns stay."""
    data = _jsonl(40_000)
    facts, _, note = text_shards.scan(Counted(data, missing=len(data) - 10), "train.jsonl")
    assert facts["columns"][0] == ["id", "int"] and facts["last_record"] == "not checked"
    assert "last record not checked:" in note and "(416)" in note


def test_a_file_shorter_than_a_range_is_one_request():
    """A file smaller than the first range is read whole in one request and counted: no second range."""
    source = Counted(_jsonl(10))
    facts, _, note = text_shards.scan(source, "train.jsonl")
    assert len(source.requests) == 1 and facts["rows"] == 10 and facts["rows_counted"] and note is None
    assert "last_record" not in facts


def _csv(rows: int, tail: bytes = b"") -> bytes:
    return b"question,answer,score\n" + b"".join(b'"q %06d, with a comma",a %06d,%d\n' % (i, i, i % 10) for i in range(rows)) + tail


def test_a_large_csv_last_row_checked():
    """A CSV's last row has as many fields as its header: same; one more: `inconsistent`, the counts named."""
    facts, _, note = text_shards.scan(BytesSource(_csv(60_000)), "train.csv")
    assert facts["last_record"] == "same" and "verdict" not in facts and facts["rows"] is None
    assert 0.9 * 60_000 < facts["rows_estimate"] < 1.1 * 60_000
    facts, _, note = text_shards.scan(BytesSource(_csv(60_000, b"q,a,1,extra\n")), "train.csv")
    assert facts["verdict"] == "inconsistent" and facts["columns_at_end"] == {"fields": 4, "header": 3}
    assert "the last row has 4 fields, the header 3" in note


def test_a_quoted_field_across_the_last_range_start_is_read_inside_quotes():
    """The last range starts inside a quoted multi-line field: read as outside quotes the tail breaks CSV's
    quoting, read as inside it holds; the last row is found after the field closes."""
    lines = b"\n".join(b"line %d of a long answer, with a comma" % i for i in range(3_000))
    data = _csv(30_000, b'"a long question","' + lines + b'",5\n"last, row",b,6\n')
    assert lines.count(b"\n") * 30 > text_shards.LAST_RANGE  # the quoted field starts before the last range
    facts, _, note = text_shards.scan(BytesSource(data), "train.csv")
    assert facts["last_record"] == "same", note
    facts, _, note = text_shards.scan(BytesSource(data.replace(b'"last, row",b,6', b'"last, row",b')), "train.csv")
    assert facts["columns_at_end"] == {"fields": 2, "header": 3}


def test_a_last_record_longer_than_the_range_is_not_checked():
    """The last record is one quoted field longer than the last range: no reading of the tail holds; said."""
    lines = b"\n".join(b"line %d of a long answer" % i for i in range(5_000))
    data = _csv(30_000, b'"a long question","' + lines + b'",5\n')
    facts, _, note = text_shards.scan(BytesSource(data), "train.csv")
    assert facts["last_record"] == "not checked" and "verdict" not in facts
    assert "last record not checked: a quoted field crosses the 64 KiB last range's start" in note


def test_a_jsonl_record_longer_than_the_range_is_not_checked():
    data = _jsonl(40_000) + json.dumps({"id": 1, "text": "x" * 70_000}).encode() + b"\n"
    facts, _, note = text_shards.scan(BytesSource(data), "train.jsonl")
    assert facts["last_record"] == "not checked" and "longer than the 64 KiB last range" in note


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
