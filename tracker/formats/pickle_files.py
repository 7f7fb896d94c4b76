"""One entry point for every pickle-bearing weight file: `scan_file(path, source, rules)`.

A file that starts as a zip is read as one whatever its suffix (torch, numpy and joblib loaders go by the
magic too): every pickle it holds is judged, wherever it is and whatever it is named (zip_members.py), a
torch checkpoint's data.pkl giving the tensor manifest. Otherwise by suffix: `.bin .pt .pth .ckpt` are
torch's legacy format (first bytes read up to a cap); `.pkl .pickle .joblib` plain pickles (first bytes
up to a cap; gzip, zlib, bz2 and xz streams inflated up to it); `.npy` (a header, then a pickle when the
dtype is object); `.npz` a zip whose end records may follow other bytes (or a pickle); `.keras` (a zip whose
config.json names the layers). Bad bytes never raise: they become an `unreadable` or `unknown` verdict
with a note.
"""

from __future__ import annotations

import bz2
import lzma
import zlib
from pathlib import PurePosixPath
from typing import Any

from tracker.formats import torch_manifest
from tracker.formats.keras_config import keras_imports
from tracker.formats.npy_header import NPY_HEADER_CAP, NPY_MAGIC, npy_header
from tracker.formats.pickle_rules import BUILTIN, Rules, scan_result
from tracker.formats.pickle_scan import PickleScan, scan_pickle
from tracker.formats.ranged import RangeError, RangeSource
from tracker.formats.torchzip import ZipFormatError, read_directory, read_entry
from tracker.formats.zip_members import Found, starts_as_zip, zip_contents

TORCH_SUFFIXES = {".bin", ".pt", ".pth", ".ckpt"}
PICKLE_SUFFIXES = {".pkl", ".pickle", ".joblib"}
ZIP_SUFFIXES = {".npz"}
SCANNED_SUFFIXES = TORCH_SUFFIXES | PICKLE_SUFFIXES | ZIP_SUFFIXES | {".npy", ".keras"}
HEAD_CAP = 16 * 2**20
FIRST_CHUNK = 64 * 2**10  # a plain pickle's first read; each further read doubles what was read
MAX_NOTES = 12  # notes kept of a zip's walk (each member may add some)
READ_AHEAD = 16 * 2**10  # what a Range fetch reads at least: the readers ask for the records they need
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PICKLES = 5  # magic number, protocol version, sys info, the data, the storage keys

Scanned = tuple[dict[str, Any], bytes, str | None]


def scans(path: str) -> bool:
    """Whether `scan_file` reads files of this name."""
    return PurePosixPath(path).suffix.lower() in SCANNED_SUFFIXES


def scan_file(path: str, source: RangeSource, rules: Rules = BUILTIN) -> Scanned:
    """(the stored scan result, the bytes it judged (to keep in the blob store), the note) for one file."""
    suffix = PurePosixPath(path).suffix.lower()
    if suffix not in SCANNED_SUFFIXES:
        raise ValueError(f"{path}: not a file scan_file reads (suffixes: {sorted(SCANNED_SUFFIXES)})")
    try:
        if suffix == ".keras":
            return _scan_keras(source, rules)
        if source.size >= 4 and starts_as_zip(source.read(0, 4)):
            return _scan_zip(source, rules)
        if suffix in ZIP_SUFFIXES:
            return _scan_zip_or_pickle(source, rules)
        if suffix == ".npy":
            return _scan_npy(source, rules)
        return _scan_head(source, rules, legacy=suffix in TORCH_SUFFIXES)
    except (ZipFormatError, RangeError) as err:
        note = str(err)
        return scan_result([], rules, source.bytes_read, note, readable=False), b"", note


def scan_file_at(source: RangeSource, path: str, rules: Rules) -> Scanned:
    """`scan_file` in the argument order of the scanner registry (tracker/formats/__init__.py)."""
    return scan_file(path, source, rules)


