"""The tokenizer differ on all-MiniLM-L6-v2's real tokenizer files and a Llama-3-shaped BPE tokenizer."""

from __future__ import annotations

import copy
import json

import pytest

from tracker.differs import tokenizer
from tracker.revision.changes import ChangeKind, Severity

MINILM = "all-minilm-l6-v2"
TOK = f"{MINILM}/tokenizer.json"


def add_token(doc):
    doc["added_tokens"].append({"id": 30522, "special": True, "content": "[NEW]", "single_word": False,
                                "lstrip": False, "rstrip": False, "normalized": False})


def rename_mask(doc):
    next(t for t in doc["added_tokens"] if t["content"] == "[MASK]")["content"] = "<mask>"


def unflag_special(doc):
    next(t for t in doc["added_tokens"] if t["content"] == "[UNK]")["special"] = False


def retouch_vocab(doc):
    vocab = doc["model"]["vocab"]
    for token in ("[unused0]", "[unused1]", "[unused2]"):
        del vocab[token]
    vocab["hubwatch"] = 30522
    vocab["##ing"], vocab["##ed"] = vocab["##ed"], vocab["##ing"]


TOKENIZER_JSON_EDITS = [
    # (id, edit, severity, security, summary fragment)
    ("token-added", add_token, Severity.WARNING, True, 'added tokens: 1 added: "[NEW]" (30522)'),
    ("special-token-renamed", rename_mask, Severity.WARNING, True, 'added tokens: 103 "[MASK]" -> "<mask>"'),
    ("special-flag-cleared", unflag_special, Severity.WARNING, True, "added tokens: 100 special true -> false"),
    ("vocab-retouched", retouch_vocab, Severity.WARNING, False, "vocab: 1 added, 3 removed, 2 renumbered"),
    ("normalizer", lambda d: d["normalizer"].update(lowercase=False), Severity.WARNING, False,
     "normalizer.lowercase true -> false"),
    ("post-processor", lambda d: d["post_processor"]["single"].pop(), Severity.WARNING, False,
     "post_processor changed"),
    ("model-type", lambda d: d["model"].update(type="WordLevel"), Severity.WARNING, False,
     'model type "WordPiece" -> "WordLevel"'),
    ("model-parameter", lambda d: d["model"].update(max_input_chars_per_word=200), Severity.WARNING, False,
     "model.max_input_chars_per_word 100 -> 200"),
    ("truncation", lambda d: d["truncation"].update(max_length=256), Severity.NOTICE, False,
     "truncation.max_length 128 -> 256"),
]


@pytest.mark.parametrize(
    "edit, severity, security, fragment",
    [r[1:] for r in TOKENIZER_JSON_EDITS],
    ids=[r[0] for r in TOKENIZER_JSON_EDITS],
)
def test_tokenizer_json_edits(kit, edit, severity, security, fragment):
    """Each edit of the real tokenizer.json is summarised by what it touched, at the right severity."""
    old = kit.build({"tokenizer.json": kit.bytes(TOK)})
    new = kit.build({"tokenizer.json": kit.edited(TOK, edit)})
    [change] = tokenizer.diff(old, new)
    assert change.kind is ChangeKind.TOKENIZER and change.path == "tokenizer.json"
    assert (change.severity, change.security, change.structural) == (severity, security, False)
    assert change.summary.startswith("tokenizer.json: ") and fragment in change.summary
    assert len(json.dumps(change.detail)) < 10_000


def test_vocab_detail_has_counts_and_examples(kit):
    """Vocab changes come back as counts with examples by token and id, not a raw deepdiff."""
    old = kit.build({"tokenizer.json": kit.bytes(TOK)})
    new = kit.build({"tokenizer.json": kit.edited(TOK, retouch_vocab)})
    [change] = tokenizer.diff(old, new)
    vocab = change.detail["vocab"]
    assert (vocab["old_size"], vocab["new_size"]) == (30522, 30520)
    assert vocab["examples"]["added"] == [{"token": "hubwatch", "id": 30522}]
    assert [e["token"] for e in vocab["examples"]["removed"]] == ["[unused0]", "[unused1]", "[unused2]"]
    assert {e["token"] for e in vocab["examples"]["renumbered"]} == {"##ing", "##ed"}


