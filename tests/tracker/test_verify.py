"""The verifier on the bundled replay histories' real commits: what each revision's config, weight headers and
tokenizer files say against each other, and the `lint` changes from one revision to the next."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.support.replay_snapshots import replay_snapshots
from tracker.pipeline.verify import (
    lint_changes,
    lint_inputs,
    share_tokenizer_facts,
    should_verify,
    tokenizer_facts,
    undecided,
    verify_snapshot,
)
from tracker.revision.changes import Change, ChangeKind, Severity
from tracker.revision.snapshot import FileEntry, Snapshot

# Reviewed: every finding the real commits raise, and why it is true.
EXPECTED = {
    "laion/CLIP-ViT-B-32-laion2B-s34B-b79K": {},  # the seed's bn-at-output and init advice are false here
    "microsoft/phi-2": {},
    "jinaai/jina-clip-v2": {},
    # The Llama 3.1 upload declared transformers 4.42.3, which refuses rope_scaling of type llama3 ("must be a
    # dictionary with two fields, type and factor"): 4.43.0 brought it, and the model card asks for it.
    "meta-llama/Llama-3.1-8B-Instruct": {c: ["rope-scaling-version"] for c in (
        "0002-upload-folder-using-huggingface-hub", "0003-update-tokenizer-config-json",
        "0004-update-generation-config-json", "0005-update-config-json", "0006-upload-original-checkpoint",
        "0007-move-chat-template-to-chat-template-jinja")},
    # [QUERY] and [DOC] added to the tokenizer without resizing the embeddings (the commit says so).
    "sentence-transformers/all-MiniLM-L6-v2": {"0005-add-query-and-doc-special-tokens": ["vocab-size-tokenizer"]},
}


@pytest.mark.parametrize("repo_id", sorted(EXPECTED))
def test_replay_commits_raise_only_their_true_findings(repo_id):
    """Each commit of the real histories raises exactly the reviewed findings (none of the seed's false alarms)."""
    seen = {}
    for name, snapshot in replay_snapshots(repo_id):
        findings = verify_snapshot(snapshot)
        if findings is None:
            assert "config.json" not in snapshot.files
            continue
        seen[name] = [f.id for f in findings]
    assert seen and {k: v for k, v in seen.items() if v} == EXPECTED[repo_id]


def test_clip_inputs_are_read_from_the_revision():
    """CLIP's revision gives its config, the safetensors header as the manifest, and the tokenizer's 77 tokens."""
    name, snapshot = list(replay_snapshots("laion/CLIP-ViT-B-32-laion2B-s34B-b79K"))[-1]
    inputs = lint_inputs(snapshot)
    assert inputs.config["architectures"] == ["CLIPModel"] and inputs.weights_complete
    assert inputs.manifest["text_projection.weight"] == ("F32", (512, 512))
    assert inputs.tokenizer is not None and inputs.tokenizer.model_max_length == 77


def test_minilm_tokenizer_facts():
    """all-MiniLM-L6-v2's tokenizer.json: 30,522 ids, [PAD] 0 and [MASK] 103, model_max_length 256 after the update."""
    snapshots = dict(replay_snapshots("sentence-transformers/all-MiniLM-L6-v2"))
    facts = tokenizer_facts(snapshots["0004-update-tokenizer-files"])
    assert facts.size == 30522 and facts.model_max_length == 256
    assert facts.special["pad_token"] == ("[PAD]", 0) and facts.special["mask_token"] == ("[MASK]", 103)
    broken = tokenizer_facts(snapshots["0005-add-query-and-doc-special-tokens"])
    assert broken.size == 30524 and broken.largest == ("[DOC]", 30523)


def test_a_finding_that_appears_and_one_resolved_are_changes():
    """Between MiniLM's commits 4 -> 5 the tokenizer finding appears (critical); 5 -> 6 it is resolved (notice)."""
    snapshots = dict(replay_snapshots("sentence-transformers/all-MiniLM-L6-v2"))
    four, five, six = (verify_snapshot(snapshots[k]) for k in (
        "0004-update-tokenizer-files", "0005-add-query-and-doc-special-tokens", "0006-add-exported-onnx-model"))
    up, down = lint_changes(four, five)
    assert down is None and up.kind is ChangeKind.LINT and up.severity is Severity.CRITICAL
    assert up.summary.startswith("verify: +vocab-size-tokenizer (critical): the tokenizer produces ids up to 30,523")
    assert [f["id"] for f in up.detail["appeared"]] == ["vocab-size-tokenizer"]
    json.dumps(up.to_dict())
    up, down = lint_changes(five, six)
    assert up is None and down.severity is Severity.NOTICE and down.detail["findings"] == []
    assert lint_changes(six, six) == (None, None)


def test_an_unreadable_config_is_a_finding():
    """config.json that is not JSON gives config-invalid, not an exception; a repo without one gives None."""
    snapshot = Snapshot("o/n", "a" * 40)
    snapshot.files["config.json"] = FileEntry("config.json", "b" * 40, 5)
    snapshot.contents["config.json"] = b"{oops"
    [finding] = verify_snapshot(snapshot)
    assert finding.id == "config-invalid" and finding.message.startswith("config.json cannot be read: config.json is not valid JSON")
    assert verify_snapshot(Snapshot("o/n", "c" * 40)) is None


def test_a_missing_shard_of_the_index_is_found():
    """phi-2's index maps tensors to two shards; with one gone from the tree, index-missing-shard names it."""
    name, snapshot = list(replay_snapshots("microsoft/phi-2"))[-1]
    del snapshot.files["model-00002-of-00002.safetensors"]
    del snapshot.manifests["model-00002-of-00002.safetensors"]
    findings = verify_snapshot(snapshot)
    assert [f.id for f in findings] == ["index-missing-shard"]
    assert findings[0].evidence["missing"] == ["model-00002-of-00002.safetensors"]


@pytest.mark.parametrize(("kinds", "baseline", "expected"), [
    ([], True, True), ([ChangeKind.CHAT_TEMPLATE], False, False), ([ChangeKind.TOKENIZER], False, True),
    ([ChangeKind.WEIGHTS], False, True), ([ChangeKind.CONFIG], False, True), ([ChangeKind.REPO], False, False),
])
def test_findings_are_recomputed_when_their_inputs_move(kinds, baseline, expected):
    """A first revision, or a config, tokenizer, weights or file change reruns the verifier; a template change not."""
    changes = [Change(kind=k, path="x", summary="s", severity=Severity.INFO) for k in kinds]
    assert should_verify(baseline, changes) is expected


def test_a_finding_on_an_unread_input_is_not_resolved():
    """MiniLM's tokenizer finding is not reported resolved by a revision whose tokenizer.json was not read."""
    snapshots = dict(replay_snapshots("sentence-transformers/all-MiniLM-L6-v2"))
    broken = verify_snapshot(snapshots["0005-add-query-and-doc-special-tokens"])
    unread = snapshots["0006-add-exported-onnx-model"]
    del unread.contents["tokenizer.json"]
    unread.unavailable["tokenizer.json"] = "larger than [poll] max_file_mb"
    assert "vocab-size-tokenizer" in undecided(unread)
    assert lint_changes(broken, verify_snapshot(unread), undecided(unread)) == (None, None)
    fresh = dict(replay_snapshots("sentence-transformers/all-MiniLM-L6-v2"))["0006-add-exported-onnx-model"]
    assert undecided(fresh) == frozenset()


def test_an_unchanged_tokenizer_is_read_once_for_parent_and_revision():
    """MiniLM 6 -> 7 keeps its tokenizer files: the parent takes the revision's facts, tokenizer.json parsed once."""
    snapshots = dict(replay_snapshots("sentence-transformers/all-MiniLM-L6-v2"))
    parent, revision = snapshots["0006-add-exported-onnx-model"], snapshots["0007-delete-pytorch-model-bin"]
    share_tokenizer_facts(parent, revision)
    assert tokenizer_facts(parent) is tokenizer_facts(revision) and tokenizer_facts(parent).size == 30522
    moved = dict(replay_snapshots("sentence-transformers/all-MiniLM-L6-v2"))
    share_tokenizer_facts(moved["0004-update-tokenizer-files"], moved["0005-add-query-and-doc-special-tokens"])
    assert tokenizer_facts(moved["0004-update-tokenizer-files"]).size == 30522  # its own, not the revision's 30,524


def test_a_tokenizer_seen_before_is_not_parsed_again():
    """The same tokenizer files (by blob) read back in a fresh snapshot give the kept facts, not a new parse."""
    first = dict(replay_snapshots("sentence-transformers/all-MiniLM-L6-v2"))["0006-add-exported-onnx-model"]
    again = dict(replay_snapshots("sentence-transformers/all-MiniLM-L6-v2"))["0006-add-exported-onnx-model"]
    assert tokenizer_facts(first) is tokenizer_facts(again)
    assert "tokenizer.json" not in again._json_cache  # never parsed


@pytest.mark.parametrize(("tokenizer_config", "tokenizer_json", "expected"), [
    (b'{"model_max_length": 1' + b"0" * 400 + b"}", None, 1e30),
    (b'{"model_max_length": "512"}', None, None),
    (b'{"added_tokens_decoder": {"7": {"content": "<x>"}, "nan": 1}}', b'{"model": {"vocab": {"a": 0, "b": "x"}}}', 8),
    (b"[]", b'{"model": {"vocab": [["a", 0.0], "junk", ["b", -1.0]]}, "added_tokens": [{"content": 5}]}', 3),
])
def test_odd_tokenizer_files_give_facts_not_errors(tokenizer_config, tokenizer_json, expected):
    """A 400-digit model_max_length, a string one, odd ids and entries: facts (or none), never an exception."""
    snapshot = Snapshot("o/n", "d" * 40)
    for path, data in (("tokenizer_config.json", tokenizer_config), ("tokenizer.json", tokenizer_json)):
        if data is not None:
            snapshot.files[path] = FileEntry(path, hashlib.sha1(data).hexdigest(), len(data))  # a blob id: by content
            snapshot.contents[path] = data
    facts = tokenizer_facts(snapshot)
    value = facts.model_max_length if tokenizer_json is None else facts.size
    assert value == expected

