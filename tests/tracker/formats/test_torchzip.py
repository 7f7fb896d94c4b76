"""The zip reader and a torch checkpoint walked by it: end records, the central directory wherever it lies, data.pkl
without the storages, every malformed directory refused with a reason and every malformed member a note."""

from __future__ import annotations

import struct

import pytest

from tests.support.pickle_bytes import Member, SparseSource, sparse_torch_zip, zip_bytes
from tests.support.zip_layouts import LAYOUTS, PiecesSource, pipeline_source, torch_archive
from tracker.formats import zip_members
from tracker.formats.pickle_files import READ_AHEAD
from tracker.formats.ranged import BytesSource
from tracker.formats.torchzip import DATA_PKL_CAP, ZipFormatError, read_directory, read_entry
from tracker.formats.zip_members import ZipContents, zip_contents

PKL = b"\x80\x02}q\x00."


def _torch(contents: ZipContents) -> tuple[bytes, dict[str, int]]:
    """The data.pkl torch reads and its storages' sizes, as the walk found them."""
    (primary,) = [f for f in contents.found if f.torch]
    return primary.data, primary.storages


def test_reads_data_pkl_and_the_storage_sizes() -> None:
    """The archive's data.pkl and its storages' sizes come back; the small records are no pickles; nothing noted."""
    data = zip_bytes([Member("archive/data.pkl", PKL), Member("archive/byteorder", b"little"),
                      Member("archive/data/0", b"\0" * 40), Member("archive/data/1", b"\0" * 8),
                      Member("archive/version", b"3\n")])  # fmt: skip
    contents = zip_contents(BytesSource(data))
    assert _torch(contents) == (PKL, {"0": 40, "1": 8})
    assert (len(contents.found), contents.notes, contents.certain, contents.members) == (1, [], True, 3)


def test_a_big_endian_checkpoint_is_noted() -> None:
    """A byteorder record other than little is said, without making the checkpoint uncertain."""
    contents = zip_contents(BytesSource(zip_bytes([Member("archive/data.pkl", PKL), Member("archive/byteorder", b"big")])))
    assert contents.notes == ["archive/byteorder: 'big' (torch reads the storages in that byte order)"]
    assert contents.certain


def test_a_multi_gigabyte_checkpoint_is_read_by_its_ends_only() -> None:
    """A 30 GiB ZIP64 checkpoint costs its end, its central directory and data.pkl: well under 1% of it."""
    head, tail, size = sparse_torch_zip(PKL, {str(i): 3 * 2**30 for i in range(10)})
    source = SparseSource(size, head, tail)
    assert _torch(zip_contents(source)) == (PKL, {str(i): 3 * 2**30 for i in range(10)})
    assert source.bytes_read < 200_000 < size // 100
    # the head, the padding after it (looked at for entries the directory does not list) and the end
    assert all(offset <= len(head) or offset >= size - len(tail) - 65_536 for offset, _ in source.reads)


def test_a_comment_after_the_end_record_is_skipped() -> None:
    """The end record is found behind a comment, and an EOCD signature inside the comment is not taken for it."""
    data = zip_bytes([Member("archive/data.pkl", PKL)], comment=b"PK\x05\x06 not the record")
    assert read_directory(BytesSource(data)).entries[0].name == "archive/data.pkl"


