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
    assert finding == {"token": end_token, "id": end_id, "template": finding["template"], "in_stop_set": True,
                       "stopped_by": list(st.RUNTIMES), "not_stopped_by": [], "undecided": []}
    bad = snap(other, [other_id], "2" * 40)  # generation stops on another token only
    changes = st.diff(good, bad)
    if "eos_token" in (TEMPLATES / template).read_text() and end_id == 2:
        # Mistral's template writes the tokenizer's eos, which every runtime's set holds here: it cannot mismatch
        assert not [c for c in changes if "end_of_turn" in c.detail]
        return
    [warning] = [c for c in changes if "end_of_turn" in c.detail]
    assert warning.severity is Severity.WARNING and warning.kind is ChangeKind.STOP_TOKENS
    assert f"ends an assistant turn with {end_token} ({end_id}), which is not a stop token" in warning.summary
    # llama.cpp stops on <|eot_id|>, <|im_end|> and <end_of_turn> by their text wherever the vocabulary has them
    assert warning.detail["end_of_turn"]["not_stopped_by"] == ["transformers", "vllm", "tgi"]
    assert "not stopped on by transformers, vllm, tgi" in warning.summary
    assert not [c for c in st.diff(bad, good) if "end_of_turn" in c.detail]  # fixed again: no finding


# Llama 3's tokenizer.json as the `tokenizers` library numbers it: a 128,000-token vocabulary, then the special
# tokens added in id order (the library numbers added tokens by their order, not by the ids written beside them).
LLAMA_VOCAB = {f"t{i}": i for i in range(128000)}
LLAMA_ADDED = [{"id": i, "content": LLAMA_SPECIALS.get(str(i), f"<|reserved_special_token_{i - 128000}|>"),
                "special": True} for i in range(128000, 128010)]


def _mismatched(kit, config: dict, sha: str):
    """Llama 3.3's template (ends a turn on <|eot_id|>) with generation stopping on <|end_of_text|> only, a
    tokenizer.json beside it, and `config` as config.json."""
    template = "meta-llama-Llama-3.3-70B-Instruct/chat_template.jinja"
    tokenizer_config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
                        "chat_template": (TEMPLATES / template).read_text(),
                        "added_tokens_decoder": {i: {"content": t, "special": True} for i, t in LLAMA_SPECIALS.items()}}
    tokenizer = {"added_tokens": LLAMA_ADDED, "model": {"vocab": LLAMA_VOCAB}}
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


QWEN25_SPECIALS = {"151643": "<|endoftext|>", "151644": "<|im_start|>", "151645": "<|im_end|>",
                   "151659": "<|fim_prefix|>", "151660": "<|fim_middle|>", "151661": "<|fim_suffix|>",
                   "151662": "<|fim_pad|>", "151663": "<|repo_name|>", "151664": "<|file_sep|>"}
GPT_OSS_SPECIALS = {"199998": "<|startoftext|>", "199999": "<|endoftext|>", "200002": "<|return|>",
                    "200005": "<|channel|>", "200006": "<|start|>", "200007": "<|end|>", "200008": "<|message|>",
                    "200012": "<|call|>"}


def _model(kit, specials, eos_token, generation=None, config_eos=None, sha="0" * 40):
    files = {"tokenizer_config.json": {"eos_token": eos_token, "added_tokens_decoder": {
        i: {"content": t, "special": True} for i, t in specials.items()}}}
    if generation is not None:
        files["generation_config.json"] = generation
    if config_eos is not None:
        files["config.json"] = {"eos_token_id": config_eos}
    return kit.build(files, sha=sha)


@pytest.mark.parametrize(
    ("specials", "eos_token", "generation", "config_eos", "expected"),
    [
        # Qwen2.5-Instruct as published: every runtime stops on <|im_end|> and <|endoftext|>; llama.cpp also on the
        # fill-in-the-middle pad, repo-name and file-separator tokens it finds by text.
        (QWEN25_SPECIALS, "<|im_end|>", {"eos_token_id": [151645, 151643]}, 151645,
         {"transformers": [151643, 151645], "vllm": [151643, 151645], "tgi": [151643, 151645],
          "llama.cpp": [151643, 151645, 151662, 151663, 151664]}),
        # generation_config names one id, not a list: text-generation-inference keeps the tokenizer's eos alone,
        # transformers generation_config's alone, vLLM both.
        (LLAMA_SPECIALS, "<|eot_id|>", {"eos_token_id": 128001}, 128009,
         {"transformers": [128001], "vllm": [128001, 128009], "tgi": [128009],
          "llama.cpp": [128001, 128008, 128009]}),
        # No generation_config.json: transformers and vLLM take config.json's ids.
        (LLAMA_SPECIALS, "<|eot_id|>", None, [128001, 128009],
         {"transformers": [128001, 128009], "vllm": [128001, 128009], "tgi": [128009],
          "llama.cpp": [128001, 128008, 128009]}),
        # A generation_config.json that names no eos: transformers' generate stops on nothing at all.
        (LLAMA_SPECIALS, "<|eot_id|>", {"temperature": 0.6}, 128009,
         {"transformers": [], "vllm": [128009], "tgi": [128009], "llama.cpp": [128001, 128008, 128009]}),
        # gpt-oss (harmony): llama.cpp does not end on <|end|> where <|return|> and <|call|> exist.
        (GPT_OSS_SPECIALS, "<|return|>", {"eos_token_id": [200002, 199999, 200012]}, 200002,
         {"transformers": [199999, 200002, 200012], "vllm": [199999, 200002, 200012],
          "tgi": [199999, 200002, 200012], "llama.cpp": [199999, 200002, 200012]}),
    ],
    ids=["qwen2.5", "generation-int", "no-generation-config", "generation-without-eos", "gpt-oss"],
)
def test_each_runtime_stops_on_its_own_set(kit, specials, eos_token, generation, config_eos, expected):
    """transformers, vLLM, text-generation-inference and llama.cpp each read the stop set their own way."""
    snap = _model(kit, specials, eos_token, generation, config_eos)
    assert st.by_runtime(st.stop_sets(snap)) == expected


