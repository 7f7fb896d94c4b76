"""The Parquet footer reader: facts against pyarrow's own reading of whole files, the ranges it asks for, and
hostile footers (truncated, corrupt, lying about their length, rows or columns)."""

from __future__ import annotations

import io
import json
import os
import tracemalloc
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.parquet_files import claim_rows, footer_fields, parquet_bytes, wide_footer, with_footer, write_struct
from tracker.formats import parquet
from tracker.formats.ranged import BytesSource
from tracker.formats.registry import run_scan, scanner_for

ROOT = Path(__file__).resolve().parents[3]

# The shape the datasets library writes (Features.to_dict()): a real dataset's mix of feature types.
FEATURES = {
    "text": {"dtype": "string", "_type": "Value"},
    "label": {"names": ["neg", "pos"], "_type": "ClassLabel"},
    "tokens": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"},
    "scores": {"feature": {"dtype": "float32", "_type": "Value"}, "_type": "List"},
    "image": {"_type": "Image"},
    "meta": {"source": {"dtype": "string", "_type": "Value"}, "year": {"dtype": "int64", "_type": "Value"}},
}


def _table(rows: int = 3) -> pa.Table:
    return pa.table({
        "text": [f"text {i}" for i in range(rows)],
        "label": pa.array([i % 2 for i in range(rows)], pa.int64()),
        "tokens": [[f"t{i}"] * (i % 3) for i in range(rows)],
        "scores": pa.array([[0.5] * (i % 2) for i in range(rows)], pa.list_(pa.float32())),
        "image": pa.array([{"bytes": b"\x89PNG", "path": None}] * rows,
                          pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
        "meta": pa.array([{"source": "web", "year": 2024}] * rows, pa.struct([("source", pa.string()), ("year", pa.int64())])),
    })


class Ranges:
    """A read_range over bytes that records each (start, end) asked for."""

    def __init__(self, data: bytes) -> None:
        self.data, self.calls = data, []

    def __call__(self, start: int, end: int) -> bytes:
        self.calls.append((start, end))
        return self.data[start:end]

    @property
    def bytes_read(self) -> int:
        return sum(end - start for start, end in self.calls)


def test_facts_match_pyarrow_reading_the_whole_file():
    """Rows, row groups, Arrow schema and created_by are what pyarrow says of the whole file; the verdict is ok."""
    data = parquet_bytes(_table(10), FEATURES, row_group_size=4)
    facts, footer, note = parquet.scan(BytesSource(data))
    whole = pq.ParquetFile(io.BytesIO(data))
    assert note is None and facts["verdict"] == "ok"
    assert facts["rows"] == whole.metadata.num_rows == 10
    assert facts["row_groups"] == 3 and facts["row_group_rows"] == [4, 4, 2]
    assert facts["columns"] == [[f.name, str(f.type)] for f in whole.schema_arrow]
    assert facts["created_by"] == whole.metadata.created_by
    assert footer == data[-len(footer):] and facts["footer_bytes"] == len(footer) - 8


def test_hf_features_are_read_as_feature_types():
    """The `huggingface` metadata's features become HF feature types: ClassLabel names, Sequence, List, Image, a struct."""
    facts, _, _ = parquet.scan(BytesSource(parquet_bytes(_table(), FEATURES)))
    assert facts["features"] == {
        "text": 'Value("string")', "label": "ClassLabel(names=[neg, pos])", "tokens": 'Sequence(Value("string"))',
        "scores": 'List(Value("float32"))', "image": "Image", "meta": '{source: Value("string"), year: Value("int64")}'}


def test_a_large_file_costs_two_ranges_of_footer_plus_eight_bytes():
    """Over SMALL_FILE bytes: the last 8 bytes, then exactly the footer; nothing of the data."""
    data = parquet_bytes(pa.table({"x": list(range(50_000))}), {"x": {"dtype": "int64", "_type": "Value"}})
    assert len(data) > parquet.SMALL_FILE
    ranges = Ranges(data)
    footer = parquet.read_footer(ranges, len(data))
    assert ranges.calls == [(len(data) - 8, len(data)), (len(data) - len(footer), len(data) - 8)]
    assert ranges.bytes_read == len(footer)


def test_a_small_file_is_one_request():
    """A file of at most SMALL_FILE bytes is read whole in one range."""
    data = parquet_bytes(_table(), FEATURES)
    ranges = Ranges(data)
    footer = parquet.read_footer(ranges, len(data))
    assert ranges.calls == [(0, len(data))] and footer == data[-len(footer):]


def test_a_footer_over_the_cap_is_not_fetched():
    """A footer length over MAX_FOOTER in a file large enough to hold it: refused after the 8-byte tail."""
    size = 100 * 2**20
    tail = (parquet.MAX_FOOTER + 1).to_bytes(4, "little") + b"PAR1"
    calls = []

    def read_range(start: int, end: int) -> bytes:
        calls.append((start, end))
        return tail

    with pytest.raises(parquet.FooterError, match="over the 16 MiB cap"):
        parquet.read_footer(read_range, size)
    assert calls == [(size - 8, size)]


def _corrupt_footer() -> bytes:
    data = parquet_bytes(_table(), FEATURES)
    length = int.from_bytes(data[-8:-4], "little")
    return data[: len(data) - 8 - length] + bytes(range(256)) * (length // 256) + bytes(length % 256) + data[-8:]


@pytest.mark.parametrize(("name", "data", "says"), [
    ("empty", b"", "too short for Parquet: 0 bytes"),
    ("truncated: the tail cut off", parquet_bytes(_table())[:-100], "not a Parquet file: it ends with"),
    ("a CSV file", b"a,b\n1,2\n" * 10, "not a Parquet file"),
    ("footer length past the file", b"PAR1" + bytes(100) + (10**6).to_bytes(4, "little") + b"PAR1",
     "the footer claims 1,000,000 bytes, more than the file's 112 bytes hold"),
    ("footer length zero", b"PAR1" + bytes(100) + bytes(4) + b"PAR1", "the footer length is 0"),
    ("corrupt footer bytes", _corrupt_footer(), "the footer does not parse"),
])
def test_unreadable_files_get_a_verdict_and_a_reason(name, data, says):
    """A file that is not a readable Parquet footer: verdict unreadable, the reason in the note, nothing raised."""
    facts, _, note = parquet.scan(BytesSource(data))
    assert facts["verdict"] == "unreadable"
    assert says in note


def test_a_footer_claiming_a_trillion_rows_is_inconsistent():
    """Rows claimed in the footer and its row groups that the column chunks do not hold: inconsistent, said so."""
    data = parquet_bytes(_table(), FEATURES)
    facts, _, note = parquet.scan(BytesSource(claim_rows(data, 10**12)))
    assert facts["verdict"] == "inconsistent" and facts["rows"] == 10**12
    assert "claims 1,000,000,000,000 rows, its column 'text' holds 3 values" in note


def test_a_footer_whose_total_disagrees_with_its_row_groups_is_inconsistent():
    """The file's row count against the sum of its row groups'."""
    facts, _, note = parquet.scan(BytesSource(claim_rows(parquet_bytes(_table()), 10**12, row_groups_too=False)))
    assert facts["verdict"] == "inconsistent"
    assert "the footer claims 1,000,000,000,000 rows, its 1 row group(s) hold 3" in note


def test_a_million_columns_are_refused_within_bounded_memory():
    """A footer declaring 10^6 columns passes the Thrift container cap: unreadable, and parsing it allocates little."""
    data = wide_footer(10**6)
    tracemalloc.start()
    try:
        facts, _, note = parquet.scan(BytesSource(data))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert facts["verdict"] == "unreadable" and "Exceeded size limit" in note
    assert peak < 3 * len(data)  # the footer's bytes and their copy, nothing per column


def test_a_wide_file_keeps_its_count_and_the_first_columns():
    """3,000 columns: the count, the first KEEP_COLUMNS by name and type, and a note."""
    facts, _, note = parquet.scan(BytesSource(wide_footer(3000)))
    assert facts["column_count"] == 3000 and len(facts["columns"]) == parquet.KEEP_COLUMNS
    assert facts["columns"][0] == ["c", "int64"]
    assert "3,000 columns: the first 2,000 kept" in note


@pytest.mark.parametrize(("value", "says"), [
    ("{not json", "huggingface metadata is not JSON"),
    ('{"info": ["a list"]}', "huggingface metadata without info.features"),
    ('["not", "a", "mapping"]', "huggingface metadata without info.features"),
    ('{"info": {"features": {"x": {"_type": "Sequence", "feature": 7}}}}', "features not read: x: not a feature: int"),
])
def test_unreadable_hf_metadata_keeps_the_rest(value, says):
    """A `huggingface` value that is not JSON, or not the datasets library's shape: a note; rows and columns read."""
    table = _table().replace_schema_metadata({"huggingface": value})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    facts, _, note = parquet.scan(BytesSource(buf.getvalue()))
    assert facts["rows"] == 3 and not facts["features"] and facts["verdict"] == "ok"
    assert says in note


def test_a_chunk_claiming_bytes_past_the_data_is_inconsistent():
    """A column chunk whose offset points past the data region (a footer glued onto other bytes)."""
    data = parquet_bytes(_table(), FEATURES)
    body, fields = footer_fields(data)
    facts, _, note = parquet.scan(BytesSource(with_footer(body[:8], write_struct(fields))))
    assert facts["verdict"] == "inconsistent" and "past the data's" in note


def test_the_registry_reads_parquet_in_datasets_only():
    """Parquet files are scanned in dataset repos (format `parquet`, bytes counted), not in model repos."""
    assert scanner_for("data/train-00000-of-00001.parquet") is None
    spec = scanner_for("data/train-00000-of-00001.parquet", "dataset")
    assert spec is not None and spec.format == "parquet"
    data = parquet_bytes(_table(), FEATURES)
    scan, kept = run_scan(spec, BytesSource(data, budget=spec.budget), "train.parquet")
    assert scan.format == "parquet" and scan.result["rows"] == 3 and scan.bytes_read == len(data)
    assert json.loads(json.dumps(scan.result)) == scan.result and kept == data[-len(kept):]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A replay repo of a 3 GB shard whose footer is real (zeros before it) and a small shard served whole."""
    from tests.support.parquet_files import write_parquet_repo
    from tracker.hub.client import HubClient
    from tracker.standins.replay.control import ReplayServer

    root = tmp_path_factory.mktemp("parquet-repo")
    big = parquet_bytes(pa.table({"x": list(range(20_000))}), {"x": {"dtype": "int64", "_type": "Value"}},
                        row_group_size=1000)
    small = parquet_bytes(_table(), FEATURES)
    write_parquet_repo(root, "hubwatch-tests/shards", {"big.parquet": big, "small.parquet": small},
                       big={"big.parquet": 3 * 10**9})
    with ReplayServer(roots=[root]) as server:
        yield server, HubClient(server.endpoint), server.head_sha("hubwatch-tests/shards"), big, small


def _open(hub, sha, path, size):
    spec = scanner_for(path, "dataset")
    return spec, hub.open_range("hubwatch-tests/shards", sha, path, size, spec.budget, first_block=spec.read_ahead,
                                max_block=spec.read_ahead)


def test_over_http_a_large_shard_costs_the_two_ranges_it_needs(served):
    """Through the Hub client's range source: Range headers for the last 8 bytes, then exactly the footer."""
    server, hub, sha, big, _ = served
    size = 3 * 10**9
    length = int.from_bytes(big[-8:-4], "little")
    spec, source = _open(hub, sha, "big.parquet", size)
    server.reset_requests()
    scan, kept = run_scan(spec, source, "big.parquet")
    ranges = [r.range for r in server.requests if "/resolve/" in r.path]
    assert ranges == [f"bytes={size - 8}-{size - 1}", f"bytes={size - 8 - length}-{size - 9}"]
    assert source.bytes_read == length + 8 == len(kept)
    assert scan.result["rows"] == 20_000 and scan.result["row_groups"] == 20 and scan.result["verdict"] == "ok"


def test_over_http_a_small_shard_is_one_request(served):
    """A shard under SMALL_FILE: one Range request for the whole file."""
    server, hub, sha, _, small = served
    spec, source = _open(hub, sha, "small.parquet", len(small))
    server.reset_requests()
    scan, _ = run_scan(spec, source, "small.parquet")
    assert [r.range for r in server.requests if "/resolve/" in r.path] == [f"bytes=0-{len(small) - 1}"]
    assert scan.result["features"]["label"] == "ClassLabel(names=[neg, pos])"


def test_a_footer_that_aborts_pyarrows_accessors_is_read_in_a_process_that_survives(tmp_path):
    """Size statistics that make pyarrow's column chunk metadata throw through C++ (abort) on some versions: the
    reader never builds it (row groups come from its own Thrift reader), so the process lives and the file has a
    verdict. Run in a child process: a regression aborts the child, not the test run."""
    import subprocess
    import sys

    from tests.support.parquet_files import bad_histogram

    path = tmp_path / "hostile.parquet"
    path.write_bytes(bad_histogram(parquet_bytes(pa.table({"x": [1, 2, 3]}))))
    code = ("import sys, json; from tracker.formats import parquet; from tracker.formats.ranged import BytesSource; "
            "facts, _, note = parquet.scan(BytesSource(open(sys.argv[1], 'rb').read())); "
            "print(json.dumps([facts.get('verdict'), facts.get('rows')]))")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60,
                          cwd=str(ROOT), env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-500:]
    assert json.loads(done.stdout) == ["ok", 3]


def test_row_groups_are_read_from_the_thrift():
    """The footer's row groups and column chunks as its Thrift says, for the checks."""
    data = parquet_bytes(_table(10), FEATURES, row_group_size=4)
    groups = parquet.row_groups(data[-(int.from_bytes(data[-8:-4], "little") + 8):-8])
    assert [g.rows for g in groups] == [4, 4, 2]
    assert [c.path for c in groups[0].chunks][:3] == ["text", "label", "tokens.list.element"]
    assert all(c.num_values >= g.rows and c.start > 0 for g in groups for c in g.chunks)


def test_mutated_footers_never_escape_or_abort():
    """400 footers mutated at random (fixed seed), read in a child process: it lives, nothing escapes `scan`, and
    each file gets a verdict (the fuzzing that found pyarrow's abort, kept as a guard)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "tests.support.parquet_fuzz", "1", "400"], capture_output=True,
                          text=True, timeout=120, cwd=str(ROOT), env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-800:]
    report = json.loads(done.stdout)
    assert report["escaped"] == [] and sum(report["verdicts"].values()) == 400
    assert {"ok", "inconsistent", "unreadable"} <= set(report["verdicts"])
