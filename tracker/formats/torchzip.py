"""A zip archive read by range: torch's checkpoint format, the zips `.npz` and `.keras` files are, and any zip under a weight file's name.

Only the end of the file (the end-of-central-directory record, ZIP64 too), the central directory wherever
it lies and the entries asked for are fetched (zip_members.py asks for each member's first bytes and its
pickles, never a torch checkpoint's storages under `data/`). Every count, offset and size is checked
against the file before anything is allocated; a zip that is truncated, whose entries or directory
overlap, or that claims absurd counts raises `ZipFormatError` with a sentence saying which. Oddities a
loader reads past (encryption flags, a local header that disagrees with the directory, a name given twice)
are notes, and the bytes are read as they are.
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass, field

from tracker.formats.ranged import RangeSource

EOCD = b"PK\x05\x06"
ZIP64_LOCATOR = b"PK\x06\x07"
ZIP64_EOCD = b"PK\x06\x06"
CENTRAL = b"PK\x01\x02"
LOCAL = b"PK\x03\x04"
TAIL_SEARCH = 65_535 + 22  # the longest comment plus the record itself
TAIL_FIRST = 8192  # the first read from the end: the end records and a directory of some 80 entries
ENCRYPTED = 0x0001 | 0x0040  # traditional and strong encryption flags
MAX_ENTRIES = 200_000
MAX_CENTRAL_BYTES = 32 * 2**20
DATA_PKL_CAP = 32 * 2**20
LOCAL_EXTRA_GUESS = 128  # torch pads local headers to 64-byte alignment with an extra field
STORED, DEFLATED = 0, 8
DATA_PKL = re.compile(r"(?P<prefix>[^/]+)/data\.pkl")
STORAGE = re.compile(r"(?P<prefix>[^/]+)/data/(?P<key>[^/]+)")


class ZipFormatError(Exception):
    """The bytes are not a zip this reader can trust: the message says what is wrong and where."""


@dataclass(frozen=True)
class ZipEntry:
    """One central-directory record."""

    name: str
    method: int
    flags: int
    compressed_size: int
    size: int
    local_offset: int
    crc: int = 0


@dataclass
class ZipDirectory:
    """A zip's central directory: its entries in order, and where the directory starts."""

    entries: list[ZipEntry]
    central_offset: int
    notes: list[str] = field(default_factory=list)
    cd_size: int = 0
    end_offset: int = 0  # where the end records start (the ZIP64 one when there is one)
    shift: int = 0  # bytes before the zip when it was appended to others (its offsets count from its start)

    def named(self, name: str) -> list[ZipEntry]:
        return [e for e in self.entries if e.name == name]


