"""The scanner registry: which reader scans which weight file, and running one (see tracker/formats/__init__.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from tracker.errors import HubwatchError
from tracker.formats import FileScan, gguf, parquet, pickle_files, text_shards
from tracker.formats.gguf import is_gguf
from tracker.formats.parquet import is_parquet
from tracker.formats.pickle_rules import BUILTIN, Rules
from tracker.formats.ranged import DEFAULT_BUDGET, RangeSource
from tracker.formats.torchzip import DATA_PKL_CAP

ScanOutput = tuple[dict[str, Any], bytes, str | None]
Scanner = Callable[[RangeSource, str, Rules], ScanOutput]

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class ScannerSpec:
    format: str
    matches: Callable[[str], bool]
    scan: Scanner
    budget: int = DEFAULT_BUDGET  # bytes a scan of one file may fetch
    read_ahead: int | None = None  # bytes a Range fetch reads at least (None: the source's growing blocks)
    repo_types: tuple[str, ...] = ("model", "dataset")  # the kinds of repo whose files it reads


def _scan_gguf(source: RangeSource, path: str, rules: Rules) -> ScanOutput:
    return gguf.scan(source)


def _scan_parquet(source: RangeSource, path: str, rules: Rules) -> ScanOutput:
    return parquet.scan(source)


def _scan_text_shard(source: RangeSource, path: str, rules: Rules) -> ScanOutput:
    return text_shards.scan(source, path)


SCANNERS: tuple[ScannerSpec, ...] = (
    ScannerSpec("gguf", is_gguf, _scan_gguf),
    # a torch zip's data.pkl up to its cap, plus the central directory and the small entries around it; the
    # readers ask for exactly the records they need, so a fetch reads ahead no more than READ_AHEAD
    ScannerSpec("pickle", pickle_files.scans, pickle_files.scan_file_at, budget=DATA_PKL_CAP + 8 * 2**20,
                read_ahead=pickle_files.READ_AHEAD),
    # a dataset's data files: a Parquet footer in 2 ranges of exactly what it needs (the last 8 bytes, then the
    # footer), a small file whole; JSON Lines and CSV: the first range and the last (2 requests of 64 KiB), or
    # the whole file when small (1 request)
    ScannerSpec("parquet", is_parquet, _scan_parquet, budget=parquet.MAX_FOOTER + parquet.TAIL + parquet.SMALL_FILE,
                read_ahead=parquet.TAIL, repo_types=("dataset",)),
    ScannerSpec("text_shard", text_shards.is_text_shard, _scan_text_shard, budget=text_shards.WHOLE_FILE,
                read_ahead=text_shards.FIRST_RANGE, repo_types=("dataset",)),
)


def scanner_for(path: str, repo_type: str = "model") -> ScannerSpec | None:
    """The scanner that reads this path in a repo of `repo_type` ("model", "dataset"), if any."""
    return next((spec for spec in SCANNERS if repo_type in spec.repo_types and spec.matches(path)), None)


def run_scan(spec: ScannerSpec, source: RangeSource, path: str, rules: Rules = BUILTIN) -> tuple[FileScan, bytes]:
    """Run one scanner over one file: its FileScan (without `scanned_oid`) and the bytes to keep.

    Whatever the file does to the scanner becomes the note; only Hub errors propagate."""
    try:
        result, scanned, note = spec.scan(source, path, rules)
    except HubwatchError:
        raise
    except Exception as err:  # noqa: BLE001 - a hostile file must not fail the revision: it gets a note
        log.warning("file_scan_failed", format=spec.format, error=f"{type(err).__name__}: {err}"[:300])
        result, scanned, note = {}, b"", f"not readable: {type(err).__name__}: {err}"[:500]
    version = result.get("rules_version")
    return FileScan(spec.format, result, source.bytes_read, note, str(version) if version else None), scanned
