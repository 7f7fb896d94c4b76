"""Tokenizer behaviour on the bundled corpus: real tokenizers run before and after, in a bounded worker."""

from __future__ import annotations

import json

import pytest

from tracker.corpus import load_corpus
from tracker.differs import tokenizer_behaviour as tb
from tracker.differs.tokenizer_behaviour import BehaviourCache, BehaviourLimits, diff_behaviour
from tracker.revision.changes import ChangeKind, Severity

MINILM = "all-minilm-l6-v2/"


def _minilm(kit, edit=None, config_edit=None, sha="0" * 40):
    doc = json.loads(kit.bytes(MINILM + "tokenizer.json"))
    if edit:
        edit(doc)
    config = kit.json(MINILM + "tokenizer_config.json")
    if config_edit:
        config_edit(config)
    return kit.build({"tokenizer.json": json.dumps(doc).encode(), "tokenizer_config.json": config}, sha=sha)


def _cased(doc):
    doc["normalizer"]["lowercase"] = False


def test_a_normalizer_change_reports_the_samples_whose_ids_changed(kit):
    """Lowercasing switched off: cased samples get new ids (warning), with counts, examples and token totals."""
    cache = BehaviourCache()
    [change] = diff_behaviour(_minilm(kit), _minilm(kit, _cased), cache)
    detail = change.detail["tokenizer_behaviour"]
    assert change.kind is ChangeKind.TOKENIZER and change.severity is Severity.WARNING
    changed = detail["ids_changed"]
    assert 0 < changed["count"] < detail["corpus"]["samples"] == 1000
    assert changed["by_category"]["prose"] > 0
    assert sum(changed["by_category"].values()) == changed["count"]
    example = detail["examples"][0]
    assert example["old_ids"] != example["new_ids"] and example["text"]
    assert detail["tokens"]["old"] == sum(c["old"] for c in detail["tokens"]["by_category"].values())
    assert detail["special_ids"]["unk"] == {"token": "[UNK]", "id": 100}
    assert f"{changed['count']:,} of 1,000 corpus samples get different ids" in change.summary
    assert cache.runs == 2


def test_round_trip_failures_that_appear_are_listed(kit):
    """An NFKC normalizer added to a byte-level BPE: ligatures and fullwidth text no longer decode to themselves."""
    plain = _trained_bpe(600)
    nfkc = {**plain, "normalizer": {"type": "NFKC"}}
    [change] = diff_behaviour(kit.build({"tokenizer.json": plain}), kit.build({"tokenizer.json": nfkc}), BehaviourCache())
    detail = change.detail["tokenizer_behaviour"]
    rt = detail["roundtrip_failures"]
    assert rt["old"] == 0 and not rt["vanished"]
    ligature = next(x["id"] for x in load_corpus()["samples"] if x.get("text") == "ﬁ ligature")
    assert ligature in rt["appeared"]
    assert all(i in detail["ids_changed"]["samples"] for i in rt["appeared"])
    assert f"round-trip failures {len(rt['appeared'])} appeared, 0 vanished" in change.summary
    assert detail["added_ids"] is None


def test_a_changed_special_token_id_is_critical(kit):
    """The unk token renamed to another token (id 100 -> 103) is critical even though no sample's ids changed."""
    renamed = _minilm(kit, config_edit=lambda c: c.update(unk_token="[MASK]"))
    [change] = diff_behaviour(_minilm(kit), renamed, BehaviourCache())
    detail = change.detail["tokenizer_behaviour"]
    assert change.severity is Severity.CRITICAL
    assert detail["special_ids_changed"]["unk"] == {"old": {"token": "[UNK]", "id": 100}, "new": {"token": "[MASK]", "id": 103}}
    assert "unk [UNK] (100) -> [MASK] (103)" in change.summary


def test_same_tokenizer_blobs_are_not_run(kit):
    """Revisions whose tokenizer blobs did not change cost no tokenizer run at all."""
    cache = BehaviourCache()
    old = _minilm(kit, sha="a" * 40)
    new = _minilm(kit, sha="b" * 40)
    new.files["README.md"] = old.files.get("README.md") or new.files["tokenizer.json"].__class__("README.md", "f" * 40, 3)
    assert diff_behaviour(old, new, cache) == []
    assert cache.runs == 0


def test_a_tokenizer_seen_before_is_taken_from_the_cache(kit):
    """The middle revision of three is tokenized once: the second comparison runs only the newest tokenizer."""
    cache = BehaviourCache()
    first, second = _minilm(kit), _minilm(kit, _cased)
    third = _minilm(kit, lambda d: d["normalizer"].update(lowercase=False, strip_accents=True))
    diff_behaviour(first, second, cache)
    diff_behaviour(second, third, cache)
    assert cache.runs == 3


def test_identical_behaviour_is_no_change(kit):
    """A tokenizer.json reformatted (other bytes, same tokenizer) tokenizes the same: no change."""
    reformatted = kit.build({"tokenizer.json": json.dumps(json.loads(kit.bytes(MINILM + "tokenizer.json")), indent=1).encode(),
                             "tokenizer_config.json": kit.json(MINILM + "tokenizer_config.json")})
    assert diff_behaviour(_minilm(kit), reformatted, BehaviourCache()) == []