def read_directory(source: RangeSource) -> ZipDirectory:
    """The central directory of the zip `source` holds, from its end records: the last TAIL_FIRST bytes
    first (the end records and a small directory), back to the longest comment only when the end record
    is not among them, then whatever part of the directory (wherever it lies) they do not hold."""
    size = source.size
    if size < 22:
        raise ZipFormatError(f"not a zip: {size} bytes is shorter than an end-of-central-directory record")
    tail_start = max(0, size - TAIL_FIRST)
    tail = source.read(tail_start, size - tail_start)
    at = _find_eocd(tail)
    if at < 0 and tail_start > 0:
        more = max(0, size - TAIL_SEARCH)
        tail, tail_start = source.read(more, tail_start - more) + tail, more
        at = _find_eocd(tail)
    if at < 0:
        raise ZipFormatError("not a zip: no end-of-central-directory record in the last 64 KiB")
    eocd_offset = tail_start + at
    (_, disk, cd_disk, _, count, cd_size, cd_offset, _) = struct.unpack_from("<4sHHHHIIH", tail, at)
    if disk or cd_disk:
        raise ZipFormatError("multi-disk zips are not read")
    if eocd_offset >= 20 and _bytes_at(source, tail, tail_start, eocd_offset - 20, 4) == ZIP64_LOCATOR:
        locator = _bytes_at(source, tail, tail_start, eocd_offset - 20, 20)
        count, cd_size, cd_offset, eocd_offset = _zip64_end(source, tail, tail_start, locator, eocd_offset - 20)
    elif 0xFFFFFFFF in (cd_size, cd_offset) or count == 0xFFFF:
        raise ZipFormatError("the end record defers to a ZIP64 record, but there is no ZIP64 locator")
    if cd_offset + cd_size > eocd_offset:
        raise ZipFormatError(
            f"the central directory ({cd_size:,} bytes at {cd_offset:,}) runs past its end record at {eocd_offset:,}"
        )
    if count > MAX_ENTRIES or count * 46 > cd_size:
        raise ZipFormatError(f"{count:,} entries cannot fit in a {cd_size:,}-byte central directory (or pass {MAX_ENTRIES:,})")
    if cd_size > MAX_CENTRAL_BYTES:
        raise ZipFormatError(f"the central directory is {cd_size:,} bytes, over the {MAX_CENTRAL_BYTES:,}-byte cap")
    central = _bytes_at(source, tail, tail_start, cd_offset, cd_size)
    shift = eocd_offset - cd_offset - cd_size
    if central[:4] != CENTRAL and count and shift > 0:
        # zipfile's reading of a zip appended to other bytes: every offset counts from where the zip starts
        shifted = _bytes_at(source, tail, tail_start, cd_offset + shift, cd_size)
        if shifted[:4] == CENTRAL:
            central, cd_offset = shifted, cd_offset + shift
        else:
            shift = 0
    else:
        shift = 0
    entries = [_moved(e, shift) for e in _parse_central(central, count)]
    directory = ZipDirectory(entries, cd_offset, cd_size=cd_size, end_offset=eocd_offset, shift=shift)
    _check_layout(directory)
    return directory


def _moved(entry: ZipEntry, shift: int) -> ZipEntry:
    if not shift:
        return entry
    return ZipEntry(entry.name, entry.method, entry.flags, entry.compressed_size, entry.size, entry.local_offset + shift,
                    entry.crc)  # fmt: skip


def _bytes_at(source: RangeSource, tail: bytes, tail_start: int, offset: int, length: int) -> bytes:
    """Bytes [offset, offset + length): from the tail already read where it holds them, the rest read."""
    stop = offset + length
    if offset >= tail_start:
        return tail[offset - tail_start : stop - tail_start]
    before = source.read(offset, min(stop, tail_start) - offset)
    return before + (tail[: stop - tail_start] if stop > tail_start else b"")


def _find_eocd(tail: bytes) -> int:
    """The position of the last EOCD record whose comment length reaches exactly the end of the file."""
    at = tail.rfind(EOCD)
    while at >= 0:
        if at + 22 <= len(tail) and at + 22 + struct.unpack_from("<H", tail, at + 20)[0] == len(tail):
            return at
        at = tail.rfind(EOCD, 0, at)
    return -1


def _zip64_end(source: RangeSource, tail: bytes, tail_start: int, locator: bytes,
               locator_offset: int) -> tuple[int, int, int, int]:
    """(count, central size, central offset, record offset) from the ZIP64 locator and end record."""
    _, disk, record_offset, disks = struct.unpack_from("<4sIQI", locator)
    if disk or disks > 1:
        raise ZipFormatError("multi-disk ZIP64 zips are not read")
    if record_offset + 56 > locator_offset:
        raise ZipFormatError(f"the ZIP64 end record offset {record_offset:,} is past its locator")
    record = _bytes_at(source, tail, tail_start, record_offset, 56)
    if len(record) < 56 or record[:4] != ZIP64_EOCD:
        raise ZipFormatError(f"no ZIP64 end record at {record_offset:,}")
    count, total, cd_size, cd_offset = struct.unpack_from("<QQQQ", record, 24)
    if count != total:
        raise ZipFormatError("multi-disk ZIP64 zips are not read")
    return count, cd_size, cd_offset, record_offset


