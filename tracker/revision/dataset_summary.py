"""What a dataset revision is, from what was read without downloading its data: configs -> splits -> rows and
columns (HF feature types where the files state them), every data file with its content id, the card's licence
and declared counts, the gate, and whether a loading script is all there is.

`summarize` is pure: the tree's files, the scans of its data files (Parquet footers, JSON Lines/CSV first
ranges: tracker/formats), the card's facts (tracker/formats/dataset_card.py) and the gate in; a JSON-able dict
out, stored with the revision and compared by tracker/differs/dataset.py.

Which files make which split follows the datasets library: the card's `configs` (data_files patterns per split,
or a data_dir) when it has them; otherwise one `default` config whose splits are named by the files (`train`,
`validation`/`valid`/`dev`/`val`, `test`/`eval` in a file or folder name; no such name: all of it is `train`).
The dataset viewer's conversion (`refs/convert/parquet`: `CONFIG/SPLIT/NNNN.parquet`, `CONFIG/partial-SPLIT/...`
for a conversion cut short) is summarized the same way, tied to the commit it was made from.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tracker.formats import FileScan
from tracker.formats.dataset_card import DEFAULT_CONFIG, DEFAULT_SPLIT, CardFacts
from tracker.revision.snapshot import FileEntry

DATA_SUFFIXES = (".parquet", ".arrow", ".jsonl", ".ndjson", ".json", ".csv", ".tsv", ".txt")
COMPRESSED = (".gz", ".zst", ".bz2", ".xz", ".lz4", ".zip")
SPLIT_KEYWORDS = {"train": ("train", "training"), "validation": ("validation", "valid", "dev", "val"),
                  "test": ("test", "testing", "eval", "evaluation")}
CONVERTED = re.compile(r"^(?P<config>[^/]+)/(?P<partial>partial-)?(?P<split>[^/]+)/[^/]+\.parquet$")
# Files the datasets library writes beside the data (save_to_disk, push_to_hub's old metadata): not data.
NOT_DATA = ("README.md", ".gitattributes", "dataset_infos.json", "dataset_info.json", "dataset_dict.json", "state.json")


@dataclass(frozen=True)
class Conversion:
    """The viewer's Parquet conversion (`refs/convert/parquet`) as read: its commit, its files and their scans,
    the head commit it was made from, and whether the head has moved on since (`lagging`)."""

    sha: str
    files: list[FileEntry]
    scans: Mapping[str, FileScan]
    source_sha: str | None = None
    lagging: bool = False


@dataclass
class _Split:
    shards: list[str] = field(default_factory=list)
    partial: bool = False


def summarize(repo_name: str, files: Iterable[FileEntry], scans: Mapping[str, FileScan], card: CardFacts,
              gated: Any = None, conversion: Conversion | None = None,
              unavailable: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The dataset summary of one revision (see the module's docstring). `repo_name` is the dataset's name
    without its org (a loading script is `<name>.py` at the root); `gated` the Hub's gate (False, "auto",
    "manual") or None when not known; `unavailable` why files were not read (a gate's refusal), by path."""
    files = sorted(files, key=lambda f: f.path)
    data = [f for f in files if is_data_file(f.path)]
    script = f"{repo_name}.py"
    scripts = [f.path for f in files if f.path == script]
    notes: list[str] = list(card.notes)
    layout = _layout(card, [f.path for f in data], notes)
    by_path = {f.path: f for f in data}
    summary: dict[str, Any] = {
        "licence": card.licence,
        "gated": gated if gated in (False, "auto", "manual") else (None if gated is None else str(gated)),
        "card": card.verdict,
        "loading_script": scripts[0] if scripts else None,
        "script_only": bool(scripts) and not data,
        "configs": _configs(layout, by_path, scans, card),
        "shards": {f.path: _shard(f, scans.get(f.path), (unavailable or {}).get(f.path)) for f in data},
        "notes": notes,
    }
    summary["card_mismatches"] = _mismatches(summary["configs"])
    if conversion is not None:
        summary["conversion"] = _conversion(conversion)
    return summary


def is_data_file(path: str) -> bool:
    """A file the datasets library would load as data (by suffix, compressed or not)."""
    if posixpath.basename(path) in NOT_DATA or path.startswith("."):
        return False
    name = path.lower()
    for ext in COMPRESSED:
        if name.endswith(ext):
            name = name[: -len(ext)]
            break
    return name.endswith(DATA_SUFFIXES)


def _layout(card: CardFacts, paths: list[str], notes: list[str]) -> dict[str, dict[str, _Split]]:
    """{config: {split: its files}} as the card's configs say, or as the file names say."""
    if not card.configs:
        return {DEFAULT_CONFIG: _inferred(paths)} if paths else {}
    out: dict[str, dict[str, _Split]] = {}
    for name, config in card.configs.items():
        data_dir = config.get("data_dir")
        scoped = [p for p in paths if p.startswith(data_dir + "/")] if data_dir else paths
        if not config["data_files"]:
            out[name] = _inferred(scoped, data_dir)
            continue
        splits = {}
        for split, patterns in config["data_files"].items():
            full = [posixpath.join(data_dir, p) if data_dir else p for p in patterns]
            matched = [p for p in scoped if any(_glob(pattern).fullmatch(p) for pattern in full)]
            if not matched:
                notes.append(f"config {name}, split {split}: no file matches {', '.join(patterns)}")
            splits[split] = _Split(matched)
        out[name] = splits
    return out


def _glob(pattern: str) -> re.Pattern[str]:
    """A data_files pattern as the datasets library globs it: `**` crosses folders, `*` and `?` do not; a
    folder stands for every file under it."""
    pattern = pattern.strip().lstrip("./") if pattern.startswith("./") else pattern.strip().lstrip("/")
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + "(?:/.*)?")


