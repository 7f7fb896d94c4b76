"""Files written by others, read without trusting them: weight formats (GGUF headers and PyTorch pickles,
fetched by range, never downloaded whole), a dataset's data files (Parquet footers, JSON Lines and CSV first
ranges: parquet.py, text_shards.py) and its card's YAML (dataset_card.py), and local files that may be hostile
(local_files.py).

Every reader here takes a `RangeSource` (ranged.py) and never executes what it reads.

The plumbing every format shares (registry.py; tracker/pipeline/snapshot_io.py runs it):

- `SCANNERS` (registry.py): a `ScannerSpec` per format (and the repo types whose files it reads: a dataset's
  data-file readers only in datasets), `matches(path)` choosing the files it reads and
  `scan(source, path, rules)` reading one (the path picks a reader by suffix; `rules` are the pickle rules
  a judging scanner applies, loaded once from the config: the GGUF reader ignores them). Adding a format
  is adding a spec there; nothing else in the pipeline names one.
- A scanner is `(RangeSource, path, Rules) -> (result, scanned, note)`: `result` a JSON-able dict of what it learned,
  `scanned` the bytes it read that are worth keeping (a GGUF header, a `data.pkl`; b"" for none), kept in
  the blob store so the file can be judged again without a Hub request, and `note` what it could not read,
  in words (None when all was read). A scanner that gives a verdict puts `rules_version` in `result`.
- A scanner never raises for a file's content (bad magic, absurd counts, a header over the cap: a note);
  `run_scan` turns what escapes anyway (a `RangeError`, a reader's bug) into a note too. Hub errors
  (`tracker.errors.HubwatchError`: unavailable, 429) propagate: they abort the revision, to be retried.
- The answer is a `FileScan`, stored once per content id (LFS sha256): `storage.history.NewFileScan`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FileScan:
    """What one scanner read of one file. `format` names the scanner ("gguf", "pickle")."""

    format: str
    result: dict[str, Any] = field(default_factory=dict)
    bytes_read: int = 0
    note: str | None = None
    rules_version: str | None = None
    scanned_oid: str | None = None  # the blob holding the bytes it read
