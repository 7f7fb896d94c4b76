"""Parquet files for tests: real ones written by pyarrow with the `huggingface` metadata the datasets library
writes (`{"info": {"features": Features.to_dict()}}`), and hostile footers made by re-encoding a real footer's
Thrift (compact protocol): a struct is a list of (field id, type, value), so a test changes one field and writes
the footer back with its length."""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

# Thrift compact types
BOOL_TRUE, BOOL_FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(1, 13)


def hf_metadata(features: dict[str, Any]) -> dict[str, str]:
    """The schema metadata the datasets library writes beside a table's Arrow schema."""
    return {"huggingface": json.dumps({"info": {"features": features}})}


def parquet_bytes(table: pa.Table, features: dict[str, Any] | None = None, row_group_size: int | None = None) -> bytes:
    """A Parquet file of `table` (with the datasets library's metadata for `features`), as bytes."""
    if features is not None:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **hf_metadata(features)})
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=row_group_size)
    return buf.getvalue()


def split_footer(data: bytes) -> tuple[bytes, bytes]:
    """(the bytes before the footer, the footer's Thrift) of a Parquet file."""
    (length,) = struct.unpack("<I", data[-8:-4])
    return data[: len(data) - 8 - length], data[len(data) - 8 - length : -8]


def with_footer(body: bytes, footer: bytes) -> bytes:
    """A Parquet file of `body` (from `split_footer`) and a footer, with its length and magic."""
    return body + footer + struct.pack("<I", len(footer)) + b"PAR1"


# --- a Thrift compact codec: enough to read a footer into fields and write it back ----------------------------

