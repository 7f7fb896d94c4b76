"""Comparisons across formats (tracker/family/lineage.py): a GGUF's vocabulary digest equals the one taken from the
tokenizer.json it was converted from; special tokens and the stop set compare by text; generation defaults
are `not_in_format` for a GGUF; parts stored by an older PARTS_VERSION are known stale."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.gguf_files import GgufSpec, converter_tokens, gguf_header
from tracker.family.lineage import PARTS_VERSION, PartValue, lacking_parts, lineage, parts_of, parts_stale
from tracker.formats import FileScan
from tracker.formats.gguf import scan
from tracker.formats.ranged import BytesSource
from tracker.revision.snapshot import FileEntry, Snapshot
from tracker.standins.replay.control import BUNDLED_ROOT

MINILM = BUNDLED_ROOT / "sentence-transformers/all-MiniLM-L6-v2/commits"
FIRST = MINILM / "0001-add-new-sentencetransformer-model/files"
ADDED = MINILM / "0005-add-query-and-doc-special-tokens/files"


def snapshot_of(files: dict[str, Any], scans: dict[str, dict[str, Any]] | None = None) -> Snapshot:
    """A snapshot holding these files (bytes, text or JSON values) and GGUF scans."""
    snap = Snapshot(repo_id="org/name", sha="0" * 40)
    for path, value in files.items():
        data = value if isinstance(value, bytes) else (value if isinstance(value, str) else json.dumps(value)).encode()
        snap.files[path] = FileEntry(path, f"oid-{path}", len(data))
        snap.contents[path] = data
    for path, facts in (scans or {}).items():
        snap.files[path] = FileEntry(path, f"oid-{path}", 0)
        snap.scans[path] = FileScan("gguf", facts, 0, None, None)
    return snap


def gguf_facts(**spec: Any) -> dict[str, Any]:
    """The reader's facts of a header written by the `gguf` package's GGUFWriter."""
    facts, _, note = scan(BytesSource(gguf_header(GgufSpec(**spec))))
    assert note is None or "run past the end" in note  # only the header is written
    return facts


@pytest.mark.parametrize(("folder", "vocab_size"), [
    (FIRST, 30522),  # real WordPiece vocabulary: the converter's phantom spaces
    (ADDED, None),  # two added special tokens after the vocabulary ([QUERY], [DOC])
    (ADDED, 30600),  # a model vocab_size past the tokenizer's: [PAD<id>] up to it
])
def test_gguf_vocabulary_digest_matches_the_tokenizer_json_it_was_converted_from(folder: Path, vocab_size: int | None) -> None:
    """The digest of tokenizer.json (and config.json's vocab_size) equals the GGUF reader's of the converted tokens."""
    tokenizer = folder / "tokenizer.json"
    tokens = converter_tokens(tokenizer, vocab_size)
    facts = gguf_facts(tokens=tokens, merges=[])
    files: dict[str, Any] = {"tokenizer.json": tokenizer.read_bytes()}
    if vocab_size is not None:
        files["config.json"] = {"vocab_size": vocab_size}
    mine = parts_of(snapshot_of(files))["vocabulary"]
    theirs = parts_of(snapshot_of({}, {"model.gguf": facts}))["vocabulary"]
    assert theirs.digest == mine.digest and mine.summary == f"{len(tokens):,} tokens"


def test_byte_fallback_pieces_and_id_gaps_digest_as_the_converter_writes_them() -> None:
    """A BPE vocabulary with byte-fallback pieces (`<0x0A>`) and an id no token has matches its GGUF."""
    doc = {"version": "1.0", "model": {"type": "BPE", "vocab": {"<unk>": 0, "<0x0A>": 1, "▁a": 2, "▁b": 4},
                                       "merges": [], "byte_fallback": True},
           "added_tokens": [{"id": 5, "content": "<|im_end|>", "special": True, "single_word": False, "lstrip": False,
                             "rstrip": False, "normalized": False}]}
    vocab = ["<unk>", "<0x0A>", "▁a", "[PAD3]", "▁b", "<|im_end|>", "[PAD6]", "[PAD7]"]
    facts = gguf_facts(tokens=vocab, merges=[], bos=0, eos=5)
    mine = parts_of(snapshot_of({"tokenizer.json": doc, "config.json": {"vocab_size": 8}}))["vocabulary"]
    assert mine.digest == parts_of(snapshot_of({}, {"m.gguf": facts}))["vocabulary"].digest
    unpadded = parts_of(snapshot_of({"tokenizer.json": doc}))["vocabulary"]
    assert unpadded.digest != mine.digest  # config.json's vocab_size is part of what the GGUF holds


LLAMA_SPECIALS = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                  "added_tokens_decoder": {"128000": {"content": "<|begin_of_text|>"}, "128001": {"content": "<|end_of_text|>"},
                                           "128008": {"content": "<|eom_id|>"}, "128009": {"content": "<|eot_id|>"}}}
TOKENS = [f"t{i}" for i in range(10)] + ["<|begin_of_text|>", "<|end_of_text|>", "<|eom_id|>", "<|eot_id|>", "<pad>"]


def base_parts(eos_ids: list[int]) -> dict[str, PartValue]:
    return parts_of(snapshot_of({"tokenizer_config.json": LLAMA_SPECIALS,
                                 "generation_config.json": {"eos_token_id": eos_ids, "temperature": 0.6}}))


def llama_gguf(eot: int | None = 13, eom: int | None = 12, pad: int | None = None) -> dict[str, Any]:
    from gguf import GGUFValueType

    extra = {f"tokenizer.ggml.{k}_token_id": (v, GGUFValueType.UINT32)
             for k, v in (("eot", eot), ("eom", eom), ("padding", pad)) if v is not None}
    return gguf_facts(tokens=TOKENS, merges=[], bos=10, eos=13, extra=extra)


def test_stop_set_by_text_lets_a_gguf_carry_or_miss_the_bases_stop_fix() -> None:
    """The base adds <|eom_id|> to its stop set; a GGUF with eom carries it, one without is behind."""
    history = [("a" * 40, base_parts([128001, 128009])), ("b" * 40, base_parts([128001, 128008, 128009]))]
    assert history[1][1]["stop_tokens"].summary == "<|end_of_text|>, <|eom_id|>, <|eot_id|>"
    with_eom = parts_of(snapshot_of({}, {"m.gguf": llama_gguf(eom=12)}))
    without = parts_of(snapshot_of({}, {"m.gguf": llama_gguf(eom=None)}))
    assert with_eom["stop_tokens"].summary == "<|eom_id|>, <|eot_id|>"
    # llama.cpp's converter writes eos, eot and eom; the base's <|end_of_text|> needs the base's own set
    fixed = parts_of(snapshot_of({}, {"m.gguf": gguf_facts(tokens=TOKENS, merges=[], bos=10, eos=11, extra={
        "tokenizer.ggml.eot_token_id": (13, _u32()), "tokenizer.ggml.eom_token_id": (12, _u32())})}))
    old = parts_of(snapshot_of({}, {"m.gguf": gguf_facts(tokens=TOKENS, merges=[], bos=10, eos=11, extra={
        "tokenizer.ggml.eot_token_id": (13, _u32())})}))
    assert lineage(history, fixed)["stop_tokens"].status == "carries"
    behind = lineage(history, old)["stop_tokens"]
    assert (behind.status, behind.matched_sha, behind.behind) == ("behind", "a" * 40, 1)
    assert lineage(history, with_eom)["stop_tokens"].status == "diverged"  # no <|end_of_text|>: a set of its own
    assert without["stop_tokens"].summary == "<|eot_id|>"


def _u32() -> Any:
    from gguf import GGUFValueType

    return GGUFValueType.UINT32


def test_special_tokens_compare_by_text_on_the_names_both_sides_give() -> None:
    """bos/eos match by text; the GGUF's eot/eom (which the base does not name) are not held against it; a pad
    the base names differently is diverged."""
    history = [("a" * 40, base_parts([128009]))]
    gguf = parts_of(snapshot_of({}, {"m.gguf": llama_gguf()}))
    assert gguf["special_tokens"].items == {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                                            "eot_token": "<|eot_id|>", "eom_token": "<|eom_id|>"}
    found = lineage(history, gguf)["special_tokens"]
    assert (found.status, found.compared) == ("carries", ("bos_token", "eos_token"))
    padded = dict(LLAMA_SPECIALS, pad_token="<|end_of_text|>")
    history = [("a" * 40, parts_of(snapshot_of({"tokenizer_config.json": padded})))]
    assert lineage(history, parts_of(snapshot_of({}, {"m.gguf": llama_gguf(pad=14)})))["special_tokens"].status == "diverged"
    assert lineage(history, parts_of(snapshot_of({}, {"m.gguf": llama_gguf(pad=11)})))["special_tokens"].status == "carries"


def test_generation_defaults_are_not_in_a_gguf_format() -> None:
    """A GGUF holds no generation defaults: `not_in_format`, not absent or diverged; beside a generation_config.json it is compared."""
    history = [("a" * 40, base_parts([128009]))]
    gguf = parts_of(snapshot_of({}, {"m.gguf": llama_gguf()}))
    assert lineage(history, gguf, lacking_parts(["m.gguf"]))["generation"].status == "not_in_format"
    assert lacking_parts(["m.gguf", "generation_config.json"]) == ()
    assert lineage(history, gguf)["generation"].status == "absent"  # a transformers copy without the file


@pytest.mark.parametrize(("stored", "stale"), [
    ({"chat_template": {"digest": "d", "loose": "l", "summary": ""}}, True),  # written before versions
    ({"chat_template": {"digest": "d", "loose": "l", "summary": "", "version": PARTS_VERSION - 1}}, True),
    ({"chat_template": {"digest": "d", "loose": "l", "summary": "", "version": PARTS_VERSION}}, False),
    ({}, False),
])
def test_parts_stored_by_an_older_version_are_stale(stored: dict[str, Any], stale: bool) -> None:
    """A stored part without this PARTS_VERSION is computed again; PartValue round-trips its version and items."""
    assert parts_stale(stored) is stale
    value = PartValue("d", "d", "s", {"bos_token": "<s>"})
    assert PartValue.from_dict(value.to_dict()) == value and PartValue.from_dict(value.to_dict()).items == value.items



@pytest.mark.groundtruth
@pytest.mark.parametrize("folder", [FIRST, ADDED])
def test_vocabulary_digest_matches_tokens_as_transformers_gives_them_to_the_converter(folder: Path, tmp_path: Path) -> None:
    """convert_hf_to_gguf.py's `get_vocab_base` reads the vocabulary through transformers' AutoTokenizer (with
    the added tokens, `[PAD<id>]` for gaps, BERT's phantom spaces after): the same digest as tokenizer.json's."""
    import shutil

    from transformers import AutoTokenizer

    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "config.json"):
        if (folder / name).exists():
            shutil.copy(folder / name, tmp_path / name)
    tokenizer = AutoTokenizer.from_pretrained(str(tmp_path))
    reverse = {i: t for t, i in tokenizer.vocab.items()}
    size = max(reverse) + 1
    tokens = [reverse.get(i, f"[PAD{i}]") for i in range(size)]
    tokens = [t if t.startswith("[") and t.endswith("]") else t[2:] if t.startswith("##") else "\u2581" + t for t in tokens]
    facts = gguf_facts(tokens=tokens, merges=[])
    files: dict[str, Any] = {"tokenizer.json": (folder / "tokenizer.json").read_bytes(), "config.json": {"vocab_size": size}}
    assert parts_of(snapshot_of(files))["vocabulary"].digest == parts_of(snapshot_of({}, {"m.gguf": facts}))["vocabulary"].digest
