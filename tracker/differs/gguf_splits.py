"""A GGUF split (`<stem>-00001-of-0000N.gguf`, llama.cpp's gguf-split) read as the one model it is: its parts'
scans merged (the first part's metadata, every part's tensors, their counts summed) and its parts' file changes
as one change, with the parts that are missing named. The differs (gguf.py, weights.py) compare models, not parts,
so a re-upload of a split reads as one change."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from estimator.gguf_inputs import SPLIT
from tracker.formats import FileScan


@dataclass
class SplitModel:
    """The parts of one split present in a revision (sorted), and how many it says it has."""

    name: str  # `<stem>-*-of-0000N.gguf`
    parts: int
    paths: list[str] = field(default_factory=list)

    @property
    def missing(self) -> list[str]:
        """The file names of the parts not present."""
        stem = self.name[: -len(f"-*-of-{self.parts:05d}.gguf")]
        have = set(self.paths)
        return [p for i in range(1, self.parts + 1) if (p := f"{stem}-{i:05d}-of-{self.parts:05d}.gguf") not in have]

    def facts(self) -> dict[str, Any]:
        """The `split` a change's detail carries: name, parts, the paths present and the ones missing."""
        return {"name": self.name, "parts": self.parts, "paths": list(self.paths), "missing": self.missing}


def split_name(path: str) -> tuple[str, int] | None:
    """(`<stem>-*-of-0000N.gguf`, N) for a split part's path; None for any other file."""
    found = SPLIT.match(path)
    if found is None:
        return None
    # the stem keeps its folder; the part numbers keep their five digits
    return f"{found['stem']}-*-of-{found['parts']}.gguf", int(found["parts"])


def splits(paths: Iterable[str]) -> dict[str, SplitModel]:
    """The splits among these paths, by name, each with the parts present."""
    out: dict[str, SplitModel] = {}
    for path in sorted(paths):
        named = split_name(path)
        if named is not None:
            out.setdefault(named[0], SplitModel(named[0], named[1])).paths.append(path)
    return out


def merged_scan(model: SplitModel, scans: dict[str, FileScan]) -> FileScan | None:
    """One scan for the whole split: the first part's facts (its metadata, tokenizer and templates: llama.cpp
    writes them into part 1 only), every part's tensors, tensor count, parameters and bytes summed, notes joined;
    None when no part was scanned."""
    read = [(p, scans[p]) for p in model.paths if p in scans and scans[p].format == "gguf"]
    if not read:
        return None
    first = next((s for _, s in read if s.result.get("architecture")), read[0][1])
    result: dict[str, Any] = dict(first.result)
    result["tensors"] = [t for _, s in read for t in s.result.get("tensors") or []]
    result["tensor_count"] = sum(int(s.result.get("tensor_count") or 0) for _, s in read)
    result["parameters"] = sum(int(s.result.get("parameters") or 0) for _, s in read)
    sizes = [s.result.get("tensor_bytes") for _, s in read]
    result["tensor_bytes"] = sum(sizes) if all(isinstance(b, int) for b in sizes) else None
    types: dict[str, int] = {}
    for _, s in read:
        for kind, n in (s.result.get("types") or {}).items():
            types[kind] = types.get(kind, 0) + int(n)
    result["types"] = dict(sorted(types.items()))
    notes = [f"{p}: {s.note}" for p, s in read if s.note]  # a missing part is the weights differ's to name
    oids = ",".join(f"{s.scanned_oid}" for _, s in read)
    return FileScan("gguf", result, sum(s.bytes_read for _, s in read), "; ".join(notes) or None, first.rules_version,
                    oids)