def _parse_central(central: bytes, count: int) -> list[ZipEntry]:
    entries, at = [], 0
    for index in range(count):
        if central[at : at + 4] != CENTRAL or at + 46 > len(central):
            raise ZipFormatError(f"central directory record {index} is missing or truncated (at +{at:,})")
        (flags, method, crc, csize, usize, name_len, extra_len, comment_len, local) = struct.unpack_from(
            "<8xHH4xIIIHHH8xI", central, at
        )
        end = at + 46 + name_len + extra_len + comment_len
        if end > len(central):
            raise ZipFormatError(f"central directory record {index} runs past the directory")
        name = central[at + 46 : at + 46 + name_len].decode("utf-8", "replace")
        extra = central[at + 46 + name_len : at + 46 + name_len + extra_len]
        usize, csize, local = _zip64_sizes(extra, usize, csize, local, name)
        entries.append(ZipEntry(name, method, flags, csize, usize, local, crc))
        at = end
    return entries


def _zip64_sizes(extra: bytes, usize: int, csize: int, local: int, name: str) -> tuple[int, int, int]:
    """Sizes and offset with the ZIP64 extra field's 8-byte values where the 4-byte ones are saturated."""
    wanted = [v == 0xFFFFFFFF for v in (usize, csize, local)]
    if not any(wanted):
        return usize, csize, local
    at = 0
    while at + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, at)
        if tag == 1:
            body, values, pos = extra[at + 4 : at + 4 + length], [usize, csize, local], 0
            for i, want in enumerate(wanted):
                if want:
                    if pos + 8 > len(body):
                        raise ZipFormatError(f"{name}: the ZIP64 extra field is short")
                    values[i] = struct.unpack_from("<Q", body, pos)[0]
                    pos += 8
            return values[0], values[1], values[2]
        at += 4 + length
    raise ZipFormatError(f"{name}: sizes defer to a ZIP64 extra field that is not there")


def _check_layout(directory: ZipDirectory) -> None:
    """Entries and the central directory (which may lie anywhere before the end records) must not overlap;
    an entry that claims encryption is noted (its bytes are read as they are: a pickle stored plainly under
    that flag is still a pickle some loader reads), as is a name given twice."""
    for entry in directory.entries:
        if entry.flags & ENCRYPTED:
            directory.notes.append(f"{entry.name} claims encryption (flags {entry.flags:#06x}): read as it is")
    spans = sorted([(e.local_offset, e.local_offset + 30 + len(e.name.encode()) + e.compressed_size, e.name)
                    for e in directory.entries]
                   + [(directory.central_offset, directory.central_offset + directory.cd_size, None)])  # fmt: skip
    limit = directory.end_offset or max(end for _, end, _ in spans)
    for (start, end, name), following in zip(spans, [*spans[1:], None], strict=True):
        what = f"{name} ({end - start:,} bytes at {start:,})" if name else f"the central directory at {start:,}"
        if following is not None and end > following[0]:
            other = f"the next entry ({following[2]}) at {following[0]:,}" if following[2] else \
                f"the central directory at {following[0]:,}"
            raise ZipFormatError(f"{what} overlaps {other}")
        if following is None and end > limit:
            raise ZipFormatError(f"{what} overlaps the end records at {limit:,}")
    if len({e.name for e in directory.entries}) != len(directory.entries):
        directory.notes.append("the zip names an entry twice")


def read_entry(source: RangeSource, entry: ZipEntry, cap: int, notes: list[str] | None = None) -> tuple[bytes, int]:
    """The entry's uncompressed bytes and where its data starts; ZipFormatError past `cap` bytes.
    Oddities a loader would read past (a local header naming another file) are added to `notes`."""
    if entry.size > cap:
        raise ZipFormatError(f"{entry.name} is {entry.size:,} bytes, over the {cap:,}-byte cap")
    if entry.compressed_size > cap * 2 + 1024:
        raise ZipFormatError(f"{entry.name} is {entry.compressed_size:,} bytes compressed, over the cap")
    data, start = _read_local(source, entry, entry.compressed_size, notes)
    if len(data) < entry.compressed_size:
        raise ZipFormatError(f"{entry.name} is truncated: {len(data):,} of {entry.compressed_size:,} bytes")
    if entry.method == DEFLATED:
        data = _inflate(entry, data, cap)
        if len(data) != entry.size:
            raise ZipFormatError(f"{entry.name} inflates to {len(data):,} bytes, not its declared {entry.size:,}")
    return data, start


