"""The torch zip reader: end records, the central directory, data.pkl alone, and every malformed zip refused with a reason."""

from __future__ import annotations

import struct

import pytest

from tests.support.pickle_bytes import Member, SparseSource, sparse_torch_zip, zip_bytes
from tests.support.zip_layouts import LAYOUTS, PiecesSource, pipeline_source, torch_archive
from tracker.formats.pickle_files import READ_AHEAD
from tracker.formats.ranged import BytesSource
from tracker.formats.torchzip import DATA_PKL_CAP, ZipFormatError, read_directory, read_entry, read_torch_archive

PKL = b"\x80\x02}q\x00."


def test_reads_data_pkl_storages_byteorder_and_version() -> None:
    """The archive's data.pkl, its storages' sizes and the small text entries come back, nothing else."""
    data = zip_bytes([Member("archive/data.pkl", PKL), Member("archive/byteorder", b"little"),
                      Member("archive/data/0", b"\0" * 40), Member("archive/data/1", b"\0" * 8),
                      Member("archive/version", b"3\n")])  # fmt: skip
    archive = read_torch_archive(BytesSource(data))
    assert (archive.prefix, archive.data_pkl, archive.storages) == ("archive", PKL, {"0": 40, "1": 8})
    assert (archive.byteorder, archive.version, archive.notes) == ("little", "3", [])


def test_a_multi_gigabyte_checkpoint_is_read_by_its_ends_only() -> None:
    """A 30 GiB ZIP64 checkpoint costs its end, its central directory and data.pkl: well under 1% of it."""
    head, tail, size = sparse_torch_zip(PKL, {str(i): 3 * 2**30 for i in range(10)})
    source = SparseSource(size, head, tail)
    archive = read_torch_archive(source)
    assert archive.storages == {str(i): 3 * 2**30 for i in range(10)}
    assert archive.data_pkl == PKL
    assert source.bytes_read < 200_000 < size // 100
    assert all(offset < len(head) or offset >= size - len(tail) - 65_536 for offset, _ in source.reads)


def test_a_comment_after_the_end_record_is_skipped() -> None:
    """The end record is found behind a comment, and an EOCD signature inside the comment is not taken for it."""
    data = zip_bytes([Member("archive/data.pkl", PKL)], comment=b"PK\x05\x06 not the record")
    assert read_directory(BytesSource(data)).entries[0].name == "archive/data.pkl"


def test_a_deflated_data_pkl_is_inflated() -> None:
    """Method 8 entries are inflated with zlib."""
    data = zip_bytes([Member("archive/data.pkl", PKL * 50, deflate=True)])
    assert read_torch_archive(BytesSource(data)).data_pkl == PKL * 50


def _central_patch(data: bytes, field_offset: int, fmt: str, value: int) -> bytes:
    at = data.index(b"PK\x01\x02")
    out = bytearray(data)
    struct.pack_into(fmt, out, at + field_offset, value)
    return bytes(out)


def _eocd_patch(data: bytes, field_offset: int, fmt: str, value: int) -> bytes:
    at = data.rindex(b"PK\x05\x06")
    out = bytearray(data)
    struct.pack_into(fmt, out, at + field_offset, value)
    return bytes(out)


GOOD = zip_bytes([Member("archive/data.pkl", PKL), Member("archive/data/0", b"\0" * 64)])
# data.pkl's central record points into zeros (a padding entry whose sizes claim nothing)
ZEROS_AT_OFFSET = _central_patch(_central_patch(zip_bytes([Member("archive/pad", b"\0" * 200),
                                                           Member("archive/data.pkl", PKL, offset_shift=-141)]),
                                                20, "<I", 0), 24, "<I", 0)  # fmt: skip
