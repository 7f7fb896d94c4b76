"""A Parquet file's footer, read by range: its schema (Arrow types), row count, row groups, and the
`huggingface` key-value metadata the datasets library writes (its features: ClassLabel names, Sequence, Image,
Value("int64")), without reading a byte of its data.

The layout (the Parquet format spec): `PAR1`, the column chunks, the footer (FileMetaData, Thrift compact),
then the footer's length (uint32 little-endian) and `PAR1`. The reader fetches the last 8 bytes, then the footer
in one more range: 2 requests and footer + 8 bytes per file; a file of at most `SMALL_FILE` bytes is read
whole in one request. A footer longer than `MAX_FOOTER` is not fetched. pyarrow parses the bytes read (from a
buffer, never the network), with Thrift's string and container sizes and the schema's depth capped, so a
hostile footer costs at most its capped bytes. What the footer says is kept as facts (`scan`'s result), with a
verdict per file: `ok`, `inconsistent` (its totals disagree with its row groups, or its data lies outside the
file) or `unreadable` (the reason in the note).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tracker.formats.hf_features import feature_types
from tracker.formats.ranged import RangeError, RangeSource
from tracker.formats.thrift_compact import ThriftError, read_struct

MAGIC = b"PAR1"
TAIL = 8  # the footer's length (uint32 LE) and the magic
SMALL_FILE = 64 * 1024  # a file this small is read whole: one request
MAX_FOOTER = 16 * 2**20  # a footer over this is not fetched (HF shards' footers are KiB to a few MiB)
THRIFT_STRING_LIMIT = MAX_FOOTER  # no string inside a footer is longer than the footer
THRIFT_CONTAINER_LIMIT = 100_000  # columns, row groups, key-values: a list longer than this is refused
SCHEMA_DEPTH_LIMIT = 64
KEEP_COLUMNS = 2_000  # columns kept by name and type; a wider file keeps its count and these
KEEP_ROW_GROUPS = 1_000  # row groups whose row counts are kept (all are checked)
MAX_HF_METADATA = 4 * 2**20  # the `huggingface` JSON parsed up to this size
HF_KEY = b"huggingface"

ReadRange = Callable[[int, int], bytes]  # (start, end) -> the bytes [start, end)


class FooterError(Exception):
    """The file's tail is not a Parquet footer we read; the message says why."""


def is_parquet(path: str) -> bool:
    """A Parquet file, by its suffix (any case)."""
    return path.lower().endswith(".parquet")


def read_footer(read_range: ReadRange, size: int) -> bytes:
    """The footer's bytes and the 8 after it, by at most 2 ranges (one for a file of at most SMALL_FILE bytes).

    Raises FooterError for a file too short, a wrong magic, or a footer length past the file or over the cap."""
    if size < len(MAGIC) + TAIL:
        raise FooterError(f"too short for Parquet: {size:,} bytes")
    if size <= SMALL_FILE:
        whole = _exactly(read_range, 0, size)
        length = _footer_length(whole[-TAIL:], size)
        return whole[size - TAIL - length:]
    tail = _exactly(read_range, size - TAIL, size)
    length = _footer_length(tail, size)
    return _exactly(read_range, size - TAIL - length, size - TAIL) + tail


def _exactly(read_range: ReadRange, start: int, end: int) -> bytes:
    data = read_range(start, end)
    if len(data) != end - start:
        raise FooterError(f"truncated: bytes {start:,}-{end:,} gave {len(data):,} bytes, {end - start:,} expected")
    return data


def _footer_length(tail: bytes, size: int) -> int:
    if tail[4:] != MAGIC:
        raise FooterError(f"not a Parquet file: it ends with {tail[4:]!r}, not b'PAR1'")
    (length,) = struct.unpack("<I", tail[:4])
    if length == 0:
        raise FooterError("the footer length is 0")
    if length > size - TAIL - len(MAGIC):
        raise FooterError(f"the footer claims {length:,} bytes, more than the file's {size:,} bytes hold")
    if length > MAX_FOOTER:
        raise FooterError(f"footer of {length:,} bytes, over the {MAX_FOOTER // 2**20} MiB cap: not read")
    return length


def parse_footer(footer: bytes, size: int) -> dict[str, Any]:
    """What a footer (its bytes and the 8 after it, as `read_footer` gives them) says about a file of `size`
    bytes. Raises FooterError when pyarrow cannot parse it within the caps."""
    # Here, not at the top: every process that stores a revision loads this module (the format registry asks
    # `is_parquet`), and only a dataset's Parquet file needs pyarrow (40-60 ms of a daemon's start-up).
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        reader = pq.ParquetFile(pa.BufferReader(footer), thrift_string_size_limit=THRIFT_STRING_LIMIT,
                                thrift_container_size_limit=THRIFT_CONTAINER_LIMIT,
                                schema_depth_limit=SCHEMA_DEPTH_LIMIT)
        meta = reader.metadata
        arrow = reader.schema_arrow
        columns = [[field.name, str(field.type)] for field in arrow]  # names are decoded as UTF-8: may fail
        rows, num_columns, created_by = meta.num_rows, meta.num_columns, meta.created_by
        raw = (arrow.metadata or {}).get(HF_KEY) or (meta.metadata or {}).get(HF_KEY)
    except (pa.ArrowException, OSError, ValueError) as err:  # UnicodeDecodeError is a ValueError
        raise FooterError(f"the footer does not parse: {_first_line(err)}") from err
    facts: dict[str, Any] = {
        "rows": rows,
        "row_groups": meta.num_row_groups,
        "row_group_rows": None,
        "column_count": len(columns),
        "columns": columns[:KEEP_COLUMNS],
        "created_by": created_by,
        "footer_bytes": len(footer) - TAIL,
        "features": None,
        "verdict": "ok",
    }
    notes = []
    if len(columns) > KEEP_COLUMNS:
        notes.append(f"{len(columns):,} columns: the first {KEEP_COLUMNS:,} kept")
    # the row groups and column chunks from the Thrift itself: pyarrow's accessors for them abort the process on
    # some hostile footers (a C++ exception it cannot pass to Python)
    try:
        groups = row_groups(footer[:-TAIL])
    except ThriftError as err:
        notes.append(f"row groups not checked: {err}")
    else:
        facts["row_group_rows"] = [g.rows for g in groups[:KEEP_ROW_GROUPS]]
        if (contradiction := _contradiction(groups, rows, num_columns, size - len(footer))) is not None:
            facts["verdict"] = "inconsistent"
            notes.append(contradiction)
    if raw is not None:
        features, note = _hf_features(raw)
        facts["features"] = features
        if note:
            notes.append(note)
    facts["notes"] = notes
    return facts


