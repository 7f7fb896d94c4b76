"""Writing OSV records as an OSV database directory, the layout of OSV's own exports
(gs://osv-vulnerabilities): `<ECOSYSTEM>/<ID>.json` per record, `<ECOSYSTEM>/all.zip` holding them all,
and `<ECOSYSTEM>/modified_id.csv` ("<modified>,<id>" newest first) for incremental sync. osv-scanner's
offline mode reads a directory like this (`<dir>/osv-scanner/<ECOSYSTEM>/all.zip` in its cache layout)."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed, so the same records always give the same bytes


def ecosystem_of(record: Mapping[str, Any]) -> str:
    for affected in record.get("affected") or ():
        ecosystem = (affected.get("package") or {}).get("ecosystem")
        if ecosystem:
            return str(ecosystem).split(":")[0]
    return "GIT"


def export_records(records: Iterable[Mapping[str, Any]], directory: Path) -> list[Path]:
    """Write every record; returns the paths written (JSON files, then the zips and indexes)."""
    by_ecosystem: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        by_ecosystem.setdefault(ecosystem_of(record), []).append(record)
    written: list[Path] = []
    for ecosystem, group in sorted(by_ecosystem.items()):
        folder = directory / ecosystem
        folder.mkdir(parents=True, exist_ok=True)
        group = sorted(group, key=lambda r: str(r["id"]))
        blobs = {f"{r['id']}.json": (json.dumps(r, indent=2, sort_keys=False) + "\n").encode() for r in group}
        for name, data in blobs.items():
            path = folder / name
            path.write_bytes(data)
            written.append(path)
        archive = folder / "all.zip"
        with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for name, data in blobs.items():
                zf.writestr(zipfile.ZipInfo(name, ZIP_TIME), data)
        newest = sorted(group, key=lambda r: (str(r["modified"]), str(r["id"])), reverse=True)
        index = folder / "modified_id.csv"
        index.write_text("".join(f"{r['modified']},{r['id']}\n" for r in newest), encoding="utf-8")
        written += [archive, index]
    return written