def test_special_token_rename_detail(kit):
    """A renamed special token is one `changed` entry by id, and the special set moves with it."""
    old = kit.build({"tokenizer.json": kit.bytes(TOK)})
    new = kit.build({"tokenizer.json": kit.edited(TOK, rename_mask)})
    [change] = tokenizer.diff(old, new)
    assert change.detail["added_tokens"]["changed"] == [
        {"id": 103, "old": {"content": "[MASK]"}, "new": {"content": "<mask>"}}
    ]
    assert change.detail["special_tokens"]["added"] == ["<mask>"]
    assert change.detail["special_tokens"]["removed"] == ["[MASK]"]


def test_reformatted_tokenizer_json(kit):
    """tokenizer.json rewritten with the same content is info: nothing changed."""
    compact = json.dumps(kit.json(TOK), separators=(",", ":")).encode()
    old = kit.build({"tokenizer.json": kit.bytes(TOK)})
    [change] = tokenizer.diff(old, kit.build({"tokenizer.json": compact}))
    assert change.severity is Severity.INFO and "reformatted" in change.summary


@pytest.mark.parametrize(
    "edit, fragment",
    [
        (lambda m: m.__setitem__(slice(-10, None), [["Ā", "ā"]]), "merges: 1 added, 10 removed"),
        (lambda m: m.reverse(), "merges: reordered"),
        (lambda m: m.append(["ā", "Ă"]), "merges: 1 added"),
    ],
    ids=["merges-recut", "merges-reordered", "merge-appended"],
)
def test_bpe_merges(kit, edit, fragment):
    """Merges added, removed or re-prioritised are counted (never listed whole)."""
    old_doc = kit.bpe(merges=400)
    new_doc = copy.deepcopy(old_doc)
    edit(new_doc["model"]["merges"])
    [change] = tokenizer.diff(kit.build({"tokenizer.json": old_doc}), kit.build({"tokenizer.json": new_doc}))
    assert fragment in change.summary and change.severity is Severity.WARNING
    assert change.detail["merges"]["old_count"] == 400


def test_merges_notation_change_is_not_a_change(kit):
    """Merges rewritten from "a b" strings to ["a", "b"] pairs (tokenizers 0.20) change nothing."""
    old = kit.build({"tokenizer.json": kit.bpe(pairs=False)})
    new = kit.build({"tokenizer.json": kit.bpe(pairs=True)})
    [change] = tokenizer.diff(old, new)
    assert "merges" not in change.detail and change.severity is Severity.INFO


def test_huge_vocabulary_is_summarised(kit):
    """A 128k-entry vocab with a handful of changes yields counts and at most 20 examples each."""
    old_doc = kit.bpe(merges=20)
    vocab = old_doc["model"]["vocab"]
    for i in range(128_000 - len(vocab)):
        vocab[f"tok{i}"] = len(vocab)
    new_doc = copy.deepcopy(old_doc)
    new_vocab = new_doc["model"]["vocab"]
    for i in range(30):
        del new_vocab[f"tok{i}"]
    for i in range(25):
        new_vocab[f"new{i}"] = 200_000 + i
    [change] = tokenizer.diff(kit.build({"tokenizer.json": old_doc}), kit.build({"tokenizer.json": new_doc}))
    assert "vocab: 25 added, 30 removed" in change.summary
    examples = change.detail["vocab"]["examples"]
    assert len(examples["added"]) == 20 and len(examples["removed"]) == 20
    assert len(json.dumps(change.detail)) < 5_000


