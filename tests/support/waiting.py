"""Waiting on a condition with a deadline, never for a fixed time: a predicate, or a line a process logs."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from collections.abc import Callable


def wait_until(predicate: Callable[[], object], timeout_s: float = 15, step_s: float = 0.01) -> bool:
    """True as soon as `predicate()` is true; False if it is still false at the deadline (checked once more
    then). The step only paces the checks: the wait ends when the condition holds, not after a set time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step_s)
    return bool(predicate())


def read_stderr_until(proc: subprocess.Popen, needle: str, timeout_s: float) -> str:
    """Read the process's stderr until it contains `needle` (no sleeping: wait on the pipe).

    Raw reads on the file descriptor: a buffered readline() could hold a line select() never reports."""
    seen = b""
    fd = proc.stderr.fileno()
    selector = selectors.DefaultSelector()
    selector.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not selector.select(timeout=deadline - time.monotonic()):
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        seen += chunk
        if needle.encode() in seen:
            return seen.decode(errors="replace")
    raise AssertionError(f"{needle!r} not seen in time; stderr so far:\n{seen.decode(errors='replace')}")


def read_log_until(proc: subprocess.Popen, needle: str, timeout_s: float = 60) -> list[dict]:
    """JSON log lines from the process's stderr up to the first whose text contains `needle`.

    Raw reads on the file descriptor, as `read_stderr_until` does: a buffered readline() can hold the line
    waited for (read in the same chunk as the one before it) while select() waits for more that never comes.
    Lines read past the needle are kept on the process for the next call."""
    seen: list[dict] = []
    pending: list[bytes] = proc.__dict__.setdefault("_log_lines", [])
    partial: bytearray = proc.__dict__.setdefault("_log_partial", bytearray())
    fd = proc.stderr.fileno()
    selector = selectors.DefaultSelector()
    selector.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    while True:
        while pending:
            line = pending.pop(0).decode(errors="replace")
            if line.startswith("{"):
                seen.append(json.loads(line))
                if needle in line:
                    return seen
        if time.monotonic() >= deadline or not selector.select(timeout=deadline - time.monotonic()):
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        partial += chunk
        *lines, rest = bytes(partial).split(b"\n")
        partial[:] = rest
        pending += lines
    raise AssertionError(f"{needle!r} not logged in time; saw: {[e.get('event') for e in seen]}")
