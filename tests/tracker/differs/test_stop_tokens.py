"""The stop-token set per revision, its changes, and real chat templates' end of turn against it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracker.differs import stop_tokens as st
from tracker.revision.changes import ChangeKind, Severity
from tracker.revision.snapshot import FileEntry

TEMPLATES = Path(__file__).resolve().parents[2] / "fixtures" / "chat_templates"
LLAMA_SPECIALS = {"128000": "<|begin_of_text|>", "128001": "<|end_of_text|>", "128008": "<|eom_id|>", "128009": "<|eot_id|>"}


def _llama(kit, eos_ids, eos_token="<|eot_id|>", config_eos=128009, sha="0" * 40):
    template = "meta-llama-Llama-3.3-70B-Instruct/chat_template.jinja"
    config = {"bos_token": "<|begin_of_text|>", "eos_token": eos_token, "chat_template": (TEMPLATES / template).read_text(),
              "added_tokens_decoder": {i: {"content": t, "special": True} for i, t in LLAMA_SPECIALS.items()}}
    return kit.build({"tokenizer_config.json": config, "generation_config.json": {"eos_token_id": eos_ids},
                      "config.json": {"eos_token_id": config_eos}}, sha=sha)


@pytest.mark.parametrize(
    ("generation", "config", "expected"),
    [
        ([128001, 128008, 128009], 128009, [(128001, ["generation_config.json"]), (128008, ["generation_config.json"]),
                                            (128009, ["generation_config.json", "config.json", "tokenizer"])]),
        (128001, 128009, [(128001, ["generation_config.json"]), (128009, ["config.json", "tokenizer"])]),
        (None, [128001, 128009], [(128001, ["config.json"]), (128009, ["config.json", "tokenizer"])]),
        ("128001", True, [(128009, ["tokenizer"])]),  # neither an int nor a list of ints: ignored
    ],
)
def test_the_stop_set_is_the_union_by_id(kit, generation, config, expected):
    """generation_config's eos ids (int or list), config.json's and the tokenizer's eos token, merged by id."""
    snap = kit.build({"generation_config.json": {"eos_token_id": generation}, "config.json": {"eos_token_id": config},
                      "tokenizer_config.json": {"eos_token": "<|eot_id|>", "added_tokens_decoder": {
                          i: {"content": t} for i, t in LLAMA_SPECIALS.items()}}})
    tokens = st.stop_set(snap)
    assert [(t.id, list(t.sources)) for t in tokens] == expected
    assert all(t.text == LLAMA_SPECIALS[str(t.id)] for t in tokens)


def test_a_token_known_by_text_only_is_kept_by_text(kit):
    """Without tokenizer.json or added_tokens_decoder, the tokenizer's eos is in the set by its text."""
    snap = kit.build({"tokenizer_config.json": {"eos_token": {"content": "</s>"}}})
    assert [t.to_dict() for t in st.stop_set(snap)] == [{"id": None, "text": "</s>", "sources": ["tokenizer"]}]


def test_dropping_eot_id_is_critical(kit):
    """The stop set losing <|eot_id|> (128009) is critical and names the token by id and text."""
    changes = st.diff(_llama(kit, [128001, 128009]), _llama(kit, [128001], eos_token="<|end_of_text|>", config_eos=128001))
    by_kind = [c for c in changes if "stop_tokens" in c.detail and isinstance(c.detail["stop_tokens"], dict)]
    [change] = by_kind
    assert change.kind is ChangeKind.STOP_TOKENS and change.severity is Severity.CRITICAL
    assert change.path == "generation_config.json"
    assert change.summary.startswith("stop tokens: dropped 128009 <|eot_id|>")
    assert [t["id"] for t in change.detail["stop_tokens"]["dropped"]] == [128009]


