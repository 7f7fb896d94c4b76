"""GGUF headers written by llama.cpp's own writer (the `gguf` package's GGUFWriter), with a real vocabulary
(all-MiniLM-L6-v2's 30,522 WordPiece tokens) and a real chat template (Llama 3.1 Instruct's), for the reader's
tests, the ingest tests and the benchmark. Only the header is written: served as head + zeros by the replay."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from tests.support.replay import FIXTURES

LLAMA_CONFIG = Path(__file__).resolve().parents[2] / (
    "tracker/standins/replay/histories/meta-llama/Llama-3.1-8B-Instruct/commits/"
    "0003-update-tokenizer-config-json/files/tokenizer_config.json"
)
MINILM_TOKENIZER = FIXTURES / "differs/all-minilm-l6-v2/tokenizer.json"


@cache
def real_vocab() -> list[str]:
    """all-MiniLM-L6-v2's vocabulary, in id order."""
    vocab = json.loads(MINILM_TOKENIZER.read_text(encoding="utf-8"))["model"]["vocab"]
    return [token for token, _ in sorted(vocab.items(), key=lambda kv: kv[1])]


@cache
def real_template() -> str:
    """Llama 3.1 8B Instruct's chat template (tokenizer_config.json)."""
    return json.loads(LLAMA_CONFIG.read_text(encoding="utf-8"))["chat_template"]


def merges_of(tokens: list[str], n: int = 2000) -> list[str]:
    """BPE-style merges built from the vocabulary's continuation pieces ("##ing" -> "in g")."""
    pieces = [t[2:] for t in tokens if t.startswith("##") and len(t) > 3][:n]
    return [f"{p[:-1]} {p[-1]}" for p in pieces]


@dataclass
class GgufSpec:
    """What to write; the defaults are a small llama with Q4_K blocks and an F32 norm."""

    arch: str = "llama"
    name: str = "Tiny Llama"
    context_length: int = 8192
    layers: int = 2
    width: int = 512
    ffn: int = 1536
    heads: int = 8
    kv_heads: int = 4
    file_type: int = 15  # Q4_K_M
    quant: str = "Q4_K"
    tokens: list[str] | None = None
    merges: list[str] | None = None
    bos: int = 101
    eos: int = 102
    templates: dict[str, str] = field(default_factory=dict)  # "default" -> tokenizer.chat_template
    extra: dict[str, Any] = field(default_factory=dict)
    split_max_tensors: int = 0
    tensors: list[tuple[str, tuple[int, ...], str]] | None = None  # (name, torch-order shape, ggml type)


def default_tensors(spec: GgufSpec) -> list[tuple[str, tuple[int, ...], str]]:
    vocab = len(spec.tokens or real_vocab())
    head_dim = spec.width // spec.heads
    out = [("token_embd.weight", (vocab, spec.width), "Q6_K" if spec.quant != "F16" else "F16")]
    for i in range(spec.layers):
        p = f"blk.{i}."
        out += [(p + "attn_norm.weight", (spec.width,), "F32"),
                (p + "attn_q.weight", (spec.width, spec.width), spec.quant),
                (p + "attn_k.weight", (spec.kv_heads * head_dim, spec.width), spec.quant),
                (p + "attn_v.weight", (spec.kv_heads * head_dim, spec.width), "Q6_K" if spec.quant != "F16" else "F16"),
                (p + "attn_output.weight", (spec.width, spec.width), spec.quant),
                (p + "ffn_norm.weight", (spec.width,), "F32"),
                (p + "ffn_gate.weight", (spec.ffn, spec.width), spec.quant),
                (p + "ffn_up.weight", (spec.ffn, spec.width), spec.quant),
                (p + "ffn_down.weight", (spec.width, spec.ffn), spec.quant)]
    out += [("output_norm.weight", (spec.width,), "F32"), ("output.weight", (vocab, spec.width), "Q6_K")]
    return out


