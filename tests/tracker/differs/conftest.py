"""Builds `Snapshot`s for the differ tests from real fixture files, the way the pipeline would."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tracker.formats.manifest import TensorInfo, WeightManifest
from tracker.revision.snapshot import FileEntry, Snapshot

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "differs"


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def fixture_json(name: str) -> Any:
    return json.loads(fixture_bytes(name))


def blob_oid(data: bytes) -> str:
    """The git blob sha1 of `data`, as the Hub reports it."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs(sha_seed: str, size: int) -> tuple[str, int]:
    """An LFS (sha256, size) pair derived from a seed: stands for a weight file we never download."""
    return hashlib.sha256(sha_seed.encode()).hexdigest(), size


def manifest_from_header(header: dict[str, Any], error: str | None = None) -> WeightManifest:
    """A WeightManifest from a parsed safetensors header, as the header reader builds it."""
    tensors = tuple(
        TensorInfo(name, spec["dtype"], tuple(spec["shape"])) for name, spec in header.items() if name != "__metadata__"
    )
    return WeightManifest(tensors, dict(header.get("__metadata__") or {}), error)


def build_snapshot(
    contents: dict[str, bytes | str | Any] | None = None,
    *,
    lfs_files: dict[str, tuple[str, int]] | None = None,
    manifests: dict[str, WeightManifest] | None = None,
    unavailable: dict[str, tuple[str, bytes]] | None = None,
    sha: str = "0" * 40,
) -> Snapshot:
    """A snapshot holding `contents` (bytes, text, or a JSON value serialised with indent 2), LFS files
    by (sha256, size), header manifests, and files listed but `unavailable` (reason, bytes for the oid)."""
    snap = Snapshot("org/model", sha)
    for path, value in (contents or {}).items():
        data = value if isinstance(value, bytes) else value.encode() if isinstance(value, str) else _json(value)
        snap.files[path] = FileEntry(path, blob_oid(data), len(data))
        snap.contents[path] = data
    for path, (sha256, size) in (lfs_files or {}).items():
        pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()
        snap.files[path] = FileEntry(path, blob_oid(pointer), len(pointer), sha256, size)
    for path, (reason, data) in (unavailable or {}).items():
        snap.files[path] = FileEntry(path, blob_oid(data), len(data))
        snap.unavailable[path] = reason
    snap.manifests.update(manifests or {})
    return snap


def _json(value: Any) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode()


def edited(name: str, edit: Callable[[Any], None]) -> Any:
    """A fixture's parsed JSON after `edit` (which mutates it in place); the edit is named in SOURCES.md."""
    doc = copy.deepcopy(_parsed(name))
    edit(doc)
    return doc


_CACHE: dict[str, Any] = {}


def _parsed(name: str) -> Any:
    if name not in _CACHE:
        _CACHE[name] = fixture_json(name)
    return _CACHE[name]


@pytest.fixture
def minilm_header() -> dict[str, Any]:
    """The real safetensors header of sentence-transformers/all-MiniLM-L6-v2's model.safetensors."""
    return copy.deepcopy(_parsed("all-minilm-l6-v2/model.safetensors.header.json"))


class Kit:
    """The helpers above, handed to tests as one fixture."""

    build = staticmethod(build_snapshot)
    bytes = staticmethod(fixture_bytes)
    json = staticmethod(fixture_json)
    edited = staticmethod(edited)
    lfs = staticmethod(lfs)
    manifest = staticmethod(manifest_from_header)


@pytest.fixture
def kit() -> type[Kit]:
    """Snapshot-building helpers over the real fixture files."""
    return Kit


def bpe_tokenizer(merges: int = 400, seed: int = 0, pairs: bool = True) -> dict[str, Any]:
    """A byte-level BPE tokenizer.json laid out like Llama 3's (Split + ByteLevel pre-tokenizer,
    TemplateProcessing post-processor, special added tokens), built deterministically: 256 byte symbols
    plus one token per merge. `pairs` writes merges as ["a", "b"] (tokenizers >= 0.20) or "a b"."""
    import random

    rng = random.Random(seed)
    symbols = [chr(0x100 + i) for i in range(256)]
    vocab = {s: i for i, s in enumerate(symbols)}
    merge_list: list[list[str]] = []
    while len(merge_list) < merges:
        a, b = rng.choice(symbols), rng.choice(symbols)
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
            symbols.append(a + b)
            merge_list.append([a, b])
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|eot_id|>"]
    added = [
        {"id": len(vocab) + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i, t in enumerate(specials)
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|\\p{L}+|\\p{N}{1,3}"},
             "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {"<|begin_of_text|>": {
                               "id": "<|begin_of_text|>", "ids": [added[0]["id"]], "tokens": ["<|begin_of_text|>"]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": vocab, "merges": merge_list if pairs else [" ".join(m) for m in merge_list]},
    }


Kit.bpe = staticmethod(bpe_tokenizer)  # type: ignore[attr-defined]