def _inferred(paths: list[str], data_dir: str | None = None) -> dict[str, _Split]:
    """Splits named by the files: a split keyword as a file-name token or a folder; none anywhere: all train."""
    splits: dict[str, _Split] = {}
    for path in paths:
        rel = path[len(data_dir) + 1:] if data_dir else path
        split = _split_of(rel)
        if split is not None:
            splits.setdefault(split, _Split()).shards.append(path)
    if not splits:
        return {DEFAULT_SPLIT: _Split(list(paths))} if paths else {}
    return {s: splits[s] for s in SPLIT_KEYWORDS if s in splits}


def _split_of(path: str) -> str | None:
    parts = path.lower().split("/")
    for split, words in SPLIT_KEYWORDS.items():
        for word in words:
            token = re.compile(rf"(?:^|[-._ 0-9]){word}(?:[-._ 0-9]|$)")
            if any(part == word or token.search(part) for part in parts[:-1]) or token.search(parts[-1]):
                return split
    return None


def _configs(layout: dict[str, dict[str, _Split]], files: Mapping[str, FileEntry], scans: Mapping[str, FileScan],
             card: CardFacts) -> dict[str, Any]:
    out: dict[str, Any] = {}
    configs = list(layout) + [name for name in card.info if name not in layout]
    for name in configs:
        declared = card.info.get(name, {})
        splits: dict[str, Any] = {}
        for split, members in layout.get(name, {}).items():
            splits[split] = _split(members, scans, declared.get("features"))
        for split, count in (declared.get("splits") or {}).items():
            splits.setdefault(split, {"rows": None, "rows_known": False, "shards": [], "columns": {},
                                      "columns_from": None, "partial": False})["card_rows"] = count
        for split, facts in splits.items():
            facts.setdefault("card_rows", (declared.get("splits") or {}).get(split))
        out[name] = {"splits": splits}
    return out


def _split(members: _Split, scans: Mapping[str, FileScan], card_features: dict[str, str] | None) -> dict[str, Any]:
    """A split's rows (summed over its files when every one was counted), its columns (the first file that
    states them: HF features, else its Arrow or text columns; the card's features when no file does) and files."""
    rows, known = 0, bool(members.shards)
    columns: dict[str, str] | None = None
    source = None
    differing = []
    for path in members.shards:
        scan = scans.get(path)
        facts = scan.result if scan is not None else {}
        count = facts.get("rows")
        if isinstance(count, int) and facts.get("verdict", "ok") != "unreadable" and facts.get("rows_counted", True):
            rows += count
        else:
            known = False
        mine, from_ = _columns_of(facts)
        if mine is None:
            continue
        if columns is None:
            columns, source = mine, from_
        elif mine != columns:
            differing.append(path)
    if columns is None and card_features:
        columns, source = dict(card_features), "card"
    out = {"rows": rows if known else None, "rows_known": known, "shards": list(members.shards),
           "columns": columns or {}, "columns_from": source, "partial": members.partial}
    if differing:
        out["columns_differ"] = differing[:20]
    return out


def _columns_of(facts: Mapping[str, Any]) -> tuple[dict[str, str] | None, str | None]:
    if isinstance(facts.get("features"), dict) and facts["features"]:
        return dict(facts["features"]), "features"
    if isinstance(facts.get("columns"), list) and facts["columns"]:
        return {str(name): str(kind) for name, kind in facts["columns"]}, "arrow" if "row_groups" in facts else "text"
    return None, None


def _shard(entry: FileEntry, scan: FileScan | None, unread: str | None = None) -> dict[str, Any]:
    facts = scan.result if scan is not None else {}
    if scan is None:  # refused, or a format read by size only (JSON, Arrow, text)
        unread = unread or f"size only: {posixpath.splitext(entry.path)[1] or 'this'} files are not read by range"
    columns, _ = _columns_of(facts)
    return {"oid": entry.content_id, "size": entry.lfs_size if entry.lfs_size is not None else entry.size,
            "format": scan.format if scan is not None else None, "rows": facts.get("rows"),
            "schema": _digest(columns) if columns is not None else None,
            "verdict": facts.get("verdict", "ok" if scan is not None else "not read"),
            "note": scan.note if scan is not None else unread}


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def _mismatches(configs: dict[str, Any]) -> list[dict[str, Any]]:
    """Where the card's num_examples and the files' rows (all counted) disagree."""
    out = []
    for config, facts in configs.items():
        for split, s in facts["splits"].items():
            declared = s.get("card_rows")
            if s["rows_known"] and s["shards"] and isinstance(declared, int) and declared != s["rows"]:
                out.append({"config": config, "split": split, "card": declared, "files": s["rows"]})
    return out


def _conversion(conversion: Conversion) -> dict[str, Any]:
    """The conversion's configs -> splits -> rows and columns, and which commit it was made from."""
    layout: dict[str, dict[str, _Split]] = {}
    for entry in sorted(conversion.files, key=lambda f: f.path):
        found = CONVERTED.match(entry.path)
        if found is None:
            continue
        split = layout.setdefault(found["config"], {}).setdefault(found["split"], _Split())
        split.shards.append(entry.path)
        split.partial = split.partial or bool(found["partial"])
    configs = {name: {"splits": {s: _split(members, conversion.scans, None) for s, members in splits.items()}}
               for name, splits in layout.items()}
    return {"sha": conversion.sha, "source_sha": conversion.source_sha, "lagging": conversion.lagging,
            "configs": configs}
