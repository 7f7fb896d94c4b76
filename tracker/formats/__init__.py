"""Weight formats read without downloading weights: GGUF headers and PyTorch pickles, fetched by range.

Every reader here takes a `RangeSource` (ranged.py) and never executes what it reads.

The plumbing every format shares (tracker/snapshot_io.py runs it):

- `SCANNERS`, the registry: a `ScannerSpec` per format, `matches(path)` choosing the files it reads and
  `scan(source)` reading one. Adding a format is adding a spec here; nothing else in the pipeline names one.
- A scanner is `(RangeSource) -> (result, scanned, note)`: `result` a JSON-able dict of what it learned,
  `scanned` the bytes it read that are worth keeping (a GGUF header, a `data.pkl`; b"" for none), kept in
  the blob store so the file can be judged again without a Hub request, and `note` what it could not read,
  in words (None when all was read). A scanner that gives a verdict puts `rules_version` in `result`.
- A scanner never raises for a file's content (bad magic, absurd counts, a header over the cap: a note);
  `run_scan` turns what escapes anyway (a `RangeError`, a reader's bug) into a note too. Hub errors
  (`tracker.errors.HubwatchError`: unavailable, 429) propagate: they abort the revision, to be retried.
- The answer is a `FileScan`, stored once per content id (LFS sha256): `storage.history.NewFileScan`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from tracker.classify import is_gguf
from tracker.errors import HubwatchError
from tracker.formats import gguf
from tracker.formats.ranged import DEFAULT_BUDGET, RangeSource

ScanOutput = tuple[dict[str, Any], bytes, str | None]
Scanner = Callable[[RangeSource], ScanOutput]

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class FileScan:
    """What one scanner read of one file. `format` names the scanner ("gguf", "pickle")."""

    format: str
    result: dict[str, Any] = field(default_factory=dict)
    bytes_read: int = 0
    note: str | None = None
    rules_version: str | None = None
    scanned_oid: str | None = None  # the blob holding the bytes it read


@dataclass(frozen=True)
class ScannerSpec:
    format: str
    matches: Callable[[str], bool]
    scan: Scanner
    budget: int = DEFAULT_BUDGET  # bytes a scan of one file may fetch


SCANNERS: tuple[ScannerSpec, ...] = (ScannerSpec("gguf", is_gguf, gguf.scan),)


def scanner_for(path: str) -> ScannerSpec | None:
    """The scanner that reads this path, if any."""
    return next((spec for spec in SCANNERS if spec.matches(path)), None)


def run_scan(spec: ScannerSpec, source: RangeSource) -> tuple[FileScan, bytes]:
    """Run one scanner over one file: its FileScan (without `scanned_oid`) and the bytes to keep.

    Whatever the file does to the scanner becomes the note; only Hub errors propagate."""
    try:
        result, scanned, note = spec.scan(source)
    except HubwatchError:
        raise
    except Exception as err:  # noqa: BLE001 - a hostile file must not fail the revision: it gets a note
        log.warning("file_scan_failed", format=spec.format, error=f"{type(err).__name__}: {err}"[:300])
        result, scanned, note = {}, b"", f"not readable: {type(err).__name__}: {err}"[:500]
    version = result.get("rules_version")
    return FileScan(spec.format, result, source.bytes_read, note, str(version) if version else None), scanned