def test_adding_a_stop_token_is_a_notice(kit):
    """Llama 3.1's real generation_config update (128008 <|eom_id|> added) is a notice."""
    [change] = st.diff(_llama(kit, [128001, 128009]), _llama(kit, [128001, 128008, 128009]))
    assert change.severity is Severity.NOTICE
    assert "added 128008 <|eom_id|>" in change.summary


def test_unchanged_inputs_cost_nothing(kit):
    """A revision that touched none of the stop set's files nor the template: no change, nothing rendered."""
    old = _llama(kit, [128001, 128009])
    new = _llama(kit, [128001, 128009], sha="1" * 40)
    assert st.diff(old, new) == []


@pytest.mark.parametrize(
    ("template", "specials", "bos", "end_id", "other_id"),
    [
        ("meta-llama-Llama-3.3-70B-Instruct/chat_template.jinja", LLAMA_SPECIALS, "<|begin_of_text|>", 128009, 128001),
        ("Qwen-Qwen2-7B-Instruct/chat_template.jinja", {"151643": "<|endoftext|>", "151644": "<|im_start|>", "151645": "<|im_end|>"},
         "", 151645, 151643),
        ("google-gemma-2-2b-it/chat_template.jinja", {"1": "<eos>", "2": "<bos>", "106": "<start_of_turn>", "107": "<end_of_turn>"},
         "<bos>", 107, 1),
        ("mistralai-Mistral-Nemo-Instruct-2407/chat_template.jinja", {"1": "<s>", "2": "</s>", "3": "[INST]", "4": "[/INST]"},
         "<s>", 2, 4),
    ],
)
def test_real_templates_end_of_turn_is_read_exactly(kit, template, specials, bos, end_id, other_id):
    """Llama 3.1's <|eot_id|>, ChatML's <|im_end|>, Gemma's <end_of_turn> and Mistral's </s> are found after the
    assistant's content; with that id in the stop set there is no finding, without it a warning naming it."""
    end_token, other = specials[str(end_id)], specials[str(other_id)]

    def snap(eos_token, eos_ids, sha):
        config = {"bos_token": bos, "eos_token": eos_token, "chat_template": (TEMPLATES / template).read_text(),
                  "added_tokens_decoder": {i: {"content": t} for i, t in specials.items()}}
        return kit.build({"tokenizer_config.json": config, "generation_config.json": {"eos_token_id": eos_ids}}, sha=sha)

    good = snap(end_token, [end_id, other_id], "1" * 40)
    finding = st.end_of_turn(good, st.stop_set(good), st.TokenNames(good))
    assert finding == {"token": end_token, "id": end_id, "template": finding["template"], "in_stop_set": True}
    bad = snap(other, [other_id], "2" * 40)  # generation stops on another token only
    changes = st.diff(good, bad)
    if "eos_token" in (TEMPLATES / template).read_text() and end_id == 2:
        # Mistral's template writes the tokenizer's eos, which is always in the union: it cannot mismatch
        assert not [c for c in changes if "end_of_turn" in c.detail]
        return
    [warning] = [c for c in changes if "end_of_turn" in c.detail]
    assert warning.severity is Severity.WARNING and warning.kind is ChangeKind.STOP_TOKENS
    assert f"ends an assistant turn with {end_token} ({end_id}), which is not a stop token" in warning.summary
    assert not [c for c in st.diff(bad, good) if "end_of_turn" in c.detail]  # fixed again: no finding


def _mismatched(kit, config: dict, sha: str):
    """Llama 3.3's template (ends a turn on <|eot_id|>) with generation stopping on <|end_of_text|> only, a
    tokenizer.json beside it, and `config` as config.json."""
    template = "meta-llama-Llama-3.3-70B-Instruct/chat_template.jinja"
    tokenizer_config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
                        "chat_template": (TEMPLATES / template).read_text(),
                        "added_tokens_decoder": {i: {"content": t, "special": True} for i, t in LLAMA_SPECIALS.items()}}
    tokenizer = {"added_tokens": [{"id": int(i), "content": t} for i, t in LLAMA_SPECIALS.items()],
                 "model": {"vocab": {"hello": 1}}}
    return kit.build({"tokenizer_config.json": tokenizer_config, "tokenizer.json": tokenizer,
                      "generation_config.json": {"eos_token_id": 128001}, "config.json": config}, sha=sha)