def test_a_move_only_one_runtime_sees_is_its_own_critical_change(kit):
    """generation_config's eos written as a list instead of an int: the union is the same, but
    text-generation-inference now stops on the list alone and no longer on the tokenizer's eos (<|eot_id|>)."""
    old = _model(kit, LLAMA_SPECIALS, "<|eot_id|>", {"eos_token_id": 128001}, 128009, sha="1" * 40)
    new = _model(kit, LLAMA_SPECIALS, "<|eot_id|>", {"eos_token_id": [128001]}, 128009, sha="2" * 40)
    assert [t.id for t in st.stop_set(old)] == [t.id for t in st.stop_set(new)]
    [change] = [c for c in st.diff(old, new) if isinstance(c.detail.get("stop_tokens"), dict)]
    assert change.severity is Severity.CRITICAL
    assert change.summary == "stop tokens for tgi: dropped 128009 <|eot_id|>; added 128001 <|end_of_text|>"
    detail = change.detail["stop_tokens"]
    assert detail["dropped"] == [] and detail["added"] == []
    assert [t["id"] for t in detail["runtime_changes"]["tgi"]["dropped"]] == [128009]
    assert detail["by_runtime_before"]["tgi"] == [128009] and detail["by_runtime"]["tgi"] == [128001]


def test_the_end_of_turn_warning_names_the_runtimes_affected(kit):
    """Qwen's template ends a turn with <|im_end|>; a generation_config listing only <|endoftext|> leaves it in the
    union (the tokenizer's eos) but transformers and text-generation-inference no longer stop on it."""
    template = (TEMPLATES / "Qwen-Qwen2-7B-Instruct/chat_template.jinja").read_text()

    def snap(eos_ids, sha):
        built = _model(kit, QWEN25_SPECIALS, "<|im_end|>", {"eos_token_id": eos_ids}, 151645, sha=sha)
        config = json.loads(built.contents["tokenizer_config.json"])
        return kit.build({"tokenizer_config.json": {**config, "chat_template": template},
                          "generation_config.json": {"eos_token_id": eos_ids}, "config.json": {"eos_token_id": 151645}},
                         sha=sha)

    changes = st.diff(snap([151645, 151643], "1" * 40), snap([151643], "2" * 40))
    [warning] = [c for c in changes if "end_of_turn" in c.detail]
    assert warning.severity is Severity.WARNING
    finding = warning.detail["end_of_turn"]
    assert finding["in_stop_set"] is True
    assert finding["stopped_by"] == ["vllm", "llama.cpp"] and finding["not_stopped_by"] == ["transformers", "tgi"]
    assert warning.summary == ("chat template ends an assistant turn with <|im_end|> (151645), which transformers, "
                               "tgi do not stop on (transformers stops on 151643 <|endoftext|>; tgi stops on "
                               "151643 <|endoftext|>)")