def test_a_deflated_data_pkl_is_inflated() -> None:
    """Method 8 entries are inflated with zlib."""
    data = zip_bytes([Member("archive/data.pkl", PKL * 50, deflate=True)])
    assert _torch(zip_contents(BytesSource(data)))[0] == PKL * 50


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
    ],
    ids=["short", "truncated", "zeros", "cd-past-end", "absurd-count", "zip64-missing", "overlap-next", "same-offset",
         "self-overlap-cd"],
)  # fmt: skip
def test_malformed_directories_are_refused_with_a_reason(data: bytes, message: str) -> None:
    """A zip whose end records or directory cannot be trusted raises ZipFormatError naming its problem, never
    reading without bound."""
    source = BytesSource(data)
    with pytest.raises(ZipFormatError, match=message):
        zip_contents(source)
    assert source.bytes_read <= len(data) + 70_000


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_central_patch(GOOD, 10, "<H", 12), "archive/data.pkl uses compression method 12, which is not read"),
        (BOMB, "archive/data.pkl is 5,000,000 bytes, over the 1,000,000-byte cap"),
        (ZEROS_AT_OFFSET, "archive/data.pkl: no local header at 100"),
    ],
    ids=["method", "pkl-over-cap", "bad-local"],
)  # fmt: skip
def test_a_malformed_member_is_a_note_and_leaves_the_walk_uncertain(data: bytes, message: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A member that cannot be read is named with its problem; the walk goes on, no longer certain."""
    monkeypatch.setattr(zip_members, "DATA_PKL_CAP", 1_000_000)
    contents = zip_contents(BytesSource(data))
    assert message in contents.notes and not contents.certain and contents.unread == 1


def test_an_entry_claiming_encryption_is_noted_and_read_as_it_is() -> None:
    """The flag alone hides nothing: the bytes are read (a plain pickle under it is still a pickle) and the claim
    noted, leaving the walk uncertain."""
    contents = zip_contents(BytesSource(_central_patch(GOOD, 8, "<H", 1)))
    assert _torch(contents)[0] == PKL and not contents.certain
    assert "archive/data.pkl claims encryption" in contents.notes[0]


@pytest.mark.parametrize("size", [2**30, 2**31, 16 * 2**30], ids=["1GiB", "2GiB", "16GiB"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_torch_archive_costs_its_records_alone(layout: str, size: int) -> None:
    """Whatever the order of its records, a checkpoint with a 93 KB data.pkl costs at most 256 KiB through
    the pipeline's Range source (its read-ahead included), and its 600 storages come back."""
    sparse, pkl = torch_archive(size, layout)
    source = pipeline_source(sparse, DATA_PKL_CAP, READ_AHEAD)
    contents = zip_contents(source)
    data_pkl, storages = _torch(contents)
    assert data_pkl == pkl and len(storages) == 600 and contents.notes == [] and contents.certain
    assert len(pkl) < 100 * 1024 and source.bytes_read <= 256 * 1024


def test_the_directory_is_read_where_it_lies() -> None:
    """Only the end (8 KiB first), the directory and the entries asked for are read: no fixed window."""
    sparse, pkl = torch_archive(2**31, "directory in the middle")
    source = PiecesSource(sparse)
    zip_contents(source)
    directory_at = next(at for at, data in sparse.pieces if data[:4] == b"PK\x01\x02")
    assert source.reads[0] == (sparse.size - 8192, 8192)
    assert any(offset == directory_at for offset, _ in source.reads)
    assert source.bytes_read < 8192 + 2 * len(pkl) + 70_000  # the directory is some 62 KB


def test_a_local_header_naming_another_file_is_noted_and_read_anyway() -> None:
    """Loaders go by the central directory: the data is read, the mismatch noted."""
    data = zip_bytes([Member("archive/data.pkl", PKL, local_name="archive/other.txt")])
    contents = zip_contents(BytesSource(data))
    assert _torch(contents)[0] == PKL
    assert "names 'archive/other.txt'" in contents.notes[0]


def test_a_second_data_pkl_is_read_too() -> None:
    """Two prefixes: the first entry's is torch's; the other data.pkl is found beside it and noted."""
    data = zip_bytes([Member("b/data.pkl", PKL + b"b"), Member("a/data.pkl", PKL)])
    contents = zip_contents(BytesSource(data))
    assert [(f.name, f.torch) for f in contents.found] == [("b/data.pkl", True), ("a/data.pkl", False)]
    assert "2 data.pkl entries: b/data.pkl, a/data.pkl" in contents.notes


def test_an_entry_over_the_cap_is_refused_before_it_is_read() -> None:
    """A declared size over the cap is refused without fetching the entry."""
    data = zip_bytes([Member("archive/data.pkl", b"\0" * 10_000)])
    source = BytesSource(data)
    entry = read_directory(source).entries[0]
    before = source.bytes_read
    with pytest.raises(ZipFormatError, match="over the 100-byte cap"):
        read_entry(source, entry, 100)
    assert source.bytes_read == before
