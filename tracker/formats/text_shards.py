"""JSON Lines and CSV data files of a dataset, read by range where that is cheap: the columns from the file's
first range (a JSON Lines file's first record, a CSV's header row), and the row count when the file is small
enough to read whole (`WHOLE_FILE`). A larger file is its columns and its size: the result says the rows were
not counted (`rows` None, `rows_counted` False) and why. A compressed file (`.gz`, `.zst`, ...) is its size only.
"""

from __future__ import annotations

import csv
import json
import posixpath
from typing import Any

from tracker.formats import csv_records
from tracker.formats.ranged import RangeError, RangeSource

WHOLE_FILE = 1 * 2**20  # a file up to this size is read whole and its rows counted
FIRST_RANGE = 64 * 1024  # otherwise its first bytes give its columns
MAX_COLUMNS = 2_000
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv"}
COMPRESSED = (".gz", ".zst", ".bz2", ".xz", ".lz4", ".zip")


def shard_format(path: str) -> str | None:
    """"jsonl", "csv" or "tsv" for a text data file this module reads (compressed ones too: size only)."""
    name = path.lower()
    for ext in COMPRESSED:
        if name.endswith(ext):
            name = name[: -len(ext)]
            break
    return FORMATS.get(posixpath.splitext(name)[1])


def is_text_shard(path: str) -> bool:
    return shard_format(path) is not None


def scan(source: RangeSource, path: str) -> tuple[dict[str, Any], bytes, str | None]:
    """(facts, b"", note): `format`, `columns` ([name, JSON type or "string"]), `rows` (None when not counted),
    `rows_counted`. A file's content never raises: what could not be read is the note."""
    fmt = shard_format(path) or "unknown"
    facts: dict[str, Any] = {"format": fmt, "columns": None, "rows": None, "rows_counted": False}
    if path.lower().endswith(COMPRESSED):
        return facts, b"", "compressed: size only"
    whole = source.size <= WHOLE_FILE
    try:
        data = source.read(0, source.size if whole else FIRST_RANGE)
    except RangeError as err:
        return facts, b"", f"not readable: {err}"
    if not whole:  # the last line of the range may be cut: drop it
        data = data[: data.rfind(b"\n") + 1] or data
    text = data.decode("utf-8", "replace").lstrip("\ufeff")
    try:
        columns, rows = (_jsonl if fmt == "jsonl" else _delimited)(text, "\t" if fmt == "tsv" else ",")
    except ValueError as err:
        return facts, b"", f"not readable: {err}"
    facts["columns"] = columns[:MAX_COLUMNS]
    if whole:
        facts["rows"], facts["rows_counted"] = rows, True
        return facts, b"", None
    return facts, b"", f"rows not counted: {source.size / 2**20:.1f} MiB, over the {WHOLE_FILE // 2**20} MiB read whole"


def _jsonl(text: str, _sep: str) -> tuple[list[list[str]], int]:
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return [], 0
    try:
        first = json.loads(lines[0])
    except ValueError as err:
        raise ValueError(f"the first line is not JSON ({err})") from err
    if not isinstance(first, dict):
        raise ValueError(f"the first record is a JSON {type(first).__name__}, not an object")
    return [[str(k), _json_type(v)] for k, v in first.items()], len(lines)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return "null"


def _delimited(text: str, sep: str) -> tuple[list[list[str]], int]:
    try:
        rows = csv_records.records(text, sep, max_field=WHOLE_FILE)  # a field bound of its own, not the process's
        header = next(rows, None)
        count = sum(1 for row in rows if row)
    except csv.Error as err:
        raise ValueError(f"not CSV: {err}") from err
    return [[name, "string"] for name in header or []], count
