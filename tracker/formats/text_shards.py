"""JSON Lines and CSV data files of a dataset, read by range where that is cheap: the columns from the file's
first range (a JSON Lines file's first record, a CSV's header row), and the row count when the file is small
enough to read whole (`WHOLE_FILE`, one request). A larger file costs exactly two range requests: its first
`FIRST_RANGE` bytes (the columns) and its last `LAST_RANGE` bytes, whose last complete record is checked against
the columns (a column added at the end of a file, or a last row with more or fewer fields than the header, makes
the file `inconsistent`; a last line that is not JSON, one cut short). Its rows are not counted: the result
says so (`rows` None, `rows_counted` False) and why, with `rows_estimate` (the file's size over the first
range's average record size) labelled as an estimate, never compared. A compressed file (`.gz`, `.zst`, ...) is
its size only.
"""

from __future__ import annotations

import csv
import io
import json
import posixpath
from typing import Any

from tracker.formats import csv_records
from tracker.formats.ranged import RangeError, RangeSource

WHOLE_FILE = 1 * 2**20  # a file up to this size is read whole and its rows counted
FIRST_RANGE = 64 * 1024  # otherwise its first bytes give its columns
LAST_RANGE = 64 * 1024  # and its last bytes its last record, checked against those columns
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
    `rows_counted`; for a file over WHOLE_FILE also `ranges` (requests made: 2), `rows_estimate` (an estimate,
    or None), `last_record` ("same", "differs" or "not checked") with `columns_at_end` when it differs, and
    `verdict` "inconsistent" when the last record contradicts the first. A file's content never raises: what
    could not be read is the note."""
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
    notes = [f"rows not counted: {source.size / 2**20:.1f} MiB, over the {WHOLE_FILE // 2**20} MiB read whole"]
    facts["ranges"] = 1
    facts["rows_estimate"] = _estimate(source.size, data, rows, fmt)
    if facts["rows_estimate"] is not None:
        notes[0] += (f"; about {facts['rows_estimate']:,} rows estimated from the first "
                     f"{FIRST_RANGE // 1024} KiB's average record (an estimate, never compared)")
    facts["last_record"] = "not checked"
    notes += _check_last(source, fmt, columns, facts)
    return facts, b"", "; ".join(notes)


def _estimate(size: int, data: bytes, rows: int, fmt: str) -> int | None:
    """The file's size over the average size of the records in its first range (a CSV's header left out)."""
    head = 0 if fmt == "jsonl" else data.find(b"\n") + 1
    if rows <= 0 or len(data) <= head:
        return None
    return max(1, round((size - head) * rows / (len(data) - head)))


def _check_last(source: RangeSource, fmt: str, columns: list[list[str]], facts: dict[str, Any]) -> list[str]:
    """Read the last range (one request) and compare its last complete record with the first range's columns;
    the notes to add. Sets `ranges`, `last_record`, `columns_at_end` and `verdict` in `facts`."""
    offset = max(0, source.size - LAST_RANGE)
    facts["ranges"] = 2
    try:
        tail = source.read(offset, source.size - offset)
    except RangeError as err:
        return [f"last record not checked: {err}"]
    if len(tail) != source.size - offset:
        return [f"last record not checked: the last range came back short ({len(tail):,} of "
                f"{source.size - offset:,} bytes)"]
    text = tail.decode("utf-8", "replace")
    if fmt == "jsonl":
        keys, why = _last_json(text)
        if keys is None:
            if why.startswith("the last record is"):
                facts["last_record"], facts["verdict"] = "differs", "inconsistent"
            return [why]
        names = [name for name, _ in columns]
        added, missing = [k for k in keys if k not in names], [n for n in names if n not in keys]
        if not added and not missing:
            facts["last_record"] = "same"
            return []
        facts["columns_at_end"] = {"added": added[:MAX_COLUMNS], "missing": missing[:MAX_COLUMNS]}
        parts = [f"added {', '.join(added[:6])}"] if added else []
        parts += [f"without {', '.join(missing[:6])}"] if missing else []
        line = f"the last record's columns differ from the first's: {'; '.join(parts)}"
    else:
        fields, why = _last_delimited(text, "\t" if fmt == "tsv" else ",")
        if fields is None:
            return [why]
        if len(fields) == len(columns):
            facts["last_record"] = "same"
            return []
        facts["columns_at_end"] = {"fields": len(fields), "header": len(columns)}
        line = f"the last row has {len(fields)} fields, the header {len(columns)}"
    facts["last_record"], facts["verdict"] = "differs", "inconsistent"
    return [line]


def _last_json(text: str) -> tuple[list[str] | None, str]:
    """The keys of a JSON Lines tail's last record, or None and why. The tail's first line may be cut (the range
    starts inside it): never used."""
    lines = text.split("\n")[1:]
    last = next((line for line in reversed(lines) if line.strip()), None)
    if last is None:
        return None, f"last record not checked: longer than the {LAST_RANGE // 1024} KiB last range"
    try:
        record = json.loads(last)
    except ValueError as err:
        return None, f"the last record is not JSON ({err}): the file may be cut short"
    if not isinstance(record, dict):
        return None, f"the last record is a JSON {type(record).__name__}, not an object"
    return [str(k) for k in record], ""


def _last_delimited(text: str, sep: str) -> tuple[list[str] | None, str]:
    """The fields of a CSV tail's last complete record, or None and why. The tail starts anywhere, perhaps
    inside a quoted field whose newlines are not record ends: both readings (outside or inside quotes at its
    start) are tried, and the last record is told only when the readings that hold agree on it."""
    found = {record for inside in (False, True) if (record := _last_record(text, sep, inside)) is not None}
    if len(found) != 1:
        return None, (f"last record not checked: a quoted field crosses the {LAST_RANGE // 1024} KiB last range's "
                      "start, or the record is longer than it" if not found else
                      "last record not checked: the last range reads two ways (a quoted field may cross its start)")
    try:
        return next(csv.reader(io.StringIO(found.pop()), delimiter=sep, strict=True)), ""
    except (csv.Error, StopIteration) as err:
        return None, f"last record not checked: {err}"


def _last_record(text: str, sep: str, inside: bool) -> str | None:
    """The text of the last record of `text` read as starting inside a quoted field (`inside`) or not; None when
    that reading breaks CSV's quoting (a quote inside an unquoted field, text after a closing quote, the end
    inside quotes) or the last record's start is not in the text."""
    if '"' not in text:  # no quoting: outside quotes every newline ends a record; inside, the field never closes
        lines = text.split("\n")[1:]
        return None if inside else next((r.rstrip("\r") for r in reversed(lines) if r.strip()), None)
    ends: list[int] = []  # the newlines that end a record
    quoted, closed, field_start = inside, False, not inside
    for at, ch in enumerate(text):
        if quoted:
            if ch == '"':
                quoted, closed = False, True
            continue
        if closed:
            closed = False
            if ch == '"':  # a doubled quote: still inside the field
                quoted = True
                continue
            if ch not in (sep, "\n", "\r"):
                return None
        if ch == '"':
            if not field_start:
                return None
            quoted, field_start = True, False
        elif ch in (sep, "\n"):
            field_start = True
            if ch == "\n":
                ends.append(at)
        elif ch != "\r":
            field_start = False
    if quoted:
        return None
    starts = [e + 1 for e in ends]
    records = [text[a:b] for a, b in zip(starts, [*ends[1:], len(text)], strict=True)]
    return next((r.rstrip("\r\n") for r in reversed(records) if r.strip()), None)


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