def test_added_token_ids_agree_with_the_tokenizers_library():
    """tokenizer.json's added tokens numbered as `tokenizers` numbers them when it loads the file, on random
    vocabularies (gaps included) and added-token lists (out of id order, repeated, already in the vocabulary)."""
    import random

    from tokenizers import Tokenizer

    rng = random.Random(7)
    for _ in range(200):
        vocab = {f"v{i}": i for i in range(rng.randint(1, 8))}
        if rng.random() < 0.3:
            vocab["gap"] = len(vocab) + rng.randint(0, 5)
        added = [{"id": rng.randint(0, 50), "content": rng.choice([f"<t{rng.randint(0, 5)}>", *list(vocab)[:2]]),
                  "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
                 for _ in range(rng.randint(0, 6))]
        doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
               "pre_tokenizer": None, "post_processor": None, "decoder": None,
               "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "v0"}}
        library = Tokenizer.from_str(json.dumps(doc))
        ours = st.added_token_ids(added, vocab)
        assert ours == {text: library.token_to_id(text) for text in ours}, (vocab, added)


def test_a_tokenizer_json_listing_added_tokens_out_of_order_is_read_as_the_library_reads_it(kit):
    """Added tokens listed as 128009, 128001 after a 128,000-token vocabulary: the library gives <|eot_id|> 128000
    and <|end_of_text|> 128001, whatever the file writes beside them; the stop set's ids are the library's."""
    from tokenizers import Tokenizer

    added = [{"id": 128009, "content": "<|eot_id|>", "special": True},
             {"id": 128001, "content": "<|end_of_text|>", "special": True}]
    doc = {"added_tokens": added, "model": {"type": "WordLevel", "vocab": LLAMA_VOCAB, "unk_token": "t0"}}
    snap = kit.build({"tokenizer.json": doc, "tokenizer_config.json": {"eos_token": "<|eot_id|>"},
                      "generation_config.json": {"eos_token_id": [128000, 128001]}})
    full = {"version": "1.0", "truncation": None, "padding": None, "normalizer": None, "pre_tokenizer": None,
            "post_processor": None, "decoder": None,
            "added_tokens": [{**a, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False}
                             for a in added], "model": doc["model"]}
    library = Tokenizer.from_str(json.dumps(full))
    assert library.token_to_id("<|eot_id|>") == 128000 and library.token_to_id("<|end_of_text|>") == 128001
    tokens = st.stop_set(snap)
    assert [(t.id, t.text) for t in tokens] == [(128000, "<|eot_id|>"), (128001, "<|end_of_text|>")]
    assert st.by_runtime(st.stop_sets(snap))["tgi"] == [128000, 128001]


def test_llama_cpp_reads_a_gguf_header_where_the_revision_has_no_tokenizer_files(kit):
    """A GGUF-only repo: llama.cpp's set is its header's eos, eot and eom ids (bos and padding are not stops); the
    transformers-side runtimes have nothing to read."""
    from tracker.formats import FileScan

    snap = kit.build({"README.md": "a GGUF repo"})
    specials = {"bos": {"id": 1, "token": "<s>"}, "eos": {"id": 2, "token": "</s>"},
                "eot": {"id": 32007, "token": "<|end|>"}, "padding": {"id": 32000, "token": "<unk>"}}
    snap.scans["model-Q4_K_M.gguf"] = FileScan("gguf", {"tokenizer": {"special_tokens": specials}})
    assert st.by_runtime(st.stop_sets(snap)) == {"transformers": [], "vllm": [], "tgi": [], "llama.cpp": [2, 32007]}


def test_a_runtime_set_of_unnamed_ids_leaves_the_end_of_turn_undecided(kit):
    """Without tokenizer.json or added_tokens_decoder, <|im_end|> has no id and generation_config's ids no text:
    whether transformers and text-generation-inference (which read that list alone) stop on it cannot be told, and
    no runtime is said not to stop on it."""
    template = (TEMPLATES / "Qwen-Qwen2-7B-Instruct/chat_template.jinja").read_text()
    snap = kit.build({"tokenizer_config.json": {"eos_token": "<|im_end|>", "chat_template": template},
                      "generation_config.json": {"eos_token_id": [151645, 151643]}})
    finding = st.end_of_turn(snap, st.stop_set(snap), st.TokenNames(snap))
    assert finding["id"] is None and finding["in_stop_set"] is True
    assert finding["not_stopped_by"] == []
    assert finding["undecided"] == ["transformers", "tgi"] and finding["stopped_by"] == ["vllm", "llama.cpp"]


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


def test_a_tokenizer_json_read_on_one_side_only_is_not_compared(kit):
    """tokenizer.json refused on the new side (a gated repo): llama.cpp's set, read from its vocabulary, is not
    reported changed; the stop tokens are "not compared"."""
    vocab = {"model": {"vocab": {"<|eot_id|>": 128009, "<|end_of_text|>": 128001}}}
    old = kit.build({"tokenizer_config.json": {"eos_token": "<|eot_id|>"}, "tokenizer.json": vocab,
                     "generation_config.json": {"eos_token_id": 128009}})
    new = kit.build({"tokenizer_config.json": {"eos_token": "<|eot_id|>"}, "tokenizer.json": vocab,
                     "generation_config.json": {"eos_token_id": 128009}}, sha="1" * 40)
    new.files["tokenizer.json"] = FileEntry("tokenizer.json", "e" * 40, 30)
    del new.contents["tokenizer.json"]
    new.unavailable["tokenizer.json"] = "gated (auto): not read, the Hub refuses its files to this token"
    [change] = st.diff(old, new)
    assert change.summary.startswith("stop tokens not compared: new tokenizer.json not read (gated (auto)")
