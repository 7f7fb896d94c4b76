"""The compact-protocol reader the Parquet reader checks row groups with: a real footer read as the test codec
reads it, and hostile bytes refused with a reason."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.support.parquet_files import footer_fields, parquet_bytes, split_footer
from tracker.formats.thrift_compact import ThriftError, read_struct


def test_a_real_footer_reads_as_the_test_codec_reads_it():
    """pyarrow's footer: num_rows, the row group's rows, the schema's names."""
    data = parquet_bytes(pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"]}))
    _, thrift = split_footer(data)
    meta = read_struct(thrift)
    _, fields = footer_fields(data)
    assert meta[3] == 3 and meta[4][0][3] == 3
    assert [s.get(4) for s in meta[2]] == [b"schema", b"a", b"b"]
    assert meta[3] == next(v for f, _, v in fields if f == 3)


@pytest.mark.parametrize(("data", "says"), [
    (b"\x15", "truncated"),
    (b"\x18\xff\xff\x03ab\x00", "passes the"),
    (b"\x19\xf5\xff\xff\xff\x0f\x00", "a list of"),
    (b"\x1c" * 40 + b"\x00" * 40, "nested deeper than 32"),
    (b"\x16" + b"\xff" * 11 + b"\x00", "longer than 10 bytes"),
    (b"\x1e\x00", "unknown compact type 14"),
])
def test_hostile_bytes_are_refused(data, says):
    """Truncation, a length past the end, a list longer than the bytes, deep nesting, a runaway varint, a bad type."""
    with pytest.raises(ThriftError, match=says):
        read_struct(data)


def test_the_value_cap():
    """More values than `max_values`: refused, not walked."""
    with pytest.raises(ThriftError, match="more values than the cap"):
        read_struct(b"\x19\x55" + b"\x02" * 5 + b"\x00", max_values=3)


def test_a_spec_keeps_only_the_fields_it_names():
    """With a spec, the schema and statistics are stepped over; the row groups' rows and chunks are kept."""
    data = parquet_bytes(pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"]}))
    _, thrift = split_footer(data)
    meta = read_struct(thrift, spec={4: {1: {3: {5: None}}, 3: None}})
    assert set(meta) == {4}
    [group] = meta[4]
    assert group[3] == 3 and [chunk[3] for chunk in group[1]] == [{5: 3}, {5: 3}]