def _varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _unzig(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _put_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append((n & 0x7F) | 0x80)
        n >>= 7


def _zig(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def read_struct(data: bytes, pos: int = 0) -> tuple[list[list[Any]], int]:
    """A compact struct at `pos`: [[field id, type, value], ...] and the position after it."""
    fields: list[list[Any]] = []
    last = 0
    while True:
        head = data[pos]
        pos += 1
        if head == 0:
            return fields, pos
        kind, delta = head & 0x0F, head >> 4
        if delta:
            fid = last + delta
        else:
            raw, pos = _varint(data, pos)
            fid = _unzig(raw)
        if kind in (BOOL_TRUE, BOOL_FALSE):
            value: Any = kind == BOOL_TRUE
        else:
            value, pos = _read_value(data, pos, kind)
        fields.append([fid, kind, value])
        last = fid


def _read_value(data: bytes, pos: int, kind: int) -> tuple[Any, int]:
    if kind == BYTE:
        return data[pos], pos + 1
    if kind in (I16, I32, I64):
        raw, pos = _varint(data, pos)
        return _unzig(raw), pos
    if kind == DOUBLE:
        return struct.unpack_from("<d", data, pos)[0], pos + 8
    if kind == BINARY:
        n, pos = _varint(data, pos)
        return data[pos : pos + n], pos + n
    if kind in (LIST, SET):
        head = data[pos]
        pos += 1
        n, elem = head >> 4, head & 0x0F
        if n == 15:
            n, pos = _varint(data, pos)
        items = []
        for _ in range(n):
            if elem in (BOOL_TRUE, BOOL_FALSE):
                items.append(data[pos] == 1)
                pos += 1
            else:
                item, pos = _read_value(data, pos, elem)
                items.append(item)
        return (elem, items), pos
    if kind == STRUCT:
        return read_struct(data, pos)
    raise ValueError(f"compact type {kind} not handled")


def write_struct(fields: list[list[Any]]) -> bytes:
    """A struct from `read_struct`'s fields, in compact encoding."""
    out = bytearray()
    last = 0
    for fid, kind, value in fields:
        if kind in (BOOL_TRUE, BOOL_FALSE):
            kind = BOOL_TRUE if value else BOOL_FALSE
        delta = fid - last
        out += bytes([delta << 4 | kind]) if 0 < delta <= 15 else bytes([kind]) + _put_varint(_zig(fid))
        if kind not in (BOOL_TRUE, BOOL_FALSE):
            out += _write_value(kind, value)
        last = fid
    return bytes(out + b"\x00")


def _write_value(kind: int, value: Any) -> bytes:
    if kind == BYTE:
        return bytes([value])
    if kind in (I16, I32, I64):
        return _put_varint(_zig(value))
    if kind == DOUBLE:
        return struct.pack("<d", value)
    if kind == BINARY:
        return _put_varint(len(value)) + value
    if kind in (LIST, SET):
        elem, items = value
        head = bytes([len(items) << 4 | elem]) if len(items) < 15 else bytes([0xF0 | elem]) + _put_varint(len(items))
        if elem in (BOOL_TRUE, BOOL_FALSE):
            return head + bytes(1 if item else 2 for item in items)
        return head + b"".join(_write_value(elem, item) for item in items)
    if kind == STRUCT:
        return write_struct(value)
    raise ValueError(f"compact type {kind} not handled")


def field(fields: list[list[Any]], fid: int) -> list[Any]:
    """The [id, type, value] entry of field `fid` (FileMetaData: 2 schema, 3 num_rows, 4 row_groups)."""
    return next(f for f in fields if f[0] == fid)


def footer_fields(data: bytes) -> tuple[bytes, list[list[Any]]]:
    """(the body, the footer's FileMetaData fields) of a Parquet file."""
    body, footer = split_footer(data)
    fields, end = read_struct(footer)
    assert end == len(footer)
    return body, fields


def claim_rows(data: bytes, rows: int, row_groups_too: bool = True) -> bytes:
    """The file with its footer claiming `rows` rows (and each row group, when `row_groups_too`, its share)."""
    body, fields = footer_fields(data)
    field(fields, 3)[2] = rows
    if row_groups_too:
        groups = field(fields, 4)[2][1]
        for group in groups:
            field(group, 3)[2] = rows // len(groups)
    return with_footer(body, write_struct(fields))


def wide_footer(columns: int, rows: int = 0) -> bytes:
    """A Parquet file of nothing whose footer declares `columns` int64 columns and `rows` rows, no row group (the
    schema list written as bytes at once: a million columns take a moment, not a minute)."""
    root = write_struct([[3, I32, 0], [4, BINARY, b"schema"], [5, I32, columns]])
    leaf = write_struct([[1, I32, 2], [3, I32, 1], [4, BINARY, b"c"]])
    schema = bytes([0xF0 | STRUCT]) + _put_varint(columns + 1) + root + leaf * columns
    footer = (bytes([1 << 4 | I32]) + _put_varint(_zig(2)) + bytes([1 << 4 | LIST]) + schema
              + bytes([1 << 4 | I64]) + _put_varint(_zig(rows)) + bytes([1 << 4 | LIST]) + bytes([STRUCT]) + b"\x00")
    return with_footer(b"PAR1", footer)


# --- dataset repos in memory: data files as the tree lists them, with their scans ------------------------------

GLUE_FEATURES = {
    "cola": {"sentence": {"dtype": "string", "_type": "Value"},
             "label": {"names": ["unacceptable", "acceptable"], "_type": "ClassLabel"},
             "idx": {"dtype": "int32", "_type": "Value"}},
    "mrpc": {"sentence1": {"dtype": "string", "_type": "Value"}, "sentence2": {"dtype": "string", "_type": "Value"},
             "label": {"names": ["not_equivalent", "equivalent"], "_type": "ClassLabel"},
             "idx": {"dtype": "int32", "_type": "Value"}},
}


def glue_table(config: str, rows: int, start: int = 0) -> pa.Table:
    """`rows` rows of a GLUE-shaped config (cola: one sentence, mrpc: two), labels alternating."""
    idx = pa.array(range(start, start + rows), pa.int32())
    label = pa.array([i % 2 for i in range(rows)], pa.int64())
    if config == "cola":
        return pa.table({"sentence": [f"sentence {i}" for i in range(start, start + rows)], "label": label, "idx": idx})
    return pa.table({"sentence1": [f"first {i}" for i in range(start, start + rows)],
                     "sentence2": [f"second {i}" for i in range(start, start + rows)], "label": label, "idx": idx})


def data_file(path: str, data: bytes) -> tuple[Any, Any]:
    """(FileEntry, FileScan) of a dataset file as the tree lists it (LFS sha256) and its scanner reads it."""
    import hashlib

    from storage.blobs import git_blob_oid
    from tracker.formats.ranged import BytesSource
    from tracker.formats.registry import run_scan, scanner_for
    from tracker.revision.snapshot import FileEntry

    entry = FileEntry(path, git_blob_oid(data), len(data), hashlib.sha256(data).hexdigest(), len(data))
    spec = scanner_for(path, "dataset")
    assert spec is not None, path
    scan, _ = run_scan(spec, BytesSource(data, budget=spec.budget), path)
    return entry, scan


def glue_files(counts: dict[str, dict[str, int]], shards: int = 1) -> dict[str, bytes]:
    """{path: Parquet bytes} of a GLUE-shaped dataset: `config/split-0000N-of-0000M.parquet` per config and split,
    its rows spread over `shards` files, each with the config's HF features."""
    out = {}
    for config, splits in counts.items():
        for split, rows in splits.items():
            start = 0
            for i in range(shards):
                n = rows // shards + (1 if i < rows % shards else 0)
                out[f"{config}/{split}-{i:05d}-of-{shards:05d}.parquet"] = parquet_bytes(
                    glue_table(config, n, start), GLUE_FEATURES[config])
                start += n
    return out


def write_parquet_repo(root: Any, repo_id: str, files: dict[str, bytes], big: dict[str, int] | None = None) -> None:
    """A one-commit replay history of Parquet files as LFS files: each of `files` served byte for byte, except
    those `big` names ({path: size}): `PAR1`, zeros, then the file's footer and tail at the very end of `size`
    bytes (a multi-GB shard whose footer is real; the replay's `head`/`tail` extension)."""
    from pathlib import Path

    from tests.support.synthetic_repos import write_repo

    big = big or {}
    lfs = {}
    for i, path in enumerate(files):
        if path in big:
            lfs[path] = {"head": f"parquet/{i}.head", "tail": f"parquet/{i}.tail", "size": big[path]}
        else:
            lfs[path] = {"head": f"parquet/{i}.head", "size": len(files[path])}
    write_repo(Path(root), repo_id, [{"title": "shards", "lfs": lfs}])
    folder = Path(root) / repo_id / "commits" / "0001-commit" / "parquet"
    folder.mkdir(parents=True, exist_ok=True)
    for i, (path, data) in enumerate(files.items()):
        if path in big:
            _, footer = split_footer(data)
            (folder / f"{i}.head").write_bytes(b"PAR1")
            (folder / f"{i}.tail").write_bytes(data[-(len(footer) + 8):])
        else:
            (folder / f"{i}.head").write_bytes(data)


def bad_histogram(data: bytes) -> bytes:
    """The file with its first column chunk's size statistics (ColumnMetaData 16) holding a repetition-level
    histogram of 4 entries for a flat column (1 expected): pyarrow 26 throws a C++ exception building that
    chunk's metadata, from code that cannot pass it to Python (the process aborts)."""
    body, fields = footer_fields(data)
    chunk = field(field(field(fields, 4)[2][1][0], 1)[2][1][0], 3)[2]
    stats = field(chunk, 16)[2]
    field(stats, 2)[2] = (I64, [1, 2, 3, 4])
    return with_footer(body, write_struct(fields))