def write_gguf(spec: GgufSpec, folder: Path, stem: str = "model") -> list[Path]:
    """Write the header(s) with GGUFWriter (no tensor data); one path, or the parts of a split."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFWriter
    from gguf.constants import GGML_QUANT_SIZES

    tokens = spec.tokens if spec.tokens is not None else real_vocab()
    writer = GGUFWriter(folder / f"{stem}.gguf", spec.arch, split_max_tensors=spec.split_max_tensors)
    writer.add_name(spec.name)
    writer.add_context_length(spec.context_length)
    writer.add_block_count(spec.layers)
    writer.add_embedding_length(spec.width)
    writer.add_feed_forward_length(spec.ffn)
    writer.add_head_count(spec.heads)
    writer.add_head_count_kv(spec.kv_heads)
    writer.add_rope_freq_base(500000.0)
    writer.add_rope_dimension_count(spec.width // spec.heads)
    writer.add_file_type(spec.file_type)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("llama-bpe")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * len(tokens))
    writer.add_token_scores([0.0] * len(tokens))
    writer.add_token_merges(spec.merges if spec.merges is not None else merges_of(tokens))
    writer.add_bos_token_id(spec.bos)
    writer.add_eos_token_id(spec.eos)
    writer.add_add_bos_token(True)
    for name, text in spec.templates.items():
        writer.add_string("tokenizer.chat_template" + ("" if name == "default" else f".{name}"), text)
    for key, value in spec.extra.items():
        writer.add_key_value(key, *value)
    for name, shape, type_name in spec.tensors or default_tensors(spec):
        qtype = GGMLQuantizationType[type_name]
        block, size = GGML_QUANT_SIZES[qtype]
        elements = int(np.prod(shape))
        writer.add_tensor_info(name, shape, np.dtype(np.float32), elements // block * size, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    assert writer.fout is not None
    paths = [Path(f.name) for f in writer.fout]
    writer.close()
    return paths


def gguf_header(spec: GgufSpec | None = None) -> bytes:
    """The header bytes of one (unsplit) file."""
    with tempfile.TemporaryDirectory() as tmp:
        (path,) = write_gguf(spec or GgufSpec(), Path(tmp))
        return path.read_bytes()


def file_size(header: bytes, spec: GgufSpec | None = None) -> int:
    """The size of the whole file the header describes (GGUFWriter pads the header and each tensor to 32)."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    spec = spec or GgufSpec()
    pad = lambda n: -(-n // 32) * 32  # noqa: E731 - one line of arithmetic
    total = pad(len(header))
    for _, shape, type_name in spec.tensors or default_tensors(spec):
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType[type_name]]
        elements = 1
        for d in shape:
            elements *= d
        total += pad(elements // block * size)
    return total


@dataclass
class GgufFile:
    """An LFS file of a replay commit served as `head` then zeros up to `size` (default: what the header implies)."""

    head: bytes
    size: int | None = None
    sha256: str | None = None


def write_gguf_repo(root: Path, repo_id: str, commits: list[dict[str, Any]]) -> None:
    """A replay history whose commits carry GGUF files: [{"title", "files": {path: json-or-text},
    "gguf": {path: GgufFile}}], oldest first (tests/support/synthetic_repos.write_repo's format otherwise)."""
    from tests.support.synthetic_repos import write_repo

    plain = []
    for commit in commits:
        lfs = {}
        for i, (path, spec) in enumerate(dict(commit.get("gguf", {})).items()):
            entry: dict[str, Any] = {"head": f"gguf/{i}.bin", "size": spec.size or file_size(spec.head)}
            if spec.sha256:
                entry["sha256"] = spec.sha256
            lfs[path] = entry
        plain.append({**{k: v for k, v in commit.items() if k != "gguf"}, "lfs": lfs})
    write_repo(root, repo_id, plain)
    for n, commit in enumerate(commits, start=1):
        for i, spec in enumerate(dict(commit.get("gguf", {})).values()):
            target = root / repo_id / "commits" / f"{n:04d}-commit" / "gguf" / f"{i}.bin"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(spec.head)


def split_headers(spec: GgufSpec, stem: str) -> dict[str, bytes]:
    """The header bytes of each part of a split (`spec.split_max_tensors` tensors a part), named as
    GGUFWriter names them (`<stem>-00001-of-0000N.gguf`)."""
    with tempfile.TemporaryDirectory() as tmp:
        return {path.name: path.read_bytes() for path in write_gguf(spec, Path(tmp), stem)}


def converter_tokens(tokenizer_json: Path, vocab_size: int | None = None) -> list[str]:
    """`tokenizer.ggml.tokens` as llama.cpp's convert_hf_to_gguf.py writes them (`get_vocab_base`, and for
    WordPiece `BertModel.set_vocab`'s phantom spaces), read through the `tokenizers` library rather than
    tokenizer.json's text: every id below the model's `vocab_size`, `[PAD<id>]` for an id no token has."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_json))
    reverse = {i: t for t, i in tokenizer.get_vocab(with_added_tokens=True).items()}
    size = vocab_size if vocab_size is not None else max(reverse) + 1
    assert max(reverse) < size  # the converter asserts the same
    tokens = [reverse.get(i, f"[PAD{i}]") for i in range(size)]
    if json.loads(tokenizer.to_str())["model"]["type"] == "WordPiece":
        tokens = [t if t.startswith("[") and t.endswith("]") else t[2:] if t.startswith("##") else "\u2581" + t
                  for t in tokens]
    return tokens