# FileMetaData 4 row_groups -> RowGroup 1 columns (-> ColumnChunk 3 meta_data -> ColumnMetaData 3 path_in_schema,
# 5 num_values, 7 total_compressed_size, 9 data_page_offset, 11 dictionary_page_offset), RowGroup 3 num_rows; the
# rest (schema, statistics, key-values) is stepped over, never kept
ROW_GROUP_FIELDS = {4: {1: {3: {3: None, 5: None, 7: None, 9: None, 11: None}}, 3: None}}


@dataclass(frozen=True)
class _Chunk:
    path: str
    num_values: int
    start: int
    compressed: int


@dataclass(frozen=True)
class _Group:
    rows: int
    chunks: list[_Chunk]


def row_groups(thrift: bytes) -> list[_Group]:
    """The row groups of a footer's FileMetaData (field 4), each with its rows (field 3) and its column chunks'
    values, first page offset and compressed size (ColumnMetaData 5, 9/11, 7). Raises ThriftError."""
    meta = read_struct(thrift, spec=ROW_GROUP_FIELDS)
    groups = []
    for group in _list(meta.get(4)):
        chunks = []
        for chunk in _list(group.get(1) if isinstance(group, dict) else None):
            col = chunk.get(3) if isinstance(chunk, dict) else None
            if not isinstance(col, dict):
                raise ThriftError("a column chunk without its metadata")
            path = ".".join(p.decode("utf-8", "replace") for p in _list(col.get(3)) if isinstance(p, bytes))
            start = col.get(11) if isinstance(col.get(11), int) and col.get(11) > 0 else col.get(9)
            chunks.append(_Chunk(path, _int(col.get(5)), _int(start), _int(col.get(7))))
        groups.append(_Group(_int(group.get(3) if isinstance(group, dict) else None), chunks))
    return groups


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _contradiction(groups: list[_Group], rows: int, columns: int, data_end: int) -> str | None:
    """What in the footer contradicts itself, in words: its rows against its row groups', a negative count, a row
    group without a chunk per column, a chunk holding fewer values than its row group's rows (every row writes at
    least one level per leaf column), or a chunk whose bytes lie outside the file's data."""
    held = sum(g.rows for g in groups)
    if rows < 0 or any(g.rows < 0 for g in groups):
        return "a negative row count"
    if held != rows:
        return f"the footer claims {rows:,} rows, its {len(groups):,} row group(s) hold {held:,}"
    for n, group in enumerate(groups):
        if len(group.chunks) != columns:
            return f"row group {n} has {len(group.chunks):,} column chunk(s) for {columns:,} columns"
        for chunk in group.chunks:
            if chunk.num_values < group.rows:
                return (f"row group {n} claims {group.rows:,} rows, its column {chunk.path!r} holds "
                        f"{chunk.num_values:,} values")
            if chunk.start < 0 or chunk.compressed < 0 or chunk.start + chunk.compressed > data_end:
                return (f"row group {n} column {chunk.path!r} claims bytes {chunk.start:,}+{chunk.compressed:,}, "
                        f"past the data's {data_end:,} bytes")
    return None


def _hf_features(raw: bytes) -> tuple[dict[str, str] | None, str | None]:
    """The `huggingface` metadata's features as {column: HF feature type}, and a note when unreadable."""
    if len(raw) > MAX_HF_METADATA:
        return None, f"huggingface metadata of {len(raw):,} bytes, over the {MAX_HF_METADATA // 2**20} MiB cap: not read"
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as err:
        return None, f"huggingface metadata is not JSON: {_first_line(err)}"
    info = doc.get("info") if isinstance(doc, dict) else None
    features = info.get("features") if isinstance(info, dict) else None
    if not isinstance(features, dict):
        return None, "huggingface metadata without info.features"
    return feature_types(features)


def scan(source: RangeSource) -> tuple[dict[str, Any], bytes, str | None]:
    """Read a Parquet footer from a RangeSource: (facts, the footer's bytes, a note or None). A file's content
    never raises: an unreadable footer is a note and the verdict `unreadable`."""
    try:
        footer = read_footer(lambda start, end: source.read(start, end - start), source.size)
    except (FooterError, RangeError) as err:
        return {"verdict": "unreadable"}, b"", str(err)
    return facts_of(footer, source.size)


def facts_of(footer: bytes, size: int) -> tuple[dict[str, Any], bytes, str | None]:
    """`scan`'s answer for footer bytes already read (or kept in the blob store)."""
    try:
        facts = parse_footer(footer, size)
    except FooterError as err:
        return {"verdict": "unreadable", "footer_bytes": len(footer) - TAIL}, footer, str(err)
    notes = facts.pop("notes")
    return facts, footer, "; ".join(notes) or None


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return (text[0] if text else type(err).__name__)[:300]
