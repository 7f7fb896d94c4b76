"""Every pickle a zip holds, wherever it is: the members some loader could unpickle, found by what they are.

A torch checkpoint's `data.pkl` is one; so is a `model/config.pkl`, a pickle named `data.txt`, an object
array in a `.npy` member, and each pickle of a zip stored in the zip (MAX_DEPTH levels). A member is told
by its first bytes (SNIFF of them, read with its local header; more, up to SNIFF_CAP, while opcodes walk to
their end), never by its name: an import a loader could resolve, a finished pickle, opcodes still walking
at the cap, a zip's or numpy's magic (torch's own data.pkl and constants.pkl are pickles whatever they
hold). What no Python unpickler reads is not read: the storages under `<prefix>/data/` of a checkpoint (raw
tensor bytes, the bulk of the file), and TorchScript's `code/**.debug_pkl` (read by torch.jit's own
unpickler alone). Each pickle comes back whole (up
to its cap) with its CRC checked, to be judged by the caller (pickle_files.py).

Whatever the layout does to hide a pickle is a note that makes the contents uncertain (`hidden`): a member
that claims encryption, a local header naming another file or another method than the directory, a CRC
that does not match, a member that cannot be read, bytes before the first entry or between entries that
hold a pickle or a local header no directory record lists, a directory that does not end where its end
record says (zipfile then reads every offset shifted), a nesting too deep. The caller judges such a file
at least `unknown`, and `dangerous` when any pickle it read is.
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from tracker.formats.npy_header import NPY_HEADER_CAP, NPY_MAGIC, npy_header
from tracker.formats.pickle_scan import scan_pickle
from tracker.formats.ranged import BytesSource, RangeError, RangeSource, SliceSource
from tracker.formats.torchzip import (
    DATA_PKL,
    DATA_PKL_CAP,
    EOCD,
    LOCAL,
    STORAGE,
    ZipDirectory,
    ZipEntry,
    ZipFormatError,
    read_directory,
    read_entry,
    read_entry_head,
)

SNIFF = 64  # first bytes of a member read to tell what it is
SNIFF_CAP = 65_536  # a walk still going after SNIFF bytes is given up to this many before it counts as a pickle
TORCH_PICKLES = {"data.pkl", "constants.pkl"}  # what torch.load and torch.jit.load unpickle, whatever it looks like
MAX_MEMBERS = 256  # members sniffed per zip; more is a note (each may be a pickle)
MAX_DEPTH = 3  # zips inside zips
NPY_FIRST = 4096  # an .npy member's header is read from this many first bytes (more only when it is longer)
NPY_CAP = 16 * 2**20  # an object array's pickle is read up to this
NESTED_CAP = 64 * 2**20  # a deflated zip inside a zip is inflated up to this (a stored one is read in place)
DESCRIPTOR_SLACK = 24  # a data descriptor (CRC and sizes, ZIP64 ones too) may follow an entry's data
COMPRESSED_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")
PICKLE_NAMES = {".pkl", ".pickle", ".joblib", ".dat", ".data", ".bin", ".pt", ".pth", ".ckpt"}
ZLIB_HEADER = re.compile(rb"\x78[\x01\x5e\x9c\xda]")
DEBUG_PICKLE = re.compile(r"(?P<prefix>[^/]+)/code/.+\.debug_pkl")


@dataclass
class Found:
    """A member to judge: its path in the file (nested zips joined by "/"), what it is and its bytes."""

    name: str
    kind: str  # "pickle" (maybe compressed, as joblib writes) or "npy"
    data: bytes
    torch: bool = False  # the data.pkl torch.load reads: one pickle, the storages below known
    storages: dict[str, int] = field(default_factory=dict)


@dataclass
class ZipContents:
    """What a walk over a zip found: the pickles, the notes, and whether anything may have been missed."""

    found: list[Found] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    certain: bool = True
    unread: int = 0  # members that could not be read (each may have been a pickle)
    members: int = 0  # members looked at

    def hidden(self, note: str) -> None:
        """Something in the layout may hide a pickle: noted, and the contents no longer certain."""
        self.notes.append(note)
        self.certain = False


def starts_as_zip(head: bytes) -> bool:
    """Whether these first bytes are a zip's (a local header, or the end record of an empty zip)."""
    return head[:4] in (LOCAL, EOCD)


def zip_contents(source: RangeSource) -> ZipContents:
    """Every pickle of the zip `source` holds; ZipFormatError when it is no zip that can be read at all."""
    contents = ZipContents()
    _walk(source, contents, "", 0)
    return contents


