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
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tracker.formats.hf_features import feature_types
from tracker.formats.ranged import RangeError, RangeSource

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
    try:
        reader = pq.ParquetFile(pa.BufferReader(footer), thrift_string_size_limit=THRIFT_STRING_LIMIT,
                                thrift_container_size_limit=THRIFT_CONTAINER_LIMIT,
                                schema_depth_limit=SCHEMA_DEPTH_LIMIT)
        meta = reader.metadata
        arrow = reader.schema_arrow
    except (pa.ArrowException, OSError, ValueError) as err:
        raise FooterError(f"the footer does not parse: {_first_line(err)}") from err
    columns = [[field.name, str(field.type)] for field in arrow]
    groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    facts: dict[str, Any] = {
        "rows": meta.num_rows,
        "row_groups": meta.num_row_groups,
        "row_group_rows": groups[:KEEP_ROW_GROUPS],
        "column_count": len(columns),
        "columns": columns[:KEEP_COLUMNS],
        "created_by": meta.created_by,
        "footer_bytes": len(footer) - TAIL,
        "features": None,
        "verdict": "ok",
    }
    notes = []
    if len(columns) > KEEP_COLUMNS:
        notes.append(f"{len(columns):,} columns: the first {KEEP_COLUMNS:,} kept")
    if sum(groups) != meta.num_rows:
        facts["verdict"] = "inconsistent"
        notes.append(f"the footer claims {meta.num_rows:,} rows, its {len(groups):,} row group(s) hold {sum(groups):,}")
    if any(n < 0 for n in groups) or meta.num_rows < 0:
        facts["verdict"] = "inconsistent"
        notes.append("a negative row count")
    data_end = size - len(footer)
    if (outside := _chunk_outside(meta, data_end)) is not None:
        facts["verdict"] = "inconsistent"
        notes.append(outside)
    raw = (arrow.metadata or {}).get(HF_KEY) or (meta.metadata or {}).get(HF_KEY)
    if raw is not None:
        features, note = _hf_features(raw)
        facts["features"] = features
        if note:
            notes.append(note)
    facts["notes"] = notes
    return facts


def _chunk_outside(meta: pq.FileMetaData, data_end: int, limit: int = 10_000) -> str | None:
    """A note on the first column chunk (of the first `limit`) that contradicts the footer: a row group without a
    chunk per column, a chunk holding fewer values than its row group's rows (every row writes at least one
    level per leaf column), or a chunk whose bytes lie outside the file's data."""
    seen = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        if group.num_columns != meta.num_columns:
            return f"row group {g} has {group.num_columns:,} column chunk(s) for {meta.num_columns:,} columns"
        for c in range(group.num_columns):
            seen += 1
            if seen > limit:
                return None
            chunk = group.column(c)
            if chunk.num_values < group.num_rows:
                return (f"row group {g} claims {group.num_rows:,} rows, its column {chunk.path_in_schema!r} holds "
                        f"{chunk.num_values:,} values")
            start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
            if start is None or start < 0 or start + chunk.total_compressed_size > data_end:
                return (f"row group {g} column {chunk.path_in_schema!r} claims bytes {start}+"
                        f"{chunk.total_compressed_size:,}, past the data's {data_end:,} bytes")
    return None


def _hf_features(raw: bytes) -> tuple[dict[str, str] | None, str | None]:
    """The `huggingface` metadata's features as {column: HF feature type}, and a note when unreadable."""
    if len(raw) > MAX_HF_METADATA:
        return None, f"huggingface metadata of {len(raw):,} bytes, over the {MAX_HF_METADATA // 2**20} MiB cap: not read"
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as err:
        return None, f"huggingface metadata is not JSON: {_first_line(err)}"
    features = (doc.get("info") or {}).get("features") if isinstance(doc, dict) else None
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
