"""A GGUF file's header, read by range: magic, version, key-value metadata, tensor infos.

The layout (llama.cpp's gguf.h, versions 1-3): b"GGUF", a uint32 version, the tensor and key-value counts,
the key-values (key string, uint32 value type, value; arrays carry an item type and a count and may nest),
then per tensor its name, dimension count, dimensions, ggml type and data offset. Version 1 counts and string
lengths are uint32, later ones uint64; a file whose version reads byte-swapped is big-endian. Reads grow only
as far as the header needs; every count and string length is checked against the bytes left in the file
before anything is allocated. What the header says is kept as facts (`scan`'s result); the vocabulary itself
is not: only its size and a sha256 digest (of each token as its UTF-8 bytes after a uint64 little-endian
length, which is the tokens array as a version 2/3 little-endian file stores it).
"""

from __future__ import annotations

import hashlib
import math
import re
import struct
from dataclasses import dataclass, field
from typing import Any

from estimator.ggml_types import FILE_TYPES, GGML_TYPES
from tracker.formats.ranged import OverBudget, RangeError, RangeSource

MAGIC = b"GGUF"
VERSIONS = (1, 2, 3)
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_NESTING = 4  # arrays of arrays of ...
MAX_KEY_BYTES = 64 * 1024
KEEP_ARRAY_ITEMS = 64  # metadata arrays up to this long are kept whole, longer ones as their type and count
KEEP_STRING_CHARS = 4096  # metadata strings are clipped to this (chat templates are kept whole)
MAX_TEMPLATE_CHARS = 1024 * 1024
DEFAULT_ALIGNMENT = 32
FIRST_READ = 64 * 1024

# value type id -> (name, struct code, size); 8 string and 9 array are variable
SCALARS = {0: ("uint8", "B", 1), 1: ("int8", "b", 1), 2: ("uint16", "H", 2), 3: ("int16", "h", 2),
           4: ("uint32", "I", 4), 5: ("int32", "i", 4), 6: ("float32", "f", 4), 7: ("bool", "?", 1),
           10: ("uint64", "Q", 8), 11: ("int64", "q", 8), 12: ("float64", "d", 8)}
STRING, ARRAY = 8, 9
TOKENS_KEY, MERGES_KEY = "tokenizer.ggml.tokens", "tokenizer.ggml.merges"
TEMPLATE_KEY = "tokenizer.chat_template"
SPECIAL_TOKEN = re.compile(r"^tokenizer\.ggml\.(\w+)_token_id$")
# The architecture's hyper-parameters, as `{arch}.<key>`, under the names the facts give them.
ARCH_FACTS = {"context_length": "context_length", "block_count": "block_count",
              "embedding_length": "embedding_length", "feed_forward_length": "feed_forward_length",
              "attention.head_count": "head_count", "attention.head_count_kv": "head_count_kv",
              "expert_count": "expert_count", "expert_used_count": "expert_used_count", "vocab_size": "vocab_size"}


class GgufError(Exception):
    """The header is not a GGUF header we can read; the message says where and why."""



def is_gguf(path: str) -> bool:
    """A GGUF file, by its suffix (any case)."""
    return path.lower().endswith(".gguf")

@dataclass
class _Cursor:
    """Reads the header front to back, fetching ahead in growing blocks; keeps every byte fetched from 0."""

    source: RangeSource
    pos: int = 0
    data: bytearray = field(default_factory=bytearray)
    chunk: int = FIRST_READ
    endian: str = "<"

    @property
    def left(self) -> int:
        return self.source.size - self.pos

    def need(self, n: int, what: str) -> None:
        if n > self.left:
            raise GgufError(f"truncated: {what} at byte {self.pos:,} needs {n:,} bytes, the file has {self.left:,} left")
        missing = self.pos + n - len(self.data)
        if missing <= 0:
            return
        start = len(self.data)
        want = min(max(missing, self.chunk), self.source.size - start)
        self.chunk = min(self.chunk * 2, 2**20)  # the source reads ahead over the network; this saves calls
        try:
            got = self.source.read(start, want)
        except OverBudget:
            if want == missing:
                raise
            got = self.source.read(start, missing)  # the read-ahead passed the cap; the header itself may not
        if len(got) < missing:
            raise GgufError(f"truncated: the server sent {len(got):,} bytes at byte {start:,}, {missing:,} needed")
        self.data += got

    def unpack(self, code: str, size: int, what: str) -> Any:
        self.need(size, what)
        value = struct.unpack_from(self.endian + code, self.data, self.pos)[0]
        self.pos += size
        return value

    def raw(self, n: int, what: str) -> bytes:
        self.need(n, what)
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return out

    def skip(self, n: int, what: str) -> None:
        self.need(n, what)
        self.pos += n


