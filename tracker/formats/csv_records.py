"""CSV and TSV records read with a field size bound of the caller's, not the process's.

The standard `csv` module's only field size limit is `csv.field_size_limit()`, one setting for the whole process:
raising it to read a dataset's long text fields would raise it for every other reader in every thread, and setting
and restoring it around a read still races with them. This reader parses the `csv` module's default dialect (the
excel dialect, as `csv.reader(io.StringIO(text, newline=""), delimiter=sep)` reads it: `"` quotes, a doubled `""`
inside quotes is one, quoted line breaks are data, records end at `\\n`, `\\r\\n` or `\\r`, a blank line is an empty
record, an unclosed quote runs to the end of the text) with `max_field` characters at most per field, and touches
no global state.

    for row in records(text, ",", max_field=2**20):   # csv.Error for a field over max_field
        ...
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from functools import lru_cache

MAX_FIELD = 2**20  # characters per field unless the caller says otherwise

_QUOTED = re.compile(r'"([^"]*(?:""[^"]*)*)"?')  # an unclosed quote runs to the end (the csv module's non-strict way)


@lru_cache(maxsize=8)
def _plain(sep: str) -> re.Pattern[str]:
    """The rest of a field up to the separator or a line break (a quote not at a field's start is data)."""
    return re.compile(f"[^{re.escape(sep)}\\r\\n]*")


def records(text: str, sep: str = ",", max_field: int = MAX_FIELD) -> Iterator[list[str]]:
    """Each record of `text` as its fields (a blank line as []); csv.Error for a field longer than `max_field`
    characters. ValueError for a separator that is not one character other than a quote or a line break."""
    if len(sep) != 1 or sep in '"\r\n':
        raise ValueError(f"a separator is one character other than a quote or a line break, not {sep!r}")
    if max_field < 0:
        raise ValueError(f"max_field is a number of characters, not {max_field}")
    plain = _plain(sep)
    pos, end = 0, len(text)
    while pos < end:
        if text[pos] in "\r\n":
            pos = _after_line_break(text, pos)
            yield []
            continue
        row = []
        while True:
            if text.startswith('"', pos):
                quoted = _QUOTED.match(text, pos)
                assert quoted is not None  # the pattern matches any text starting with a quote
                rest = plain.match(text, quoted.end())
                assert rest is not None
                size = len(quoted[1]) - quoted[1].count('""') + (rest.end() - rest.start())
                value = None if size > max_field else quoted[1].replace('""', '"') + rest[0]
                pos = rest.end()
            else:
                field = plain.match(text, pos)
                assert field is not None
                size, value, pos = field.end() - field.start(), field[0], field.end()
            if value is None or size > max_field:
                raise csv.Error(f"field larger than field limit ({max_field} characters): one of {size}")
            row.append(value)
            if pos < end and text[pos] == sep:
                pos += 1
                continue
            break
        yield row
        if pos < end:
            pos = _after_line_break(text, pos)


def _after_line_break(text: str, pos: int) -> int:
    return pos + 2 if text.startswith("\r\n", pos) else pos + 1
