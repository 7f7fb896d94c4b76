"""The GGUF header reader against llama.cpp's own reader (the `gguf` package), and on hostile headers."""

from __future__ import annotations

import hashlib
import struct
import tracemalloc
from pathlib import Path

import pytest
from gguf import GGUFReader
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, LlamaFileType

from estimator.ggml_types import FILE_TYPES, GGML_TYPES
from tests.support.gguf_files import GgufSpec, file_size, gguf_header, real_template, real_vocab, write_gguf
from tracker.formats import gguf
from tracker.formats.ranged import BytesSource


def _full_file(tmp_path: Path, header: bytes, spec: GgufSpec | None = None) -> Path:
    path = tmp_path / "full.gguf"
    path.write_bytes(header + bytes(file_size(header, spec) - len(header)))
    return path


def _scan(data: bytes, budget: int = 64 * 2**20) -> tuple[dict, bytes, str | None]:
    return gguf.scan(BytesSource(data, budget=budget))


def test_every_ggml_type_of_the_package_has_its_block_and_size():
    """The type table holds every type llama.cpp's package defines, with the same block and type sizes."""
    for qtype in GGMLQuantizationType:
        if qtype in GGML_QUANT_SIZES:
            ours = GGML_TYPES[qtype.value]
            assert (ours.name, ours.block_size, ours.type_size) == (qtype.name, *GGML_QUANT_SIZES[qtype])


def test_every_file_type_of_the_package_is_named():
    """general.file_type names match llama.cpp's LlamaFileType (without MOSTLY_/ALL_)."""
    for ftype in LlamaFileType:
        assert FILE_TYPES[ftype.value] == ftype.name.removeprefix("MOSTLY_").removeprefix("ALL_")


def test_facts_match_the_package_reader(tmp_path):
    """Architecture, widths, tensors (name, shape, type, offset, bytes), vocabulary and template agree with GGUFReader."""
    spec = GgufSpec(templates={"default": real_template(), "tool_use": "{{ messages }}"})
    header = gguf_header(spec)
    full = _full_file(tmp_path, header, spec)
    result, scanned, note = _scan(full.read_bytes())
    reader = GGUFReader(full, "r")
    assert note is None and scanned == header
    assert result["architecture"] == "llama" and result["context_length"] == 8192
    assert (result["block_count"], result["embedding_length"], result["feed_forward_length"]) == (2, 512, 1536)
    assert (result["head_count"], result["head_count_kv"]) == (8, 4)
    assert result["rope"] == {"freq_base": 500000.0, "dimension_count": 64}
    assert result["file_type"] == "Q4_K_M"
    theirs = [{"name": t.name, "shape": [int(d) for d in t.shape], "type": t.tensor_type.name,
               "offset": int(t.data_offset) - reader.data_offset, "bytes": int(t.n_bytes)} for t in reader.tensors]
    assert result["tensors"] == theirs
    assert result["parameters"] == sum(int(t.n_elements) for t in reader.tensors)
    assert result["tensor_bytes"] == sum(int(t.n_bytes) for t in reader.tensors)
    assert result["data_offset"] == reader.data_offset
    tokens = [bytes(reader.fields["tokenizer.ggml.tokens"].parts[i]) for i in reader.fields["tokenizer.ggml.tokens"].data]
    assert [t.decode() for t in tokens] == real_vocab()
    expected = hashlib.sha256(b"".join(len(t).to_bytes(8, "little") + t for t in tokens)).hexdigest()
    assert result["tokenizer"]["vocab_sha256"] == expected
    assert result["tokenizer"]["tokens"] == len(real_vocab())
    assert result["special_tokens"] == {"bos": {"id": 101, "token": "[CLS]"}, "eos": {"id": 102, "token": "[SEP]"}}
    assert result["chat_templates"] == {"default": real_template(), "tool_use": "{{ messages }}"}
    assert "tokenizer.ggml.tokens" not in result["metadata"]


def test_the_vocabulary_digest_follows_the_tokens():
    """One token changed changes the vocabulary digest, and nothing else of the tokenizer's facts."""
    tokens = real_vocab()[:]
    tokens[2000] = "changed"
    a, _, _ = _scan(gguf_header(GgufSpec()))
    b, _, _ = _scan(gguf_header(GgufSpec(tokens=tokens)))
    assert a["tokenizer"]["vocab_sha256"] != b["tokenizer"]["vocab_sha256"]
    assert a["tokenizer"]["merges_sha256"] == b["tokenizer"]["merges_sha256"]


def test_split_parts_each_carry_their_split_facts(tmp_path):
    """Every part of a split file is readable alone; together they hold every tensor once."""
    spec = GgufSpec(split_max_tensors=8)
    paths = write_gguf(spec, tmp_path)
    assert [p.name for p in paths] == [f"model-{i:05d}-of-00003.gguf" for i in (1, 2, 3)]
    results = [_scan(p.read_bytes() + bytes(2**25))[0] for p in paths]
    assert [r["split"]["no"] for r in results] == [0, 1, 2]
    assert {r["split"]["count"] for r in results} == {3}
    names = [t["name"] for r in results for t in r["tensors"]]
    assert len(names) == len(set(names)) == results[0]["split"]["tensors_count"]


