"""Thrift's compact protocol read without trusting it: enough of a Parquet footer (FileMetaData) for the checks
pyarrow cannot be trusted to survive. pyarrow parses the footer and gives the schema, but building a row group's
column chunk metadata from a hostile footer can throw a C++ exception through code that cannot pass it to Python
(the process aborts: "terminate called after throwing an instance of 'parquet::ParquetException'"), so the row
groups and their column chunks are read here instead.

A struct is read into {field id: value}; lists into Python lists; binary into bytes. Every length is checked
against the bytes left, nesting is capped (`MAX_DEPTH`) and so is the number of values read (`max_values`), so
a hostile footer costs at most its bytes and a bounded walk.
"""

from __future__ import annotations

from typing import Any

BOOL_TRUE, BOOL_FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT, UUID = range(1, 14)
MAX_DEPTH = 32
MAX_VALUES = 1_000_000  # values read, kept or stepped over: about 2 s of Python at most


class ThriftError(ValueError):
    """The bytes are not a compact-protocol struct we read: truncated, too deep, too many values, a bad type."""


class _Reader:
    def __init__(self, data: bytes, max_values: int) -> None:
        self.data, self.pos, self.left = memoryview(data), 0, max_values

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise ThriftError(f"truncated at byte {self.pos:,}")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def varint(self) -> int:
        shift = value = 0
        while True:
            byte = self.byte()
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise ThriftError(f"a varint longer than 10 bytes at byte {self.pos:,}")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ThriftError(f"a length of {n:,} at byte {self.pos:,} passes the {len(self.data):,} bytes")
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return out

    def count(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise ThriftError("more values than the cap")

    def skip(self, kind: int, depth: int) -> None:
        """Step over one value without keeping it (counted and capped as a kept one)."""
        self.count()
        if depth > MAX_DEPTH:
            raise ThriftError(f"nested deeper than {MAX_DEPTH}")
        if kind in (BOOL_TRUE, BOOL_FALSE, BYTE):
            self.byte()
        elif kind in (I16, I32, I64):
            self.varint()
        elif kind in (DOUBLE, UUID):
            self.take(8 if kind == DOUBLE else 16)
        elif kind == BINARY:
            n = self.varint()
            if self.pos + n > len(self.data):
                raise ThriftError(f"a length of {n:,} at byte {self.pos:,} passes the {len(self.data):,} bytes")
            self.pos += n
        elif kind in (LIST, SET):
            size, elem = self.list_head()
            for _ in range(size):
                self.skip(elem, depth + 1)
        elif kind == MAP:
            size = self.varint()
            types = self.byte() if size else 0
            for _ in range(size):
                self.skip(types >> 4, depth + 1)
                self.skip(types & 0x0F, depth + 1)
        elif kind == STRUCT:
            self.struct(depth + 1, {})
        else:
            raise ThriftError(f"unknown compact type {kind} at byte {self.pos:,}")

    def value(self, kind: int, depth: int, spec: Spec = None) -> Any:
        self.count()
        if depth > MAX_DEPTH:
            raise ThriftError(f"nested deeper than {MAX_DEPTH}")
        if kind in (BOOL_TRUE, BOOL_FALSE):  # inside a list: one byte
            return self.byte() == 1
        if kind == BYTE:
            return self.byte()
        if kind in (I16, I32, I64):
            return self.zigzag()
        if kind == DOUBLE:
            return self.take(8)
        if kind == BINARY:
            return self.take(self.varint())
        if kind == UUID:
            return self.take(16)
        if kind in (LIST, SET):
            size, elem = self.list_head()
            return [self.value(elem, depth + 1, spec) for _ in range(size)]
        if kind == MAP:
            return self.map(depth)
        if kind == STRUCT:
            return self.struct(depth, spec)
        raise ThriftError(f"unknown compact type {kind} at byte {self.pos:,}")

    def list_head(self) -> tuple[int, int]:
        head = self.byte()
        size, elem = head >> 4, head & 0x0F
        if size == 15:
            size = self.varint()
        if size > len(self.data) - self.pos:  # every value takes a byte at least
            raise ThriftError(f"a list of {size:,} values in {len(self.data) - self.pos:,} bytes")
        return size, elem

    def map(self, depth: int) -> dict[Any, Any]:
        size = self.varint()
        if size == 0:
            return {}
        types = self.byte()
        out = {}
        for _ in range(size):
            key = self.value(types >> 4, depth + 1)
            out[key if isinstance(key, (int, bytes)) else repr(key)] = self.value(types & 0x0F, depth + 1)
        return out

    def struct(self, depth: int, spec: Spec = None) -> dict[int, Any]:
        """A struct's fields; with a `spec`, only the fields it names (each with the spec of its own fields, None:
        all of them), the others stepped over."""
        if depth > MAX_DEPTH:
            raise ThriftError(f"nested deeper than {MAX_DEPTH}")
        fields: dict[int, Any] = {}
        last = 0
        while True:
            head = self.byte()
            if head == 0:
                return fields
            kind, delta = head & 0x0F, head >> 4
            fid = last + delta if delta else self.zigzag()
            if kind in (BOOL_TRUE, BOOL_FALSE):
                self.count()
                if spec is None or fid in spec:
                    fields[fid] = kind == BOOL_TRUE
            elif spec is None:
                fields[fid] = self.value(kind, depth + 1)
            elif fid in spec:
                fields[fid] = self.value(kind, depth + 1, spec[fid])
            else:
                self.skip(kind, depth + 1)
            last = fid


Spec = dict[int, "Spec | None"] | None


def read_struct(data: bytes, max_values: int = MAX_VALUES, spec: Spec = None) -> dict[int, Any]:
    """The compact struct at the start of `data` as {field id: value}; with a `spec` ({field id: its spec}), only
    the fields it names are kept (a list's spec applies to its items). Raises ThriftError."""
    return _Reader(data, max_values).struct(0, spec)