BOMB = zip_bytes([Member("archive/data.pkl", b"\0" * 5_000_000, deflate=True)])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"PK\x03\x04 too short", "shorter than an end-of-central-directory record"),
        (GOOD[:-30], "no end-of-central-directory record"),
        (b"\0" * 100, "no end-of-central-directory record"),
        (_eocd_patch(GOOD, 16, "<I", len(GOOD) * 4), "runs past its end record"),
        (_eocd_patch(_eocd_patch(GOOD, 8, "<H", 60_000), 10, "<H", 60_000), "cannot fit"),
        (_eocd_patch(GOOD, 16, "<I", 0xFFFFFFFF), "no ZIP64 locator"),
        (zip_bytes([Member("archive/data.pkl", PKL), Member("archive/data/0", b"\0" * 64, offset_shift=-20)]), "overlaps"),
        (zip_bytes([Member("archive/data.pkl", PKL), Member("archive/data/0", b"\0" * 64, offset_shift=-52)]), "overlaps"),
        (_central_patch(GOOD, 20, "<I", 10_000), "overlaps"),
        (_central_patch(GOOD, 10, "<H", 12), "compression method 12"),
        (zip_bytes([Member("archive/weights", PKL)]), "no <prefix>/data.pkl"),
        (BOMB, "over the"),
        (ZEROS_AT_OFFSET, "no local header"),
    ],
    ids=["short", "truncated", "zeros", "cd-past-end", "absurd-count", "zip64-missing",
         "overlap-next", "same-offset", "self-overlap-cd", "method", "not-torch", "pkl-over-cap", "bad-local"],
)  # fmt: skip
def test_malformed_zips_are_refused_with_a_reason(data: bytes, message: str) -> None:
    """Each malformed zip raises ZipFormatError naming its problem, never reading without bound."""
    source = BytesSource(data)
    with pytest.raises(ZipFormatError, match=message):
        read_torch_archive(source, pkl_cap=1_000_000)
    assert source.bytes_read <= len(data) + 70_000


def test_an_entry_claiming_encryption_is_noted_and_read_as_it_is() -> None:
    """The flag alone hides nothing: the bytes are read (a plain pickle under it is still a pickle) and the claim noted."""
    archive = read_torch_archive(BytesSource(_central_patch(GOOD, 8, "<H", 1)))
    assert archive.data_pkl == PKL
    assert "archive/data.pkl claims encryption" in archive.notes[0]


@pytest.mark.parametrize("size", [2**30, 2**31, 16 * 2**30], ids=["1GiB", "2GiB", "16GiB"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_torch_archive_costs_its_records_alone(layout: str, size: int) -> None:
    """Whatever the order of its records, a checkpoint with a 90 KiB data.pkl costs at most 256 KiB through
    the pipeline's Range source (its read-ahead included), and its 600 tensors come back."""
    sparse, pkl = torch_archive(size, layout)
    source = pipeline_source(sparse, DATA_PKL_CAP, READ_AHEAD)
    archive = read_torch_archive(source)
    assert archive.data_pkl == pkl and len(archive.storages) == 600 and archive.notes == []
    assert (archive.byteorder, archive.version) == ("little", "3")
    assert len(pkl) < 100 * 1024 and source.bytes_read <= 256 * 1024


def test_the_directory_is_read_where_it_lies() -> None:
    """Only the end (8 KiB first), the directory and the entries asked for are read: no fixed window."""
    sparse, pkl = torch_archive(2**31, "directory in the middle")
    source = PiecesSource(sparse)
    read_torch_archive(source)
    directory_at = next(at for at, data in sparse.pieces if data[:4] == b"PK\x01\x02")
    assert source.reads[0] == (sparse.size - 8192, 8192)
    assert any(offset == directory_at for offset, _ in source.reads)
    assert source.bytes_read < 8192 + 2 * len(pkl) + 70_000  # the directory is some 62 KB


def test_a_local_header_naming_another_file_is_noted_and_read_anyway() -> None:
    """Loaders go by the central directory: the data is read, the mismatch noted."""
    data = zip_bytes([Member("archive/data.pkl", PKL, local_name="archive/other.txt")])
    archive = read_torch_archive(BytesSource(data))
    assert archive.data_pkl == PKL
    assert "names 'archive/other.txt'" in archive.notes[0]


def test_a_second_data_pkl_is_read_too() -> None:
    """Two prefixes: the first entry's is torch's; the other data.pkl is kept for scanning and noted."""
    data = zip_bytes([Member("b/data.pkl", PKL + b"b"), Member("a/data.pkl", PKL)])
    archive = read_torch_archive(BytesSource(data))
    assert archive.prefix == "b"
    assert list(archive.other_pickles.values()) == [PKL]
    assert "2 data.pkl entries" in archive.notes[-1]


def test_an_entry_over_the_cap_is_refused_before_it_is_read() -> None:
    """A declared size over the cap is refused without fetching the entry."""
    data = zip_bytes([Member("archive/data.pkl", b"\0" * 10_000)])
    source = BytesSource(data)
    entry = read_directory(source).entries[0]
    before = source.bytes_read
    with pytest.raises(ZipFormatError, match="over the 100-byte cap"):
        read_entry(source, entry, 100)
    assert source.bytes_read == before