def test_a_config_move_of_another_key_keeps_the_parents_verdict(kit):
    """config.json moving a key other than eos_token_id leaves the stop set and the end-of-turn verdict as the
    parent's: no change, tokenizer.json not parsed (the probe is not rendered either)."""
    old = _mismatched(kit, {"eos_token_id": 128001, "torch_dtype": "bfloat16"}, "1" * 40)
    new = _mismatched(kit, {"eos_token_id": 128001, "torch_dtype": "float16"}, "2" * 40)
    assert old.files["config.json"].oid != new.files["config.json"].oid
    assert st.stop_inputs(old) == st.stop_inputs(new)
    assert st.diff(old, new) == []
    assert "tokenizer.json" not in new._json_cache and "tokenizer.json" not in old._json_cache


@pytest.mark.parametrize(
    "config",
    [{"eos_token_id": [128001, 128008]}, {"text_config": {"eos_token_id": 128008}}],
    ids=["eos_token_id", "text_config"],
)
def test_a_config_move_of_the_eos_key_is_still_diffed(kit, config):
    """config.json moving eos_token_id (or its text_config's) changes the inputs: the token added is a notice and
    the mismatched end of turn is still told."""
    old = _mismatched(kit, {"eos_token_id": 128001, "torch_dtype": "bfloat16"}, "1" * 40)
    new = _mismatched(kit, {"torch_dtype": "bfloat16", **config}, "2" * 40)
    assert st.stop_inputs(old) != st.stop_inputs(new)
    changes = st.diff(old, new)
    [added] = [c for c in changes if isinstance(c.detail.get("stop_tokens"), dict)]
    assert added.severity is Severity.NOTICE and "added 128008 <|eom_id|>" in added.summary
    assert added.detail["stop_tokens"]["files"] == ["config.json"]
    [warning] = [c for c in changes if "end_of_turn" in c.detail]
    assert warning.severity is Severity.WARNING and "<|eot_id|> (128009)" in warning.summary


def test_a_tokenizer_json_move_alone_is_diffed(kit):
    """tokenizer.json's bytes are an input whatever key moved: a new blob is looked at again."""
    old = _mismatched(kit, {"eos_token_id": 128001}, "1" * 40)
    new = _mismatched(kit, {"eos_token_id": 128001}, "2" * 40)
    doc = {"added_tokens": [], "model": {"vocab": {"<|eot_id|>": 128009}}}
    new.contents["tokenizer.json"] = json.dumps(doc).encode()
    new.files["tokenizer.json"] = FileEntry("tokenizer.json", "f" * 40, len(new.contents["tokenizer.json"]))
    assert st.stop_inputs(old) != st.stop_inputs(new)
    [warning] = [c for c in st.diff(old, new) if "end_of_turn" in c.detail]
    assert warning.severity is Severity.WARNING


def test_an_unread_deciding_file_is_not_compared_rather_than_dropped(kit):
    """generation_config.json changed but its bytes were not read (a gated repo refused them): no "dropped" verdict
    from a file that only looks empty, one "not compared" change naming it and why."""
    old = _llama(kit, [128001, 128009])
    new = _llama(kit, [128001, 128009], sha="1" * 40)
    new.files["generation_config.json"] = FileEntry("generation_config.json", "f" * 40, 30)
    del new.contents["generation_config.json"]
    new.unavailable["generation_config.json"] = "gated (manual): not read, the Hub refuses its files to this token"
    [change] = st.diff(old, new)
    assert change.severity is Severity.INFO and change.detail["stop_tokens"]["compared"] is False
    assert change.summary.startswith("stop tokens not compared: new generation_config.json not read (gated (manual)")
