"""Pickles written opcode by opcode, as bytes: the malicious corpus is built here and never loaded.

`Ops` appends opcodes (protocol 2 binary forms by default, text forms where asked); `zip_bytes` writes
a zip by hand so tests can give it the layouts torch never writes (two data.pkl, a local header that
names another file, overlapping entries, encryption flags, a ZIP64 end record).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass


class Ops:
    """A pickle under construction; every method appends one opcode and returns self."""

    def __init__(self, protocol: int | None = 2) -> None:
        self.out = bytearray()
        if protocol is not None:
            self.out += b"\x80" + bytes([protocol])

    def raw(self, data: bytes) -> Ops:
        self.out += data
        return self

    def glob(self, module: str, name: str) -> Ops:
        return self.raw(b"c" + f"{module}\n{name}\n".encode())

    def inst(self, module: str, name: str) -> Ops:
        return self.raw(b"i" + f"{module}\n{name}\n".encode())

    def string(self, text: str) -> Ops:
        data = text.encode()
        return self.raw(b"X" + struct.pack("<I", len(data)) + data)

    def short_string(self, text: str) -> Ops:
        data = text.encode()
        return self.raw(b"\x8c" + bytes([len(data)]) + data)

    def text_string(self, text: str) -> Ops:
        return self.raw(b"S'" + text.encode() + b"'\n")

    def binbytes(self, data: bytes) -> Ops:
        return self.raw(b"B" + struct.pack("<I", len(data)) + data)

    def int1(self, value: int) -> Ops:
        return self.raw(b"K" + bytes([value]))

    def put(self, key: int) -> Ops:
        return self.raw(b"q" + bytes([key]))

    def get(self, key: int) -> Ops:
        return self.raw(b"h" + bytes([key]))

    def ext1(self, code: int) -> Ops:
        return self.raw(b"\x82" + bytes([code]))

    def ext2(self, code: int) -> Ops:
        return self.raw(b"\x83" + struct.pack("<H", code))

    def ext4(self, code: int) -> Ops:
        return self.raw(b"\x84" + struct.pack("<i", code))

    mark = property(lambda self: self.raw(b"("))
    tuple_ = property(lambda self: self.raw(b"t"))
    tuple1 = property(lambda self: self.raw(b"\x85"))
    tuple2 = property(lambda self: self.raw(b"\x86"))
    empty_tuple = property(lambda self: self.raw(b")"))
    empty_dict = property(lambda self: self.raw(b"}"))
    empty_list = property(lambda self: self.raw(b"]"))
    reduce = property(lambda self: self.raw(b"R"))
    build = property(lambda self: self.raw(b"b"))
    obj = property(lambda self: self.raw(b"o"))
    newobj = property(lambda self: self.raw(b"\x81"))
    newobj_ex = property(lambda self: self.raw(b"\x92"))
    stack_global = property(lambda self: self.raw(b"\x93"))
    memoize = property(lambda self: self.raw(b"\x94"))
    setitem = property(lambda self: self.raw(b"s"))
    setitems = property(lambda self: self.raw(b"u"))
    append = property(lambda self: self.raw(b"a"))
    pop = property(lambda self: self.raw(b"0"))
    dup = property(lambda self: self.raw(b"2"))
    none = property(lambda self: self.raw(b"N"))
    binpersid = property(lambda self: self.raw(b"Q"))
    stop = property(lambda self: self.raw(b"."))

    def bytes(self) -> bytes:
        return bytes(self.out)

    def call(self, module: str, name: str, *args: str) -> Ops:
        """module.name(*args) by GLOBAL, a tuple of strings, REDUCE."""
        ops = self.glob(module, name).mark
        for arg in args:
            ops = ops.string(arg)
        return ops.tuple_.reduce


def calling(module: str, name: str, *args: str) -> bytes:
    """The classic payload: one GLOBAL called with string arguments by REDUCE, then STOP."""
    return Ops().call(module, name, *args).stop.bytes()


@dataclass
class Member:
    """One entry of a hand-written zip."""

    name: str
    data: bytes
    deflate: bool = False
    local_name: str | None = None  # a local header naming something else
    flags: int = 0
    offset_shift: int = 0  # moves the central directory's offset (to make entries overlap)


def zip_bytes(members: list[Member], zip64: bool = False, comment: bytes = b"") -> bytes:
    """A zip as torch and zipfile lay one out: local headers and data, the central directory, the end
    record(s). Each Member's oddities are written as asked."""
    out, central = bytearray(), bytearray()
    for m in members:
        payload = zlib.compress(m.data)[2:-4] if m.deflate else m.data
        method = 8 if m.deflate else 0
        crc = zlib.crc32(m.data)
        local_name = (m.local_name or m.name).encode()
        offset = len(out)
        out += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, m.flags, method, 0, 0, crc, len(payload), len(m.data),
                           len(local_name), 0) + local_name + payload  # fmt: skip
        name = m.name.encode()
        central += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, m.flags, method, 0, 0, crc, len(payload),
                               len(m.data), len(name), 0, 0, 0, 0, 0, offset + m.offset_shift) + name  # fmt: skip
    cd_offset, cd_size, count = len(out), len(central), len(members)
    out += central
    if zip64:
        record_offset = len(out)
        out += struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, cd_size, cd_offset)
        out += struct.pack("<4sIQI", b"PK\x06\x07", 0, record_offset, 1)
        out += struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, len(comment))
    else:
        out += struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, count, count, cd_size, cd_offset, len(comment))
    return bytes(out + comment)