def _scan_zip(source: RangeSource, rules: Rules) -> Scanned:
    """Every pickle of the zip judged: the verdict is the worst of them, at least unknown when the layout may
    hide one; the kept bytes are torch's data.pkl, else the first pickle that imports anything."""
    contents = zip_contents(source)
    imports: list[tuple[str, str]] = []
    occurrences: list[dict[str, Any]] = []
    notes, certain, tensors, judged = list(contents.notes), contents.certain, None, 0
    kept: bytes | None = None
    for found in contents.found:
        if found.kind == "npy":
            (result, data, note), _ = _judge_npy(found.data, len(found.data), rules, 0, found.name)
            imports += [(i["module"], i["name"]) for i in result["imports"]]
            occurrences += result["occurrences"]
            judged += result["verdict"] != "unreadable"
            certain = certain and result["certain"]
            if result["imports"] or not result["certain"]:
                notes.append(note or "")
            kept = kept if kept is not None or not result["imports"] else data
            continue
        data, inflated = _inflated(found.data, len(found.data))
        scan = scan_pickle(data, max_pickles=1 if found.torch else None)
        more_imports, more_occurrences = _collected(scan, found.name)
        imports += more_imports
        occurrences += more_occurrences
        notes += [f"{found.name}: {n}" for n in inflated + scan.notes]
        certain = certain and scan.complete and scan.opcodes > 0
        judged += scan.opcodes > 0
        if found.torch:
            if scan.complete and scan.end < len(data):
                notes.append(f"{len(data) - scan.end:,} bytes after data.pkl's STOP (torch reads none of them)")
            tensors = torch_manifest.tensors_of(scan, found.storages)
            kept = data
        elif kept is None and more_imports:
            kept = data[: scan.end] if scan.complete else data
    if not contents.found:
        notes.append(f"a zip of {contents.members} member(s), none of them a pickle")
    notes = [n for n in notes if n]
    if len(notes) > MAX_NOTES:  # a zip of many odd members: the first notes say what kind of zip it is
        notes = notes[:MAX_NOTES] + [f"and {len(notes) - MAX_NOTES} more notes"]
    note = "; ".join(notes) or None
    readable = judged > 0 or contents.unread == 0
    result = scan_result(imports, rules, source.bytes_read, note, certain=certain, readable=readable,
                         occurrences=occurrences, tensors=tensors)  # fmt: skip
    return result, _kept(kept, contents.found), note


def _scan_zip_or_pickle(source: RangeSource, rules: Rules) -> Scanned:
    """An `.npz` that does not start as a zip: a zip after other bytes (its directory says where), or no
    zip at all, read as a pickle (numpy.load unpickles a file that is neither zip nor .npy)."""
    try:
        return _scan_zip(source, rules)
    except ZipFormatError as err:
        return _scan_head(source, rules, notes=[f"{err}; read as a pickle instead"])


def _kept(kept: bytes | None, found: list[Found]) -> bytes:
    if kept is not None:
        return kept
    return next((f.data for f in found if f.kind == "pickle"), b"")


def _collected(scan: PickleScan, member: str) -> tuple[list[tuple[str, str]], list[dict[str, Any]]]:
    imports = [(g.module, g.name) for g in scan.imports]
    occurrences = [
        {"callable": g.dotted, "member": member, "offset": g.offset, "opcode": g.opcode, "uses": sorted(g.uses)}
        for g in scan.imports
    ] + [{"callable": f"<dynamic> {what}", "member": member, "offset": at, "opcode": "REDUCE", "uses": ["called"]}
         for at, what in scan.dynamic_calls]  # fmt: skip
    imports += [("<dynamic>", what) for _, what in scan.dynamic_calls]
    return imports, occurrences


def _scan_head(source: RangeSource, rules: Rules, legacy: bool = False, head: bytes = b"",
               notes: list[str] | None = None) -> Scanned:
    """The first bytes of a pickle file (inflated when compressed), walked up to the cap: read in growing chunks
    (64 KiB, doubling; `head`, when given, is what was read already), and no further than the walk needs
    (bytes that are not a pickle stop it at once). `notes` go first in the note."""
    first = list(notes or [])
    head = head or _read_more(source, head)
    while True:
        data, notes = _inflated(head, source.size)
        notes = first + notes
        if not data:
            note = "empty file" if not head else "; ".join(notes) or "empty file"
            return scan_result([], rules, source.bytes_read, note, readable=False), b"", note
        scan = scan_pickle(data, max_pickles=LEGACY_PICKLES if legacy else None)
        if not (scan.exhausted and len(head) < min(source.size, HEAD_CAP) and len(data) < HEAD_CAP):
            break
        head = _read_more(source, head)
    notes += scan.notes
    certain = scan.complete
    if legacy and scan.results and scan.results[0] != LEGACY_MAGIC:
        notes.append("not torch's legacy format (no magic number): read as plain pickles")
    if not scan.complete and len(head) < source.size:
        notes.append(f"first {len(head):,} of {source.size:,} bytes read; the rest was not reached")
    imports, occurrences = _collected(scan, "")
    tensors = torch_manifest.tensors_of(scan) if legacy else None
    note = "; ".join(notes) or None
    result = scan_result(imports, rules, source.bytes_read, note, certain=certain, readable=scan.opcodes > 0,
                         occurrences=occurrences, tensors=tensors)  # fmt: skip
    kept = data[: scan.end] if scan.complete else data if scan.opcodes else b""  # bytes that are no pickle: none
    return result, kept, note