@dataclass
class _Header:
    version: int = 0
    count_code: str = "Q"
    count_size: int = 8
    metadata: dict[str, Any] = field(default_factory=dict)
    templates: dict[str, str] = field(default_factory=dict)
    tokens: list[bytes] | None = None
    tokenizer: dict[str, Any] = field(default_factory=dict)
    tensors: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    header_end: int | None = None


def scan(source: RangeSource) -> tuple[dict[str, Any], bytes, str | None]:
    """Read a GGUF header: (facts, the header's bytes, a note on what could not be read or None)."""
    cursor, header = _Cursor(source), _Header()
    note = None
    try:
        _read_header(cursor, header)
    except OverBudget as err:
        note = (f"header over the {err.budget / 2**20:g} MiB cap: read {source.bytes_read:,} of the file's "
                f"{source.size:,} bytes ({len(header.metadata)} metadata keys, {len(header.tensors)} tensors so far)")
    except GgufError as err:
        note = str(err)
    except RangeError as err:
        note = f"not readable: {err}"
    notes = ([note] if note else []) + header.notes
    result = facts(header, cursor.endian)
    return result, bytes(cursor.data[: header.header_end or cursor.pos]), "; ".join(notes) or None


def _read_header(cursor: _Cursor, header: _Header) -> None:
    magic = cursor.raw(4, "the magic")
    if magic != MAGIC:
        raise GgufError(f"not a GGUF file: the magic is {magic!r}, not b'GGUF'")
    version = cursor.unpack("I", 4, "the version")
    if version not in VERSIONS and version & 0xFFFF == 0 and (swapped := int.from_bytes(version.to_bytes(4, "little"), "big")) in VERSIONS:
        cursor.endian, version = ">", swapped
    if version not in VERSIONS:
        raise GgufError(f"unknown GGUF version {version} (this reader knows {', '.join(map(str, VERSIONS))})")
    header.version = version
    if version == 1:
        header.count_code, header.count_size = "I", 4
    tensor_count = _count(cursor, header, "the tensor count", 4 + 4 + 4 + 8 + header.count_size)
    kv_count = _count(cursor, header, "the metadata count", header.count_size + 4 + 1)
    for _ in range(kv_count):
        _read_kv(cursor, header)
    for _ in range(tensor_count):
        header.tensors.append(_read_tensor_info(cursor, header))
    header.header_end = cursor.pos
    _check_tensor_data(cursor, header)


def _count(cursor: _Cursor, header: _Header, what: str, least_bytes_each: int) -> int:
    """A count, refused when that many items of at least `least_bytes_each` bytes cannot fit in the file."""
    at = cursor.pos
    n = cursor.unpack(header.count_code, header.count_size, what)
    if n * least_bytes_each > cursor.left:
        raise GgufError(f"absurd count: {what} at byte {at:,} is {n:,}, more than the {cursor.left:,} bytes left can hold")
    return n


def _string(cursor: _Cursor, header: _Header, what: str, limit: int | None = None) -> bytes:
    at = cursor.pos
    n = cursor.unpack(header.count_code, header.count_size, f"the length of {what}")
    if n > cursor.left:
        raise GgufError(f"absurd string length: {what} at byte {at:,} claims {n:,} bytes, the file has {cursor.left:,} left")
    if limit is not None and n > limit:
        raise GgufError(f"{what} at byte {at:,} is {n:,} bytes long, over the {limit:,}-byte limit")
    return cursor.raw(n, what)


def _read_kv(cursor: _Cursor, header: _Header) -> None:
    key = _string(cursor, header, "a metadata key", MAX_KEY_BYTES).decode("utf-8", "replace")
    at = cursor.pos
    value_type = cursor.unpack("I", 4, f"the type of {key}")
    if key == TOKENS_KEY and value_type == ARRAY:
        header.tokens = _read_string_array(cursor, header, key, keep=True)
        header.metadata[key] = {"array": "string", "count": len(header.tokens)}
        return
    if key == MERGES_KEY and value_type == ARRAY:
        merges = _read_string_array(cursor, header, key, keep=True)
        header.tokenizer["merges"], header.tokenizer["merges_sha256"] = len(merges), _digest(merges)
        header.metadata[key] = {"array": "string", "count": len(merges)}
        return
    if value_type == STRING and (key == TEMPLATE_KEY or key.startswith(TEMPLATE_KEY + ".")):
        text = _string(cursor, header, key, MAX_TEMPLATE_CHARS * 4).decode("utf-8", "replace")
        header.templates[key[len(TEMPLATE_KEY) + 1 :] or "default"] = text
        return
    header.metadata[key] = _read_value(cursor, header, value_type, key, at, depth=0)