def test_llama3_style_special_token_renames(kit):
    """Reserved special tokens renamed in place (Llama 3 -> 3.1) are reported by id, old -> new."""
    old_doc = kit.bpe()
    new_doc = copy.deepcopy(old_doc)
    new_doc["added_tokens"][2]["content"] = "<|finetune_right_pad_id|>"
    [change] = tokenizer.diff(kit.build({"tokenizer.json": old_doc}), kit.build({"tokenizer.json": new_doc}))
    token_id = old_doc["added_tokens"][2]["id"]
    assert f'{token_id} "<|reserved_special_token_0|>" -> "<|finetune_right_pad_id|>"' in change.summary
    assert change.security and change.severity is Severity.WARNING


@pytest.mark.parametrize(
    "old_side, new_side, fragment, detail_key",
    [
        ("real", "unavailable", "not compared (new version: too large to download (35 MB))", "not_compared"),
        ("unavailable", "real", "not compared (old version: 404 from the Hub)", "not_compared"),
        ("real", "malformed", "tokenizer.json: not valid JSON", "error"),
    ],
    ids=["new-unavailable", "old-unavailable", "new-malformed"],
)
def test_unreadable_tokenizer_json(kit, old_side, new_side, fragment, detail_key):
    """tokenizer.json that cannot be read is compared by content id (or reported malformed), with why."""
    real = kit.bytes(TOK)
    reasons = {"old": "404 from the Hub", "new": "too large to download (35 MB)"}

    def side(kind, which):
        if kind == "real":
            return kit.build({"tokenizer.json": real})
        if kind == "malformed":
            return kit.build({"tokenizer.json": real[: len(real) // 2]})
        return kit.build(unavailable={"tokenizer.json": (reasons[which], b"other")})

    [change] = tokenizer.diff(side(old_side, "old"), side(new_side, "new"))
    assert fragment in change.summary and detail_key in change.detail
    assert change.severity is Severity.WARNING


SMALL_FILES = [
    # (id, path, old, new, severity, security, summary fragment)
    ("eos-token", "tokenizer_config.json", f"{MINILM}/tokenizer_config.json",
     (f"{MINILM}/tokenizer_config.json", lambda d: d.update(sep_token="</s>")), Severity.WARNING, True,
     'tokenizer_config.json: sep_token "[SEP]" -> "</s>"'),
    ("max-length", "tokenizer_config.json", f"{MINILM}/tokenizer_config.json",
     (f"{MINILM}/tokenizer_config.json", lambda d: d.update(model_max_length=256)), Severity.NOTICE, False,
     "model_max_length 512 -> 256"),
    ("lower-case", "tokenizer_config.json", f"{MINILM}/tokenizer_config.json",
     (f"{MINILM}/tokenizer_config.json", lambda d: d.update(do_lower_case=False)), Severity.WARNING, False,
     "do_lower_case true -> false"),
    ("tokenizer-auto-map", "tokenizer_config.json", f"{MINILM}/tokenizer_config.json",
     (f"{MINILM}/tokenizer_config.json",
      lambda d: d.update(auto_map={"AutoTokenizer": ["other/repo--tokenization_x.XTokenizer", None]})),
     Severity.CRITICAL, True, "auto_map added: code from other/repo"),
    ("decoder-token-renamed", "tokenizer_config.json",
     (f"{MINILM}/tokenizer_config.json", lambda d: d.update(added_tokens_decoder={
         "103": {"content": "[MASK]", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                 "special": True}})),
     (f"{MINILM}/tokenizer_config.json", lambda d: d.update(added_tokens_decoder={
         "103": {"content": "<mask>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                 "special": True}})),
     Severity.WARNING, True, 'added tokens: 103 "[MASK]" -> "<mask>"'),
    ("special-map", "special_tokens_map.json", f"{MINILM}/special_tokens_map.json",
     (f"{MINILM}/special_tokens_map.json", lambda d: d.update(mask_token="<mask>")), Severity.WARNING, True,
     'special_tokens_map.json: mask_token "[MASK]" -> "<mask>"'),
    ("added-tokens-json", "added_tokens.json", b'{"<|im_start|>": 151644}',
     b'{"<|im_start|>": 151644, "<|im_end|>": 151645}', Severity.WARNING, True,
     'added_tokens.json: added tokens: 1 added: "<|im_end|>" (151645)'),
]


@pytest.mark.parametrize(
    "path, old, new, severity, security, fragment", [r[1:] for r in SMALL_FILES], ids=[r[0] for r in SMALL_FILES]
)
def test_small_tokenizer_files(kit, path, old, new, severity, security, fragment):
    """tokenizer_config.json, special_tokens_map.json and added_tokens.json changes, key by key."""

    def content(source):
        return (
            kit.bytes(source)
            if isinstance(source, str)
            else kit.edited(*source)
            if isinstance(source, tuple)
            else source
        )

    [change] = tokenizer.diff(kit.build({path: content(old)}), kit.build({path: content(new)}))
    assert (change.severity, change.security) == (severity, security)
    assert fragment in change.summary


def test_chat_template_change_is_left_to_its_differ(kit):
    """A tokenizer_config.json whose only change is the chat template yields no tokenizer Change."""
    name = f"{MINILM}/tokenizer_config.json"
    old = kit.build({"tokenizer_config.json": kit.edited(name, lambda d: d.update(chat_template="{{ messages }}"))})
    new = kit.build({"tokenizer_config.json": kit.edited(name, lambda d: d.update(chat_template="{{ bos_token }}"))})
    assert tokenizer.diff(old, new) == []


def test_chat_template_is_not_in_the_detail(kit):
    """When other keys change too, the chat template appears neither in the summary nor the detail."""
    name = f"{MINILM}/tokenizer_config.json"
    old = kit.build({"tokenizer_config.json": kit.edited(name, lambda d: d.update(chat_template="A"))})
    new = kit.build(
        {"tokenizer_config.json": kit.edited(name, lambda d: d.update(chat_template="B", pad_token="<pad>"))}
    )
    [change] = tokenizer.diff(old, new)
    assert "chat_template" not in json.dumps(change.to_dict())
    assert 'pad_token "[PAD]" -> "<pad>"' in change.summary


@pytest.mark.parametrize("path", ["vocab.txt", "tokenizer.model", "sentencepiece.bpe.model"])
def test_opaque_tokenizer_files(kit, path):
    """Binary or superseded tokenizer files are compared by content id only."""
    old = kit.build(lfs_files={path: kit.lfs("a", 231508)})
    new = kit.build(lfs_files={path: kit.lfs("b", 231508)})
    [change] = tokenizer.diff(old, new)
    assert change.summary == f"{path} changed (compared by content id only)"
    assert change.severity is Severity.NOTICE
    assert change.detail["old_content_id"] != change.detail["new_content_id"]


def test_tokenizer_json_added_and_removed(kit):
    """A tokenizer.json appearing or disappearing is reported with its size in entries."""
    with_tok, without = kit.build({"tokenizer.json": kit.bytes(TOK)}), kit.build({})
    [added] = tokenizer.diff(without, with_tok)
    [removed] = tokenizer.diff(with_tok, without)
    assert added.summary == "tokenizer.json added (30,522 vocab entries, 5 added tokens)"
    assert removed.severity is Severity.WARNING and added.severity is Severity.NOTICE


def test_first_revision_and_unchanged(kit):
    """No Change for the first revision, nor for identical tokenizer files."""
    snap = kit.build(
        {"tokenizer.json": kit.bytes(TOK), "special_tokens_map.json": kit.bytes(f"{MINILM}/special_tokens_map.json")}
    )
    assert tokenizer.diff(None, snap) == []
    assert tokenizer.diff(snap, snap) == []