def read_entry_head(source: RangeSource, entry: ZipEntry, limit: int,
                    notes: list[str] | None = None) -> tuple[bytes, int]:
    """The first `limit` uncompressed bytes of an entry (all of it when shorter: a member's header, or the
    first bytes that say what it is) and where its data starts. A deflated entry is read in growing chunks
    (4 KiB, doubling) until they inflate to `limit` bytes, never far past what that needs."""
    if entry.method == STORED:
        return _read_local(source, entry, min(entry.size, limit), notes)
    chunk = min(entry.compressed_size, max(4096, limit // 4))
    data, start = _read_local(source, entry, chunk, notes)
    inflater, out, taken = zlib.decompressobj(-15), bytearray(), len(data)
    try:
        while True:
            out += inflater.decompress(data, limit - len(out))
            if len(out) >= limit or taken >= entry.compressed_size or inflater.eof:
                return bytes(out), start
            more = source.read(start + taken, min(entry.compressed_size - taken, 2 * taken))
            if not more:
                return bytes(out), start
            taken += len(more)
            data = inflater.unconsumed_tail + more
    except zlib.error as err:
        raise ZipFormatError(f"{entry.name} does not inflate: {err}") from err


def _read_local(source: RangeSource, entry: ZipEntry, want: int, notes: list[str] | None = None) -> tuple[bytes, int]:
    """`want` bytes of an entry's data and where they start, read with its local header in one request
    (guessing the extra field's length; a longer one costs a second read). A local header naming another
    file is noted: loaders go by the central directory, so the data is read all the same."""
    if entry.method not in (STORED, DEFLATED):
        raise ZipFormatError(f"{entry.name} uses compression method {entry.method}, which is not read")
    encrypted_header = 12 if entry.flags & 1 else 0  # traditional encryption prefixes 12 bytes
    if entry.method == STORED and entry.compressed_size not in (entry.size, entry.size + encrypted_header):
        raise ZipFormatError(f"{entry.name} is stored but its sizes differ ({entry.compressed_size:,} != {entry.size:,})")
    guess = 30 + len(entry.name.encode()) + LOCAL_EXTRA_GUESS
    block = source.read(entry.local_offset, guess + want)
    if len(block) < 30 or block[:4] != LOCAL:
        raise ZipFormatError(f"{entry.name}: no local header at {entry.local_offset:,}")
    flags, method = struct.unpack_from("<HH", block, 6)
    name_len, extra_len = struct.unpack_from("<HH", block, 26)
    name = block[30 : 30 + name_len].decode("utf-8", "replace")
    if name != entry.name and notes is not None:
        notes.append(f"the local header at {entry.local_offset:,} names {name!r}, the central directory {entry.name!r}")
    if method != entry.method and notes is not None:
        notes.append(f"{entry.name}: the local header says compression method {method}, the central directory "
                     f"{entry.method} (read as the directory says)")  # fmt: skip
    if (flags ^ entry.flags) & ENCRYPTED and notes is not None:
        notes.append(f"{entry.name}: the local header's encryption flags ({flags:#06x}) differ from the directory's")
    skip = 30 + name_len + extra_len
    start = entry.local_offset + skip
    if skip + want <= len(block) or len(block) < guess + want:
        return block[skip : skip + want], start
    return source.read(start, want), start


def _inflate(entry: ZipEntry, data: bytes, cap: int) -> bytes:
    try:
        out = zlib.decompressobj(-15).decompress(data, cap + 1)
    except zlib.error as err:
        raise ZipFormatError(f"{entry.name} does not inflate: {err}") from err
    if len(out) > cap:
        raise ZipFormatError(f"{entry.name} inflates past the {cap:,}-byte cap")
    return out