class SparseSource:
    """A RangeSource over a file of `size` bytes that is `head`, zeros, then `tail` (as the replay server's
    LfsBlob serves one), counting what is read."""

    def __init__(self, size: int, head: bytes, tail: bytes) -> None:
        self.size, self.head, self.tail, self.bytes_read = size, head, tail, 0
        self.reads: list[tuple[int, int]] = []

    def read(self, offset: int, length: int) -> bytes:
        from tracker.formats.ranged import check_range

        check_range(self.size, offset, length)
        stop = min(offset + length, self.size)
        self.bytes_read += stop - offset
        self.reads.append((offset, stop - offset))
        tail_start = self.size - len(self.tail)
        head = self.head[offset:stop]
        middle = max(0, min(stop, tail_start) - max(offset, len(self.head)))
        tail = self.tail[max(0, offset - tail_start) : max(0, stop - tail_start)]
        return head + bytes(middle) + tail


def sparse_torch_zip(data_pkl: bytes, storages: dict[str, int], prefix: str = "archive") -> tuple[bytes, bytes, int]:
    """(head, tail, size) of a torch checkpoint whose storages are `storages` (key -> bytes): the head is
    data.pkl's local header and bytes, the tail the central directory and ZIP64 end records; the storages'
    bytes (and their local headers) are the zeros between, never read."""
    names = [(f"{prefix}/data.pkl", data_pkl), (f"{prefix}/byteorder", b"little"), (f"{prefix}/version", b"3\n")]
    head, central, offsets = bytearray(), bytearray(), []
    for name, data in names:
        offsets.append(len(head))
        head += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 45, 0, 0, 0, 0, zlib.crc32(data), len(data), len(data),
                            len(name), 0) + name.encode() + data  # fmt: skip
    entries = [(name, len(data), offset, zlib.crc32(data)) for (name, data), offset in zip(names, offsets, strict=True)]
    at = len(head)
    for key, nbytes in storages.items():
        name = f"{prefix}/data/{key}"
        at += (-at) % 64
        entries.append((name, nbytes, at, 0))
        at += 30 + len(name) + nbytes
    cd_offset = at
    for name, nbytes, offset, crc in entries:
        extra = struct.pack("<HHQQQ", 1, 24, nbytes, nbytes, offset)
        central += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 45, 45, 0, 0, 0, 0, crc, 0xFFFFFFFF, 0xFFFFFFFF,
                               len(name), len(extra), 0, 0, 0, 0, 0xFFFFFFFF) + name.encode() + extra  # fmt: skip
    record_offset = cd_offset + len(central)
    tail = bytes(central) + struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, len(entries), len(entries),
                                        len(central), cd_offset)  # fmt: skip
    tail += struct.pack("<4sIQI", b"PK\x06\x07", 0, record_offset, 1)
    tail += struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    return bytes(head), tail, cd_offset + len(tail)


def npy_bytes(descr: str, shape: tuple[int, ...], body: bytes) -> bytes:
    """A .npy file (format 1.0) with this header and body, padded as numpy pads it."""
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape!r}, }}".encode()
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + body


def numpy_object_array_pickle(values: list[str]) -> bytes:
    """The pickle numpy writes for a 1-d object array of strings (np.save with allow_pickle), by hand."""
    ops = (
        Ops(3).glob("numpy._core.multiarray", "_reconstruct").glob("numpy", "ndarray").int1(0).tuple1
        .raw(b"C\x01b\x87").reduce  # TUPLE3 (ndarray, (0,), b'b')
        .mark.int1(1).int1(len(values)).tuple1.glob("numpy", "dtype").string("O8").raw(b"\x89\x88\x87").reduce
        .mark.int1(3).string("|").none.none.none.raw(b"J\xff\xff\xff\xffJ\xff\xff\xff\xffK\x3f").tuple_.build
        .raw(b"\x89").empty_list.mark
    )  # fmt: skip
    for value in values:
        ops.string(value)
    return ops.raw(b"e").tuple_.build.stop.bytes()