def _read_string_array(cursor: _Cursor, header: _Header, key: str, keep: bool) -> list[bytes]:
    at = cursor.pos
    item_type = cursor.unpack("I", 4, f"the item type of {key}")
    if item_type != STRING:
        raise GgufError(f"{key} at byte {at:,} is an array of type {item_type}, not of strings")
    n = _count(cursor, header, f"the length of {key}", header.count_size)
    out = []
    for i in range(n):
        item = _string(cursor, header, f"{key}[{i}]")
        if keep:
            out.append(item)
    return out


def _read_value(cursor: _Cursor, header: _Header, value_type: int, key: str, at: int, depth: int) -> Any:
    if value_type in SCALARS:
        _, code, size = SCALARS[value_type]
        return _json_number(cursor.unpack(code, size, key))
    if value_type == STRING:
        text = _string(cursor, header, key).decode("utf-8", "replace")
        return text if len(text) <= KEEP_STRING_CHARS else text[:KEEP_STRING_CHARS] + "…"
    if value_type != ARRAY:
        raise GgufError(f"unknown value type {value_type} for {key} at byte {at:,}")
    if depth >= MAX_NESTING:
        raise GgufError(f"{key} at byte {at:,} nests arrays more than {MAX_NESTING} deep")
    item_type = cursor.unpack("I", 4, f"the item type of {key}")
    if item_type in SCALARS:
        _, code, size = SCALARS[item_type]
        n = _count(cursor, header, f"the length of {key}", size)
        if n > KEEP_ARRAY_ITEMS:
            cursor.skip(n * size, key)
            return {"array": SCALARS[item_type][0], "count": n}
        cursor.need(n * size, key)
        values = struct.unpack_from(f"{cursor.endian}{n}{code}", cursor.data, cursor.pos)
        cursor.pos += n * size
        return [_json_number(v) for v in values]
    least = header.count_size if item_type == STRING else 4 + header.count_size
    if item_type not in (STRING, ARRAY):
        raise GgufError(f"unknown item type {item_type} in the array {key} at byte {at:,}")
    n = _count(cursor, header, f"the length of {key}", least)
    items = [_read_value(cursor, header, item_type, f"{key}[{i}]", cursor.pos, depth + 1) for i in range(n)]
    if n > KEEP_ARRAY_ITEMS:
        return {"array": "string" if item_type == STRING else "array", "count": n}
    return items