def _walk(source: RangeSource, contents: ZipContents, within: str, depth: int) -> None:
    directory = read_directory(source)
    primary, skipped, storages = _torch_layout(directory)
    if directory.shift:
        contents.hidden(f"{within}the zip starts {directory.shift:,} bytes into the file (its offsets count from "
                        "there, as zipfile reads them)")  # fmt: skip
    for note in directory.notes:
        contents.hidden(within + note)
    entries = sorted((e for e in directory.entries if id(e) not in skipped and not e.name.endswith("/")),
                     key=lambda e: e.local_offset)  # fmt: skip
    if len(entries) > MAX_MEMBERS:
        contents.hidden(f"{within}{len(entries):,} members: the first {MAX_MEMBERS} were looked at")
        entries = entries[:MAX_MEMBERS]
    byteorder = f"{primary.name.split('/', 1)[0]}/byteorder" if primary is not None else None
    starts = sorted({e.local_offset for e in directory.entries} | {directory.central_offset, directory.end_offset})
    if starts[0] > 0:
        _look_between(source, 0, starts[0], contents, within, depth)
    for entry in entries:
        try:
            end = _member(source, entry, contents, within, depth, entry is primary, storages, byteorder)
        except (ZipFormatError, RangeError) as err:  # RangeError: past the file, or over the scan's budget
            contents.unread += 1
            contents.hidden(f"{within}{entry.name}: {err}" if isinstance(err, RangeError) else f"{within}{err}")
            continue
        following = next((s for s in starts if s > entry.local_offset), None)
        if following is not None and following - end > DESCRIPTOR_SLACK:
            _look_between(source, end, following, contents, within, depth)
    gap = directory.end_offset - directory.central_offset - directory.cd_size
    if not directory.shift and gap > 0 and not any(
        directory.central_offset < e.local_offset < directory.end_offset for e in directory.entries
    ):
        contents.hidden(f"{within}{gap:,} bytes between the central directory and its end record that no entry "
                        "holds (zipfile reads every offset that much later)")  # fmt: skip


def _torch_layout(directory: ZipDirectory) -> tuple[ZipEntry | None, set[int], dict[str, int]]:
    """(the data.pkl torch.load reads, the entries no Python unpickler reads, that checkpoint's storage sizes).
    torch opens the prefix of the first entry; every prefix holding a data.pkl has its storages skipped, and
    the `.debug_pkl` files of TorchScript's code/ (debug info that only torch.jit's own unpickler reads, which
    resolves TorchScript's helpers and no Python callable)."""
    pickles = [e for e in directory.entries if DATA_PKL.fullmatch(e.name)]
    if not pickles:
        return None, set(), {}
    first_prefix = directory.entries[0].name.split("/", 1)[0]
    primary = next((e for e in pickles if e.name == f"{first_prefix}/data.pkl"), pickles[0])
    prefixes = {e.name.split("/", 1)[0] for e in pickles}
    if len(pickles) > 1:
        directory.notes.append(f"{len(pickles)} data.pkl entries: {', '.join(e.name for e in pickles)}")
    skipped, storages = set(), {}
    for entry in directory.entries:
        match = STORAGE.fullmatch(entry.name)
        if match and match["prefix"] in prefixes:
            skipped.add(id(entry))
            if match["prefix"] == primary.name.split("/", 1)[0]:
                storages[match["key"]] = entry.size
        elif (debug := DEBUG_PICKLE.fullmatch(entry.name)) and debug["prefix"] in prefixes:
            skipped.add(id(entry))
    return primary, skipped, storages


def _member(source: RangeSource, entry: ZipEntry, contents: ZipContents, within: str, depth: int, primary: bool,
            storages: dict[str, int], byteorder: str | None = None) -> int:
    """Look at one member and keep it if it is a pickle (or read the zip it is); where its data ends.
    `byteorder` names the checkpoint's byteorder record, whose text is noted when it is not "little"."""
    name, notes = within + entry.name, []
    head, start = read_entry_head(source, entry, SNIFF, notes)
    contents.members += 1
    for note in notes:
        contents.hidden(f"{within}{note}")
    if entry.name == byteorder and head.strip() != b"little":
        contents.notes.append(f"{name}: {head.decode('utf-8', 'replace').strip()[:20]!r} (torch reads the storages "
                              "in that byte order)")  # fmt: skip
    kind = member_kind(entry.name, head, entry.size)
    while kind == "more":  # opcodes that walk to the end of what was read: read on before deciding
        head = read_entry_head(source, entry, min(entry.size, SNIFF_CAP, 64 * len(head)))[0]
        kind = member_kind(entry.name, head, entry.size)
    end = start + entry.compressed_size
    if kind is None:
        if PurePosixPath(entry.name).suffix.lower() in PICKLE_NAMES and entry.size:
            contents.notes.append(f"{name}: named like a pickle, but its first bytes are none")
        return end
    if kind == "zip":
        _nested(source, entry, start, contents, name, depth)
        return end
    if kind == "npy":
        data = _object_array(source, entry)
        if data is None:
            return end
    else:
        data = read_entry(source, entry, DATA_PKL_CAP)[0]
        if zlib.crc32(data) != entry.crc:
            contents.hidden(f"{name}: its CRC ({zlib.crc32(data):08x}) is not the directory's ({entry.crc:08x}): "
                            "zipfile refuses the member, readers that skip the check load it")  # fmt: skip
    contents.found.append(Found(name, kind, data, torch=primary, storages=storages if primary else {}))
    return end


