"""Torch checkpoints of any size laid out as bytes at offsets, zeros between: never written whole.

`torch_archive(size, layout)` lays out what torch.save writes (data.pkl, the small records, one storage
entry per tensor, the central directory and end records) in one of the orders a reader meets: torch's
own, data.pkl last, ZIP64 end records on a small file, the central directory in the middle, comments on
the archive and on entries. The storages' bytes are zeros that are never materialised, so a 16 GiB
archive costs a few hundred kilobytes of memory. `SparseFile.read` gives any byte range of it;
`PiecesSource` is a RangeSource over it that counts what is read, and `pipeline_source` reads it with the
pipeline's own HubRangeSource policy (read-ahead, segments, budget), only the HTTP request replaced.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

from tests.support.pickle_repos import state_dict_pickle
from tracker.formats.ranged import CountedSource, charge

LAYOUTS = ("usual", "data.pkl last", "zip64", "directory in the middle", "comments")
SMALL_RECORDS = [(".format_version", b"1"), (".storage_alignment", b"64"), ("byteorder", b"little")]
END_RECORDS = [("version", b"3\n"), (".data/serialization_id", b"1234567890123456789012345678901234567890")]


@dataclass
class SparseFile:
    """`size` bytes: each piece's bytes at its offset, zeros everywhere else."""

    size: int
    pieces: list[tuple[int, bytes]] = field(default_factory=list)

    def read(self, offset: int, length: int) -> bytes:
        stop = min(offset + length, self.size)
        out = bytearray(max(0, stop - offset))
        for at, data in self.pieces:
            lo, hi = max(at, offset), min(at + len(data), stop)
            if lo < hi:
                out[lo - offset : hi - offset] = data[lo - at : hi - at]
        return bytes(out)


class PiecesSource(CountedSource):
    """A RangeSource over a SparseFile, counting every read (offset, length)."""

    def __init__(self, sparse: SparseFile, budget: int = 2**40) -> None:
        super().__init__(sparse.size, budget)
        self.sparse = sparse
        self.reads: list[tuple[int, int]] = []

    def _take(self, offset: int, stop: int) -> bytes:
        charge(self, stop - offset)
        self._read += stop - offset
        self.reads.append((offset, stop - offset))
        return self.sparse.read(offset, stop - offset)


def pipeline_source(sparse: SparseFile, budget: int, read_ahead: int | None):
    """The pipeline's HubRangeSource (as `HubClient.open_range` makes it for a scanner) over a SparseFile:
    its read-ahead, held segments and budget as in ingest, the bytes served from the layout."""
    from tracker.hub.client import FIRST_BLOCK, MAX_BLOCK, HubRangeSource

    class _Served(HubRangeSource):
        def _get(self, at: int, want: int) -> bytes:
            self.requests += 1
            data = sparse.read(at, want)
            self._read += len(data)
            return data

    return _Served("synthetic://archive", sparse.size, budget, dict, "synthetic archive", "synthetic/archive", 1.0,
                   read_ahead or FIRST_BLOCK, read_ahead or MAX_BLOCK)  # fmt: skip


def torch_archive(size: int, layout: str = "usual", tensors: int = 600, pkl: bytes | None = None,
                  prefix: str = "archive") -> tuple[SparseFile, bytes]:
    """(the file, its data.pkl): a torch checkpoint of `size` bytes (less up to 63: torch's 64-byte alignment)
    whose `tensors` storages share what the records leave, laid out as `layout` (one of LAYOUTS)."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}: one of {LAYOUTS}")
    if pkl is None:
        pkl = state_dict_pickle([(f"model.layers.{i}.weight", "FloatStorage", (16,)) for i in range(tensors)])
    zip64 = layout == "zip64" or size >= 2**32
    small = [(f"{prefix}/{n}", d) for n, d in SMALL_RECORDS]
    ends = [(f"{prefix}/{n}", d) for n, d in END_RECORDS]
    comment = b"saved by a tool that writes comments " * 1600 if layout == "comments" else b""
    entry_comment = b"entry comment" if layout == "comments" else b""
    reserve = len(pkl) + 200 * tensors + 4096 + len(comment)  # records, directory, end records: what storages leave
    per_storage = (size - reserve) // tensors
    head = [(f"{prefix}/data.pkl", pkl)] if layout != "data.pkl last" else []
    tail = [(f"{prefix}/data.pkl", pkl)] if layout == "data.pkl last" else []
    order = head + small + [(f"{prefix}/data/{i}", per_storage) for i in range(tensors)] + ends + tail
    if layout == "directory in the middle":
        split = len(head) + len(small)
        order = order[:split] + [("<directory>", None)] + order[split:]
    last = len(head) + len(small) + (layout == "directory in the middle") + tensors - 1
    sparse = _lay_out(order, zip64, comment, entry_comment)
    for _ in range(8):  # the last storage takes up the rest (the records after it move, and their padding)
        if 0 <= size - sparse.size < 64:
            return sparse, pkl
        order[last] = (order[last][0], order[last][1] + size - sparse.size - 32)
        sparse = _lay_out(order, zip64, comment, entry_comment)
    raise AssertionError(f"cannot lay out {size:,} bytes ({sparse.size:,})")


def _lay_out(order: list, zip64: bool, comment: bytes, entry_comment: bytes) -> SparseFile:
    """Local headers (data aligned to 64 bytes, as torch aligns it) and data in `order`, one after another,
    the central directory where "<directory>" stands (else after the entries), ZIP64 end records when
    asked, the end record, the comment."""
    sparse, records, at = SparseFile(0), [], 0
    directory_at: int | None = None
    central_size = sum(46 + len(name) + 28 + len(entry_comment) for name, _ in order if name != "<directory>")
    for name, data in order:
        if name == "<directory>":
            directory_at = at
            at += central_size
            continue
        encoded = name.encode()
        nbytes = data if isinstance(data, int) else len(data)
        crc = 0 if isinstance(data, int) else zlib.crc32(data)
        pad = (-(at + 30 + len(encoded) + 4)) % 64
        extra = struct.pack("<HH", 0x4246, pad) + bytes(pad)  # torch's "FB" padding field
        local = struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 45, 0, 0, 0, 0, crc, min(nbytes, 0xFFFFFFFF),
                            min(nbytes, 0xFFFFFFFF), len(encoded), len(extra)) + encoded + extra  # fmt: skip
        sparse.pieces.append((at, local if isinstance(data, int) else local + data))
        records.append((encoded, nbytes, crc, at))
        at += len(local) + nbytes
    central = bytearray()
    for encoded, nbytes, crc, offset in records:
        extra = struct.pack("<HHQQQ", 1, 24, nbytes, nbytes, offset)
        central += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 45, 45, 0, 0, 0, 0, crc, 0xFFFFFFFF, 0xFFFFFFFF,
                               len(encoded), len(extra), len(entry_comment), 0, 0, 0, 0xFFFFFFFF)  # fmt: skip
        central += encoded + extra + entry_comment
    assert len(central) == central_size
    cd_offset = directory_at if directory_at is not None else at
    end_at = at if directory_at is not None else at + central_size
    sparse.pieces.append((cd_offset, bytes(central)))
    count = len(records)
    out = bytearray()
    if zip64:
        out += struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, central_size, cd_offset)
        out += struct.pack("<4sIQI", b"PK\x06\x07", 0, end_at, 1)
        out += struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, len(comment))
    else:
        out += struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, count, count, central_size, cd_offset, len(comment))
    sparse.pieces.append((end_at, bytes(out) + comment))
    sparse.size = end_at + len(out) + len(comment)
    return sparse
