"""CSV records read with a field bound of the reader's own: the process's `csv.field_size_limit` is never touched,
so a dataset's long text fields are read while every other csv reader in the process (any thread) keeps its limit."""

from __future__ import annotations

import csv
import io
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.formats import csv_records, text_shards
from tracker.formats.ranged import BytesSource

DEFAULT_LIMIT = csv.field_size_limit()
LONG = 200 * 1024  # over the csv module's default field limit (128 KiB), under text_shards.WHOLE_FILE


def _stdlib(text: str, sep: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline=""), delimiter=sep))


@pytest.mark.parametrize("text", [
    "", "a", "a,b\n1,2\n", "a,b\r\n1,2\r\n", "a\rb\n\n\r\nc,", '"two\nlines",x\n', '"a""b",c', '"abc', '"a""',
    'a,"b"c,d\r\ne', 'x"y,z', ",,\n,", '""\n', '"",""', "\n\n\n", 'a,"\r\n",b',
])
def test_the_same_records_as_the_csv_module(text):
    """Tricky records (quoted line breaks, doubled quotes, an unclosed quote, text after a closing quote, bare \\r
    line ends, blank lines, trailing separators) read as `csv.reader(..., newline="")` reads them."""
    assert list(csv_records.records(text, ",")) == _stdlib(text, ",")
    assert list(csv_records.records(text.replace(",", "\t"), "\t")) == _stdlib(text.replace(",", "\t"), "\t")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='ab,;"\r\n \t', max_size=60), st.sampled_from([",", "\t", ";"]))
def test_any_short_text_reads_as_the_csv_module_reads_it(text, sep):
    assert list(csv_records.records(text, sep)) == _stdlib(text, sep)


def test_a_field_over_the_csv_modules_limit_is_read_and_the_limit_left_as_it_was():
    """A 200 KiB quoted field (over the csv module's 128 KiB default) is one field; the process's limit is the
    default after, and the csv module still refuses that field."""
    text = 'id,text\n1,"' + "x" * LONG + '"\n2,short\n'
    facts, _, note = text_shards.scan(BytesSource(text.encode()), "train.csv")
    assert note is None and facts["rows"] == 2 and facts["columns"] == [["id", "string"], ["text", "string"]]
    assert csv.field_size_limit() == DEFAULT_LIMIT
    with pytest.raises(csv.Error, match="field larger than field limit"):
        _stdlib(text, ",")


@pytest.mark.parametrize("field", ['"' + "y" * 11 + '"', "y" * 11, '"' + 'y""' * 6 + '"z'])
def test_a_field_over_the_readers_bound_is_a_csv_error(field):
    """Quoted or not, a field longer than max_field is refused with its size, never cut."""
    with pytest.raises(csv.Error, match=r"field larger than field limit \(10 characters\)"):
        list(csv_records.records(f"a,b\n1,{field}\n", ",", max_field=10))
    assert list(csv_records.records(f"a,{'y' * 10}", ",", max_field=10)) == [["a", "y" * 10]]


@pytest.mark.parametrize(("sep", "max_field"), [(",,", 10), ('"', 10), ("\n", 10), ("", 10), (",", -1)])
def test_a_bad_separator_or_bound_is_refused(sep, max_field):
    with pytest.raises(ValueError, match="separator|max_field"):
        list(csv_records.records("a,b", sep, max_field))


def test_a_text_shard_over_the_bound_is_a_note_not_an_error(monkeypatch):
    """text_shards reads with WHOLE_FILE as the bound: a field over it is the file's note, the facts kept."""
    monkeypatch.setattr(text_shards, "WHOLE_FILE", 1000)
    facts, _, note = text_shards.scan(BytesSource(b'a,b\n1,"' + b"z" * 900 + b'"\n'), "t.csv")
    assert facts["rows"] == 1 and note is None
    monkeypatch.setattr(text_shards, "WHOLE_FILE", 100_000)
    data = b'a\n"' + b"z" * 60_000 + b'"\n'
    monkeypatch.setattr(csv_records, "MAX_FIELD", 1)  # the module default is not what text_shards uses
    facts, _, note = text_shards.scan(BytesSource(data), "t.csv")
    assert note is None and facts["rows"] == 1
    monkeypatch.setattr(text_shards, "WHOLE_FILE", 50_000)  # its first range holds a field over the bound: a note
    facts, _, note = text_shards.scan(BytesSource(data), "t.csv")
    assert facts["rows"] is None and facts["format"] == "csv"
    assert note == "not readable: not CSV: field larger than field limit (50000 characters): one of 60000"


def test_threads_reading_shards_leave_other_csv_readers_alone():
    """While 4 threads read CSV shards with long fields, another thread's csv.reader keeps the process's default
    limit throughout (it refuses a long field every time) and never sees it raised."""
    shard = ('q,a\n"' + "w" * LONG + '",1\n').encode()
    stop = threading.Event()
    seen_limits: set[int] = set()
    refused: list[bool] = []
    results: list[int | None] = []

    def reader() -> None:
        for _ in range(200):
            results.append(text_shards.scan(BytesSource(shard), "x.csv")[0]["rows"])

    def bystander() -> None:
        while not stop.is_set():
            seen_limits.add(csv.field_size_limit())
            try:
                _stdlib('"' + "v" * LONG + '"', ",")
                refused.append(False)
            except csv.Error:
                refused.append(True)

    other = threading.Thread(target=bystander)
    other.start()
    workers = [threading.Thread(target=reader) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stop.set()
    other.join()
    assert results == [1] * 800
    assert seen_limits == {DEFAULT_LIMIT} and refused and all(refused)