def test_a_malformed_tokenizer_is_a_note(kit):
    """A tokenizer.json that tokenizers cannot load becomes an info note naming the side and the reason."""
    broken = kit.build({"tokenizer.json": b'{"model": {"type": "BPE", "vocab": 7}}',
                        "tokenizer_config.json": kit.json(MINILM + "tokenizer_config.json")})
    [change] = diff_behaviour(_minilm(kit), broken, BehaviourCache())
    assert change.severity is Severity.INFO
    assert change.detail["tokenizer_behaviour"]["compared"] is False
    assert "the new tokenizer could not be loaded" in change.summary


def test_a_tokenizer_not_downloaded_is_a_note(kit):
    """A tokenizer.json too large to download is noted with the snapshot's reason; nothing is run."""
    cache = BehaviourCache()
    big = kit.build(unavailable={"tokenizer.json": ("larger than max_file_mb (64 MB)", b"x" * 10)})
    [change] = diff_behaviour(_minilm(kit), big, cache)
    assert "larger than max_file_mb" in change.summary and change.severity is Severity.INFO
    assert cache.runs == 1  # the old side only


@pytest.mark.slow
def test_a_tokenizer_too_big_for_the_worker_limits_is_a_note(kit):
    """A 13 MB tokenizer.json (500,000 more tokens) under a 150 MB address-space limit ends as a note, not a crash
    or a hang, while the real one loads under the same limit: the size is what the limit stopped. (Once a 50 MB
    file under 300 MB: the same failure, at ~8 CPU-s spent building and hashing the file.)"""
    limits = BehaviourLimits(time_s=30, memory_bytes=150 * 2**20)
    assert "error" not in tb.run_tokenizer("tokenizer.json", kit.bytes(MINILM + "tokenizer.json"), {}, limits)
    doc = json.loads(kit.bytes(MINILM + "tokenizer.json"))
    vocab = doc["model"]["vocab"]
    for i in range(500_000):
        vocab[f"##filler{i:07d}"] = len(vocab)
    data = json.dumps(doc).encode()
    assert len(data) > 12 * 2**20
    huge = kit.build({"tokenizer.json": data, "tokenizer_config.json": kit.json(MINILM + "tokenizer_config.json")})
    [change] = diff_behaviour(_minilm(kit), huge, BehaviourCache(), limits)
    assert change.severity is Severity.INFO
    assert "could not be loaded" in change.summary


def test_a_wall_clock_limit_stops_the_worker(kit):
    """A worker past its deadline is killed and reported with the limit."""
    answer = tb.run_tokenizer("tokenizer.json", kit.bytes(MINILM + "tokenizer.json"), {}, BehaviourLimits(time_s=0.01))
    assert answer == {"error": "exceeded the time limit (0.01 s)"}


def _trained_bpe(vocab_size: int) -> dict:
    """A byte-level BPE trained on the corpus's own texts with tokenizers' trainer (a real tokenizer.json)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([s["text"] for s in load_corpus()["samples"] if "text" in s], trainer)
    return json.loads(tok.to_str())


def _spm_model(tmp_path, vocab_size: int) -> bytes:
    import sentencepiece

    text = tmp_path / "train.txt"
    text.write_text("\n".join(s["text"] for s in load_corpus()["samples"] if "text" in s and s["text"].strip()), encoding="utf-8")
    prefix = tmp_path / f"spm{vocab_size}"
    sentencepiece.SentencePieceTrainer.train(input=str(text), model_prefix=str(prefix), vocab_size=vocab_size,
                                             model_type="unigram", minloglevel=2, num_threads=1)
    return prefix.with_suffix(".model").read_bytes()


def test_a_sentencepiece_model_is_compared_when_there_is_no_tokenizer_json(kit, tmp_path):
    """A repo with tokenizer.model only is tokenized with sentencepiece; a retrained model changes ids."""
    small, large = _spm_model(tmp_path, 700), _spm_model(tmp_path, 1100)
    [change] = diff_behaviour(kit.build({"tokenizer.model": small}), kit.build({"tokenizer.model": large}), BehaviourCache())
    detail = change.detail["tokenizer_behaviour"]
    assert detail["backend"]["new"] == "sentencepiece"
    assert detail["tokens"]["new"] < detail["tokens"]["old"]
    assert detail["special_ids"]["unk"]["id"] == 0
    assert change.severity is Severity.WARNING


def test_chat_samples_are_written_in_the_tokenizers_own_markers(kit):
    """A tokenizer that knows Llama 3's header tokens gets chat samples in that format, its specials as single ids."""
    doc = json.loads(kit.bytes(MINILM + "tokenizer.json"))
    start = len(doc["model"]["vocab"])  # the first id after the vocab
    names = ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    doc["added_tokens"] += [{"id": start + i, "content": n, "single_word": False, "lstrip": False, "rstrip": False,
                             "normalized": False, "special": True} for i, n in enumerate(names)]
    answer = tb.run_tokenizer("tokenizer.json", json.dumps(doc).encode(), {})
    assert answer["chat_format"] == "llama3"
    sample = answer["samples"]["chat-0000"]
    assert sample["text"].startswith("<|start_header_id|>user<|end_header_id|>\n\nHi! Can you help me?<|eot_id|>")
    assert sample["ids"][0] == start and start + 2 in sample["ids"]