def test_version_1_uses_32_bit_counts():
    """A version 1 header (uint32 counts, lengths and dimensions) is read."""
    def s(text: str) -> bytes:
        return struct.pack("<I", len(text)) + text.encode()
    header = (b"GGUF" + struct.pack("<III", 1, 1, 2) + s("general.architecture") + struct.pack("<I", 8) + s("llama")
              + s("llama.context_length") + struct.pack("<II", 4, 2048)
              + s("w") + struct.pack("<III", 2, 64, 8) + struct.pack("<IQ", 0, 0))
    result, _, note = _scan(header + bytes(4096))
    assert note is None
    assert result["version"] == 1 and result["context_length"] == 2048
    assert result["tensors"] == [{"name": "w", "shape": [64, 8], "type": "F32", "offset": 0, "bytes": 2048}]


def test_big_endian_files_are_read(tmp_path):
    """A header written big-endian by GGUFWriter reads the same facts."""
    from gguf import GGUFEndian, GGUFWriter

    writer = GGUFWriter(tmp_path / "be.gguf", "llama", endianess=GGUFEndian.BIG)
    writer.add_context_length(4096)
    writer.add_token_list(real_vocab()[:100])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    result, _, note = _scan((tmp_path / "be.gguf").read_bytes())
    assert note is None
    assert (result["endianness"], result["context_length"], result["tokenizer"]["tokens"]) == ("big", 4096, 100)


def _with(header: bytes, at: int, packed: bytes) -> bytes:
    return header[:at] + packed + header[at + len(packed):]


BAD = [
    ("bad magic", lambda h: b"GGML" + h[4:], "not a GGUF file"),
    ("unknown version", lambda h: _with(h, 4, struct.pack("<I", 7)), "unknown GGUF version 7"),
    ("absurd tensor count", lambda h: _with(h, 8, struct.pack("<Q", 2**60)), "absurd count"),
    ("absurd metadata count", lambda h: _with(h, 16, struct.pack("<Q", 2**60)), "absurd count"),
    ("absurd key length", lambda h: _with(h, 24, struct.pack("<Q", 2**60)), "absurd string length"),
    ("truncated", lambda h: h[: len(h) // 2], "truncated"),
]


@pytest.mark.parametrize(("label", "corrupt", "says"), BAD, ids=[b[0] for b in BAD])
def test_hostile_headers_get_a_note_and_allocate_nothing_large(label, corrupt, says):
    """Bad magic, unknown version, 2^60 counts or lengths, truncation: a note, no exception, no large allocation."""
    data = corrupt(gguf_header(GgufSpec(tokens=real_vocab()[:200], merges=[])))
    if label != "truncated":
        data += bytes(1024)
    tracemalloc.start()
    result, _, note = _scan(data)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert note is not None and says in note
    assert peak < 8 * 2**20
    assert result["format"] == "gguf"


def test_an_absurd_array_length_is_refused_before_reading():
    """A tokens array claiming 2^60 strings is refused from its count alone."""
    header = gguf_header(GgufSpec(tokens=real_vocab()[:50], merges=[]))
    at = header.index(b"tokenizer.ggml.tokens") + len(b"tokenizer.ggml.tokens") + 4 + 4
    result, _, note = _scan(_with(header, at, struct.pack("<Q", 2**60)))
    assert note is not None and "absurd count" in note and "tokenizer.ggml.tokens" in note
    assert result["architecture"] == "llama"  # what was read before it is kept


def test_an_unknown_quantization_type_is_noted_and_the_rest_counted():
    """A tensor of an unknown ggml type is named in the note; its bytes are unknown, the header still read."""
    spec = GgufSpec(tokens=real_vocab()[:50], merges=[])
    header = bytearray(gguf_header(spec))
    name = b"blk.0.attn_q.weight"
    at = header.index(name) + len(name) + 4 + 2 * 8  # past the length, n_dims, two dimensions
    header[at : at + 4] = struct.pack("<I", 99)
    result, _, note = _scan(bytes(header) + bytes(2**25))
    assert note is not None and "unknown ggml type 99" in note and "blk.0.attn_q.weight" in note
    assert result["tensor_bytes"] is None and result["tensor_count"] == len(result["tensors"]) > 10
    assert next(t for t in result["tensors"] if t["name"] == "blk.0.attn_q.weight")["type"] == "unknown(99)"


def test_a_header_over_the_cap_is_noted_with_what_was_read():
    """A header that needs more than the budget says so, with the bytes read and what was parsed."""
    header = gguf_header(GgufSpec())
    result, _, note = _scan(header + bytes(1024), budget=256 * 1024)
    assert note is not None and note.startswith("header over the 0.25 MiB cap")
    assert result["architecture"] == "llama" and result["tensors"] == []
