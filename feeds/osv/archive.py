"""The offline OSV database: the layout osv.dev publishes per ecosystem (gs://osv-vulnerabilities/<ECOSYSTEM>/):
`all.zip`, one `<ID>.json` per record at the top of the archive, and `modified_id.csv` beside it, one
`<modified>,<id>` line per record, newest first, for a mirror to sync what changed since it last looked.
osv-scanner's offline mode and osv.dev's own importer read this layout.

The zip is written to a temporary file beside its target and moved into place once complete, so a failed
export never leaves half an archive where the last good one was; entries carry a fixed time, so the same
records always give the same bytes.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ZIP_TIME = (1980, 1, 1, 0, 0, 0)
INDEX_NAME = "modified_id.csv"


@dataclass(frozen=True)
class Archive:
    zip_path: Path
    index_path: Path
    records: int


def write_archive(records: Iterable[Mapping[str, Any]], zip_path: Path, index_path: Path | None = None) -> Archive:
    """Write `records` as an all.zip at `zip_path` and their modified-id index (default: `modified_id.csv`
    beside the zip). Records are written by id; the index newest first."""
    ordered = sorted(records, key=lambda r: str(r["id"]))
    index_path = index_path or zip_path.with_name(INDEX_NAME)
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    _replace(zip_path, lambda f: f.write(_zip_bytes(ordered)))
    newest = sorted(ordered, key=lambda r: (str(r["modified"]), str(r["id"])), reverse=True)
    lines = "".join(f"{r['modified']},{r['id']}\n" for r in newest).encode()
    _replace(index_path, lambda f: f.write(lines))
    return Archive(zip_path, index_path, len(ordered))


def _zip_bytes(records: list[Mapping[str, Any]]) -> bytes:
    """The archive, built in memory (smaller than the records it is built from, which are in memory already):
    zipfile seeks back over every entry's header, which a file pays for in system calls."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for record in records:
            info = zipfile.ZipInfo(f"{record['id']}.json", ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, json.dumps(record, ensure_ascii=False) + "\n")  # one line: json's C encoder, 10x indent's speed
    return buffer.getvalue()


def _replace(target: Path, write: Any) -> None:
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