def _object_array(source: RangeSource, entry: ZipEntry) -> bytes | None:
    """An .npy member's bytes up to NPY_CAP when its dtype is object (a pickle follows its header), its header
    alone when that cannot be read (judged as such), None for an array of numbers (nothing to unpickle)."""
    head = read_entry_head(source, entry, NPY_FIRST)[0]
    descr, _, problem = npy_header(head)
    if problem and len(head) < min(entry.size, NPY_HEADER_CAP + 12):
        head = read_entry_head(source, entry, NPY_HEADER_CAP + 12)[0]
        descr, _, problem = npy_header(head)
    if problem:
        return head
    if "O" not in str(descr):
        return None
    return read_entry_head(source, entry, NPY_CAP)[0]


def _nested(source: RangeSource, entry: ZipEntry, start: int, contents: ZipContents, name: str, depth: int) -> None:
    """The zip stored in a member, walked as its own (in place when stored, inflated up to a cap when not)."""
    if depth + 1 > MAX_DEPTH:
        contents.hidden(f"{name}: a zip nested more than {MAX_DEPTH} deep is not read")
        return
    try:
        if entry.method == 0:
            inner: RangeSource = SliceSource(source, start, entry.size)
        else:
            inner = BytesSource(read_entry(source, entry, NESTED_CAP)[0])
        _walk(inner, contents, name + "/", depth + 1)
    except (ZipFormatError, RangeError) as err:
        contents.unread += 1
        contents.hidden(f"{name}: a zip inside that cannot be read: {err}")


def _look_between(source: RangeSource, start: int, stop: int, contents: ZipContents, within: str, depth: int) -> None:
    """Bytes no directory record names (before the first entry, or between two): a local header there is an
    entry the directory hides, a pickle there one that a loader reading from that offset would run."""
    head = source.read(start, min(SNIFF, stop - start))
    if member_kind("", head, stop - start) == "more":
        head = source.read(start, min(SNIFF_CAP, stop - start))
    where = f"{within}{stop - start:,} bytes at {start:,} that no directory record names"
    if head[:4] == LOCAL and len(head) >= 30:
        flags, method, crc, csize, usize, name_len = struct.unpack_from("<HHxxxxIIIH", head, 6)
        name_bytes = source.read(start + 30, min(name_len, 1024))
        hidden = ZipEntry(name_bytes.decode("utf-8", "replace") or f"<entry at {start:,}>", method, flags,
                          min(csize, stop - start), usize, start, crc)  # fmt: skip
        contents.hidden(f"{where}: a local header for {hidden.name!r} the central directory does not list")
        try:
            _member(source, hidden, contents, within, depth, False, {})
        except (ZipFormatError, RangeError) as err:
            contents.unread += 1
            contents.hidden(f"{within}{err}")
    elif member_kind("", head, len(head)) == "pickle":
        contents.hidden(f"{where}: a pickle")
        data = source.read(start, min(stop - start, DATA_PKL_CAP))
        contents.found.append(Found(f"{within}<bytes at {start:,}>", "pickle", data))


def member_kind(name: str, head: bytes, size: int) -> str | None:
    """What a member of `size` bytes is, by its first bytes `head`: "zip", "npy", "pickle" (a compressed one
    only under a pickle's name, as joblib writes them; torch's data.pkl and constants.pkl always), None for
    anything no loader unpickles, or "more" when opcodes walk to the end of `head` and more bytes would tell."""
    if starts_as_zip(head):
        return "zip"
    if head[:6] == NPY_MAGIC:
        return "npy"
    if PurePosixPath(name).name in TORCH_PICKLES:
        return "pickle"
    compressed = head.startswith(COMPRESSED_MAGIC) or ZLIB_HEADER.match(head) is not None
    if compressed and PurePosixPath(name).suffix.lower() in PICKLE_NAMES:
        return "pickle"
    return pickle_sniff(head, size)


IDENTIFIER = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def pickle_sniff(head: bytes, size: int) -> str | None:
    """Walk the first bytes of `size` as a loader would: "pickle" at an import it could resolve (a dotted name,
    or an extension code) or a finished pickle (PROTO first, or more than one opcode); None where they stop
    being opcodes first (text, images, numbers: a loader fails there before anything could run), or end with
    the member; "more" when they walk to the end of `head` and more of the member would tell, and "pickle"
    when that is SNIFF_CAP bytes and the walk still goes."""
    scan = scan_pickle(head, max_pickles=1)
    for found in scan.imports:
        if found.opcode == "EXT" or (IDENTIFIER.fullmatch(found.module) and IDENTIFIER.fullmatch(found.name)):
            return "pickle"
    if scan.complete and scan.results:
        proto = len(head) >= 2 and head[0] == 0x80 and head[1] <= 5
        return "pickle" if proto or scan.opcodes > 1 else None
    if not scan.exhausted or len(head) >= size:
        return None
    return "pickle" if len(head) >= SNIFF_CAP else "more"