def _read_more(source: RangeSource, head: bytes) -> bytes:
    """`head` with the next chunk of the file after it: the first FIRST_CHUNK bytes, then as many again, up to
    HEAD_CAP (a file that is not a pickle costs one small read, a long one a few reads and walks)."""
    want = min(source.size, HEAD_CAP, max(FIRST_CHUNK, 2 * len(head)))
    return head + source.read(len(head), want - len(head)) if want > len(head) else head


def _inflated(head: bytes, size: int) -> tuple[bytes, list[str]]:
    """The bytes themselves, or inflated up to the cap when they start as a gzip, zlib, bz2 or xz stream."""
    if head[:2] == b"\x1f\x8b":
        inflater, kind = zlib.decompressobj(31), "gzip"
    elif head[:1] == b"\x78" and len(head) > 1 and (head[0] * 256 + head[1]) % 31 == 0:
        inflater, kind = zlib.decompressobj(), "zlib"
    elif head[:3] == b"BZh":
        inflater, kind = bz2.BZ2Decompressor(), "bz2"
    elif head[:6] == b"\xfd7zXZ\x00":
        inflater, kind = lzma.LZMADecompressor(), "xz"
    else:
        return head, []
    try:
        data = inflater.decompress(head, HEAD_CAP)
    except (zlib.error, OSError, EOFError, lzma.LZMAError) as err:
        return b"", [f"{kind} stream does not inflate: {err}"]
    return data, [f"{kind}-compressed: {len(data):,} bytes inflated from the first {len(head):,} of {size:,}"]


def _scan_npy(source: RangeSource, rules: Rules) -> Scanned:
    head = _read_more(source, b"")
    if head and head[:6] != NPY_MAGIC:  # numpy.load unpickles a file that is not .npy (with allow_pickle)
        return _scan_head(source, rules, head=head, notes=["not a .npy file (no \\x93NUMPY magic): read as a pickle"])
    while True:
        scanned, more = _judge_npy(head, source.size, rules, source.bytes_read, "")
        if not (more and len(head) < min(source.size, HEAD_CAP)):
            return scanned
        head = _read_more(source, head)


def _judge_npy(head: bytes, size: int, rules: Rules, bytes_read: int, member: str) -> tuple[Scanned, bool]:
    """A .npy's first bytes judged, and whether more of them could change the judgement."""
    descr, start, problem = npy_header(head)
    if problem:
        note = f"{member + ': ' if member else ''}{problem}"
        more = head[:6] == NPY_MAGIC and len(head) <= NPY_HEADER_CAP + 12  # the header may go on
        return (scan_result([], rules, bytes_read, note, readable=False), b"", note), more
    if "O" not in str(descr):
        note = f"{member + ': ' if member else ''}numpy array of {descr}, no pickle"
        return (scan_result([], rules, bytes_read, note), head[:start], note), False
    scan = scan_pickle(head[start:], max_pickles=1)
    notes = [f"object array: a pickle from byte {start}"] + scan.notes
    if not scan.complete and len(head) < size:
        notes.append(f"first {len(head):,} of {size:,} bytes read; the rest was not reached")
    imports, occurrences = _collected(scan, member)
    note = "; ".join(notes)
    result = scan_result(imports, rules, bytes_read, note, certain=scan.complete, readable=scan.opcodes > 0,
                         occurrences=occurrences)  # fmt: skip
    return (result, head, note), scan.exhausted


def _scan_keras(source: RangeSource, rules: Rules) -> Scanned:
    directory = read_directory(source)
    found = directory.named("config.json")
    if not found:
        note = "a zip without config.json: not a .keras archive"
        return scan_result([], rules, source.bytes_read, note, readable=False), b"", note
    config, _ = read_entry(source, found[0], HEAD_CAP)
    layers, problem = keras_imports(config)
    occurrences = [{"callable": f"{m}.{n}", "member": "config.json", "offset": None, "opcode": None, "uses": [where]}
                   for m, n, where in layers]  # fmt: skip
    note = problem or (f"{len(layers)} code-bearing layers or objects" if layers else None)
    result = scan_result([(m, n) for m, n, _ in layers], rules, source.bytes_read, note,
                         readable=problem is None, occurrences=occurrences)  # fmt: skip
    return result, config, note
