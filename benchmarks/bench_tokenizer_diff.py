"""Figure: CPU time of `tokenizer.diff` on a revision changing a 128k-token BPE tokenizer.json.

The pair is generated deterministically in Llama 3's layout (no 128k tokenizer.json is available
offline): 128,000 byte-level BPE vocab entries, about 280,000 merges, 256 added special tokens
(ids 128000-128255, 128,256 ids in all). The new revision renames three reserved special tokens the way
Llama 3.1 did (<|finetune_right_pad_id|>, <|eom_id|>, <|python_tag|>) and re-cuts 1,000 merges.
Baseline: a plain `DeepDiff` of the two parsed files. Goal: tokenizer.diff under 1 s of CPU.
Run: python -m benchmarks run tokenizer_diff   (size: runs of tokenizer.diff, default 5; DeepDiff runs once)
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from deepdiff import DeepDiff

from benchmarks.declare import Benchmark, Figure, detail, run_alone
from tracker.differs import tokenizer
from tracker.revision.snapshot import FileEntry, Snapshot

VOCAB = 128_000
MERGES = 280_000
SPECIAL = 256
RENAMES = {128004: "<|finetune_right_pad_id|>", 128008: "<|eom_id|>", 128010: "<|python_tag|>"}
RECUT = 1_000
BENCHMARK = Benchmark(
    name="tokenizer_diff",
    about="CPU time of tokenizer.diff on a revision changing a 128k-token BPE tokenizer.json, against a plain DeepDiff",
    tags=("slow", "differs"),
    size="runs of tokenizer.diff (default 5; the median is kept)",
    small=1,
    figures=(
        Figure("tokenizer.diff CPU, median", "ms", goal=1000.0, margin=0.3),
        Figure("of which JSON parsing of both", "ms"),
        Figure("summarising the parsed files", "ms"),
        Figure("plain DeepDiff of the parsed files", "ms", note="the baseline, measured in the same run"),
        Figure("DeepDiff / tokenizer.diff", "ratio", direction="higher"),
    ),
)
LLAMA3_SPLIT = (
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
)


def byte_symbols() -> list[str]:
    """GPT-2's byte-to-unicode table: the 256 symbols byte-level BPE vocabularies are written in."""
    printable = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    codes, extra = printable[:], 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    return [chr(c) for _, c in sorted(zip(printable, codes, strict=True))]


def build_pair() -> tuple[bytes, bytes]:
    """The old and new tokenizer.json, serialised as the tokenizers library writes them."""
    rng = random.Random(20240723)
    symbols = byte_symbols()
    vocab = {s: i for i, s in enumerate(symbols)}
    merges: list[list[str]] = []
    short, recent = symbols[:], symbols[:]
    while len(vocab) < VOCAB:
        a, b = rng.choice(short), rng.choice(short if rng.random() < 0.7 else recent[-2000:])
        if a + b in vocab or len(a + b) > 16:
            continue
        vocab[a + b] = len(vocab)
        merges.append([a, b])
        recent.append(a + b)
        if len(a + b) <= 4:
            short.append(a + b)
    seen = {tuple(m) for m in merges}
    for pair in _alternative_splits(vocab, seen):  # as converted tiktoken files have: many merges per token
        if len(merges) >= MERGES:
            break
        merges.append(list(pair))
    tokens = list(vocab)
    while len(merges) < MERGES:  # top up with pairs of existing tokens
        pair = (rng.choice(tokens[:4000]), rng.choice(tokens[:4000]))
        if pair not in seen:
            seen.add(pair)
            merges.append(list(pair))
    added = [{"id": VOCAB + i, "content": _special_name(i), "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": True} for i in range(SPECIAL)]
    old = _tokenizer_json(vocab, merges, added)
    new = json.loads(json.dumps(old))
    for token in new["added_tokens"]:
        token["content"] = RENAMES.get(token["id"], token["content"])
    kept = new["model"]["merges"][:-RECUT]
    fresh = [" ".join(m) for m in _fresh_merges(rng, vocab, seen)]
    new["model"]["merges"] = kept[:1000] + fresh + kept[1000:]
    return _dump(old), _dump(new)


def _special_name(i: int) -> str:
    named = {0: "<|begin_of_text|>", 1: "<|end_of_text|>", 6: "<|start_header_id|>", 7: "<|end_header_id|>",
             9: "<|eot_id|>"}
    reserved = i - sum(1 for k in named if k < i)
    return named.get(i, f"<|reserved_special_token_{reserved}|>")


def _alternative_splits(vocab: dict[str, int], seen: set) -> list[tuple[str, str]]:
    """Every split of a vocab token into two vocab tokens that is not yet a merge."""
    out = []
    for token in vocab:
        for cut in range(1, len(token)):
            pair = (token[:cut], token[cut:])
            if pair not in seen and pair[0] in vocab and pair[1] in vocab:
                seen.add(pair)
                out.append(pair)
    return out


def _fresh_merges(rng: random.Random, vocab: dict[str, int], seen: set) -> list[list[str]]:
    tokens, out = list(vocab)[:4000], []
    while len(out) < RECUT:
        pair = (rng.choice(tokens), rng.choice(tokens))
        if pair not in seen:
            seen.add(pair)
            out.append(list(pair))
    return out


def _tokenizer_json(vocab: dict[str, int], merges: list[list[str]], added: list[dict]) -> dict:
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_SPLIT},
             "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                                                      {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [], "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [VOCAB],
                                                                   "tokens": ["<|begin_of_text|>"]}}}]},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": vocab, "merges": [" ".join(m) for m in merges]},
    }


def _dump(doc: dict) -> bytes:
    return json.dumps(doc, indent=2, ensure_ascii=False).encode()


def snapshot(data: bytes, sha: str) -> Snapshot:
    """A fresh snapshot (no parse cached), as the pipeline hands the differ one."""
    snap = Snapshot("bench/llama-like", sha)
    snap.files["tokenizer.json"] = FileEntry("tokenizer.json", sha, len(data))
    snap.contents["tokenizer.json"] = data
    return snap


def cpu_seconds(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.process_time()
        fn()
        times.append(time.process_time() - started)
    return statistics.median(times)


def measure(size: int | None = None) -> dict[str, float]:
    runs = size or 5
    old_bytes, new_bytes = build_pair()
    old_doc, new_doc = json.loads(old_bytes), json.loads(new_bytes)
    changes = tokenizer.diff(snapshot(old_bytes, "a" * 40), snapshot(new_bytes, "b" * 40))
    assert len(changes) == 1, changes
    full = cpu_seconds(lambda: tokenizer.diff(snapshot(old_bytes, "a" * 40), snapshot(new_bytes, "b" * 40)), runs)
    parse = cpu_seconds(lambda: (json.loads(old_bytes), json.loads(new_bytes)), runs)
    summarise = cpu_seconds(lambda: tokenizer.summarise_tokenizer(old_doc, new_doc), runs)
    deep = cpu_seconds(lambda: DeepDiff(old_doc, new_doc), 1)
    detail(f"tokenizer.json pair: {len(old_bytes) / 1e6:.1f} MB -> {len(new_bytes) / 1e6:.1f} MB, "
           f"{len(old_doc['model']['merges']):,} merges; change summary: {changes[0].summary}")
    return {"tokenizer.diff CPU, median": full * 1000, "of which JSON parsing of both": parse * 1000,
            "summarising the parsed files": summarise * 1000, "plain DeepDiff of the parsed files": deep * 1000,
            "DeepDiff / tokenizer.diff": deep / full}


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