def _json_number(value: Any) -> Any:
    """JSON has no NaN or infinity (PostgreSQL's JSON refuses them): such floats are kept as text."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _read_tensor_info(cursor: _Cursor, header: _Header) -> dict[str, Any]:
    name = _string(cursor, header, "a tensor name", MAX_KEY_BYTES).decode("utf-8", "replace")
    at = cursor.pos
    n_dims = cursor.unpack("I", 4, f"the dimension count of {name}")
    if n_dims > MAX_DIMS:
        raise GgufError(f"tensor {name} at byte {at:,} claims {n_dims:,} dimensions (ggml has at most {MAX_DIMS})")
    shape = [cursor.unpack(header.count_code, header.count_size, f"the dimensions of {name}") for _ in range(n_dims)]
    type_id = cursor.unpack("I", 4, f"the type of {name}")
    offset = cursor.unpack("Q", 8, f"the offset of {name}")
    elements = math.prod(shape)
    ggml = GGML_TYPES.get(type_id)
    if ggml is None:
        header.notes.append(f"tensor {name} has an unknown ggml type {type_id}: its bytes are not counted")
        return {"name": name, "shape": shape, "type": f"unknown({type_id})", "offset": offset, "elements": elements,
                "bytes": None}
    if shape and shape[0] % ggml.block_size:
        header.notes.append(f"tensor {name}: {shape[0]} elements per row is not a multiple of {ggml.name}'s "
                            f"block of {ggml.block_size}")
    return {"name": name, "shape": shape, "type": ggml.name, "offset": offset, "elements": elements,
            "bytes": ggml.bytes_for(elements)}


def _check_tensor_data(cursor: _Cursor, header: _Header) -> None:
    """The alignment is a power of two; every tensor's data lies inside the file."""
    alignment = header.metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        header.notes.append(f"general.alignment {alignment!r} is not a power of two: {DEFAULT_ALIGNMENT} assumed")
        alignment = DEFAULT_ALIGNMENT
    header.metadata["general.alignment"] = alignment
    data_start = -(-cursor.pos // alignment) * alignment
    header.metadata["_data_offset"] = data_start
    past = [t["name"] for t in header.tensors if t["bytes"] is not None
            and data_start + t["offset"] + t["bytes"] > cursor.source.size]
    if past:
        header.notes.append(f"{len(past)} tensor(s) run past the end of the file ({past[0]}"
                            + (", ..." if len(past) > 1 else "") + ")")


def _digest(items: list[bytes]) -> str:
    digest = hashlib.sha256()
    for item in items:
        digest.update(len(item).to_bytes(8, "little"))
        digest.update(item)
    return digest.hexdigest()


def facts(header: _Header, endian: str = "<") -> dict[str, Any]:
    """The facts hubwatch keeps of a header (read whole or in part)."""
    meta = dict(header.metadata)
    data_offset = meta.pop("_data_offset", None)
    arch = meta.get("general.architecture")
    out: dict[str, Any] = {"format": "gguf", "version": header.version or None,
                           "endianness": "big" if endian == ">" else "little",
                           "architecture": arch, "name": meta.get("general.name")}
    prefix = f"{arch}." if isinstance(arch, str) else None
    for key, name in ARCH_FACTS.items():
        out[name] = meta.get(prefix + key) if prefix else None
    out["rope"] = {k[len(prefix) + 5 :]: v for k, v in meta.items() if prefix and k.startswith(prefix + "rope.")}
    file_type = meta.get("general.file_type")
    out["file_type_id"] = file_type
    out["file_type"] = FILE_TYPES.get(file_type, f"unknown({file_type})") if isinstance(file_type, int) else None
    out["alignment"], out["data_offset"] = meta.get("general.alignment"), data_offset
    out["header_bytes"] = header.header_end
    known = [t for t in header.tensors if t["bytes"] is not None]
    out["tensor_count"] = len(header.tensors)
    out["tensors"] = [{k: t[k] for k in ("name", "shape", "type", "offset", "bytes")} for t in header.tensors]
    out["parameters"] = sum(t["elements"] for t in header.tensors)
    out["tensor_bytes"] = sum(t["bytes"] for t in known) if len(known) == len(header.tensors) else None
    types: dict[str, int] = {}
    for t in header.tensors:
        types[t["type"]] = types.get(t["type"], 0) + 1
    out["types"] = dict(sorted(types.items()))
    out["tokenizer"] = _tokenizer(header, meta)
    out["special_tokens"] = out["tokenizer"]["special_tokens"]
    out["chat_templates"] = header.templates
    split = {k[len("split."):].replace(".", "_"): v for k, v in meta.items() if k.startswith("split.")}
    out["split"] = split or None
    out["metadata"] = {k: v for k, v in sorted(meta.items()) if not k.startswith("tokenizer.ggml.")}
    return out


def _tokenizer(header: _Header, meta: dict[str, Any]) -> dict[str, Any]:
    tokens = header.tokens
    special: dict[str, Any] = {}
    for key, value in meta.items():
        match = SPECIAL_TOKEN.match(key)
        if match and isinstance(value, int):
            text = tokens[value].decode("utf-8", "replace") if tokens is not None and 0 <= value < len(tokens) else None
            special[match[1]] = {"id": value, "token": text}
    flags = {k[len("tokenizer.ggml."):]: v for k, v in meta.items()
             if k.startswith("tokenizer.ggml.add_") and isinstance(v, bool)}
    return {
        "model": meta.get("tokenizer.ggml.model"),
        "pre": meta.get("tokenizer.ggml.pre"),
        "tokens": len(tokens) if tokens is not None else None,
        "vocab_sha256": _digest(tokens) if tokens is not None else None,
        "merges": header.tokenizer.get("merges"),
        "merges_sha256": header.tokenizer.get("merges_sha256"),
        "special_tokens": dict(sorted(special.items())),
        "flags": flags,
    }
