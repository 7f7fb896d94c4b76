"""Bytes of a remote file, read by range: the one interface every format reader takes.

A reader asks for `read(offset, length)` and gets exactly those bytes (fewer only at the end of the
file). Every source counts what it fetched (`bytes_read`) and refuses to fetch past its `budget`:
a header that needs more than the budget raises `OverBudget`, which a reader turns into a note on the
file ("header over the 64 MiB cap"), never a failed poll.
"""

from __future__ import annotations

import os
from typing import Protocol

DEFAULT_BUDGET = 64 * 2**20


class RangeError(Exception):
    """The bytes asked for cannot be had: out of the file, or the server failed in a way that is the file's."""


class OverBudget(RangeError):
    """Reading these bytes would fetch more than the source's budget allows."""

    def __init__(self, needed: int, budget: int) -> None:
        super().__init__(f"needs {needed:,} bytes read, over the {budget:,}-byte cap")
        self.needed, self.budget = needed, budget


class RangeSource(Protocol):
    """A file of known size whose bytes are fetched on demand."""

    @property
    def size(self) -> int: ...

    @property
    def bytes_read(self) -> int:
        """Bytes fetched so far (what a benchmark compares with `size`)."""
        ...

    def read(self, offset: int, length: int) -> bytes:
        """Bytes [offset, offset + length), clipped at the end of the file.

        Raises RangeError for an offset outside the file and OverBudget when the fetch would pass the
        budget."""
        ...


class CountedSource:
    """What the sources share: a size, the bytes fetched so far, and reads checked against the file; a
    subclass fetches the bytes of [offset, stop), charging them to the budget (`_take`)."""

    def __init__(self, size: int, budget: int = DEFAULT_BUDGET) -> None:
        self._size, self.budget, self._read = size, budget, 0

    @property
    def size(self) -> int:
        return self._size

    @property
    def bytes_read(self) -> int:
        return self._read

    def read(self, offset: int, length: int) -> bytes:
        check_range(self._size, offset, length)
        return self._take(offset, min(offset + length, self._size))

    def _take(self, offset: int, stop: int) -> bytes:
        raise NotImplementedError


class BytesSource(CountedSource):
    """A RangeSource over bytes in memory: tests, and bytes already held in the blob store."""

    def __init__(self, data: bytes, budget: int = DEFAULT_BUDGET) -> None:
        super().__init__(len(data), budget)
        self._data = data

    def _take(self, offset: int, stop: int) -> bytes:
        charge(self, stop - offset)
        self._read += stop - offset
        return self._data[offset:stop]


class LocalFileSource(CountedSource):
    """A RangeSource over a local regular file opened once by the caller (pread, never past the budget)."""

    def __init__(self, fd: int, size: int, budget: int = DEFAULT_BUDGET) -> None:
        super().__init__(size, budget)
        self._fd = fd

    def _take(self, offset: int, stop: int) -> bytes:
        charge(self, stop - offset)
        data = os.pread(self._fd, stop - offset, offset)
        self._read += len(data)
        return data


class SliceSource:
    """Bytes [start, start + size) of another source (a zip stored inside a zip), fetched, counted and
    budgeted by that source."""

    def __init__(self, parent: RangeSource, start: int, size: int) -> None:
        self._parent, self._start = parent, start
        self._size = max(0, min(size, parent.size - start))

    @property
    def size(self) -> int:
        return self._size

    @property
    def bytes_read(self) -> int:
        return self._parent.bytes_read

    @property
    def budget(self) -> int:
        return getattr(self._parent, "budget", DEFAULT_BUDGET)

    def read(self, offset: int, length: int) -> bytes:
        check_range(self._size, offset, length)
        return self._parent.read(self._start + offset, min(length, self._size - offset))


def check_range(size: int, offset: int, length: int) -> None:
    """Refuse a negative length or an offset outside [0, size]."""
    if length < 0 or offset < 0 or offset > size:
        raise RangeError(f"bytes {offset:,}+{length:,} are outside the file's {size:,} bytes")


def charge(source: CountedSource | RangeSource, length: int) -> None:
    """Raise OverBudget when fetching `length` more bytes would pass the source's budget."""
    budget = getattr(source, "budget", DEFAULT_BUDGET)
    if source.bytes_read + length > budget:
        raise OverBudget(source.bytes_read + length, budget)
