"""Bytes of a remote file, read by range: the one interface every format reader takes.

A reader asks for `read(offset, length)` and gets exactly those bytes (fewer only at the end of the
file). Every source counts what it fetched (`bytes_read`) and refuses to fetch past its `budget`:
a header that needs more than the budget raises `OverBudget`, which a reader turns into a note on the
file ("header over the 64 MiB cap"), never a failed poll.
"""

from __future__ import annotations

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


class BytesSource:
    """A RangeSource over bytes in memory: tests, and bytes already held in the blob store."""

    def __init__(self, data: bytes, budget: int = DEFAULT_BUDGET) -> None:
        self._data = data
        self.budget = budget
        self._read = 0

    @property
    def size(self) -> int:
        return len(self._data)

    @property
    def bytes_read(self) -> int:
        return self._read

    def read(self, offset: int, length: int) -> bytes:
        check_range(self.size, offset, length)
        stop = min(offset + length, self.size)
        charge(self, stop - offset)
        self._read += stop - offset
        return self._data[offset:stop]


def check_range(size: int, offset: int, length: int) -> None:
    """Refuse a negative length or an offset outside [0, size]."""
    if length < 0 or offset < 0 or offset > size:
        raise RangeError(f"bytes {offset:,}+{length:,} are outside the file's {size:,} bytes")


def charge(source: BytesSource | RangeSource, length: int) -> None:
    """Raise OverBudget when fetching `length` more bytes would pass the source's budget."""
    budget = getattr(source, "budget", DEFAULT_BUDGET)
    if source.bytes_read + length > budget:
        raise OverBudget(source.bytes_read + length, budget)
