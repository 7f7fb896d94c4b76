"""A dataset card's YAML read under limits (GLUE's real card shape, hostile YAML), and HF feature types read the
same from a card and from Parquet metadata."""

from __future__ import annotations

import time

import pytest

from tests.support.dataset_cards import glue_card
from tracker.formats import dataset_card
from tracker.formats.dataset_card import read_card
from tracker.formats.hf_features import card_feature_types, feature_types


def test_glue_card_configs_splits_counts_and_features():
    """Configs with their data_files per split, num_examples per split and ClassLabel names, from GLUE's card shape."""
    facts = read_card(glue_card({"cola": {"train": 8551, "validation": 1043}, "ax": {"test": 1104}}))
    assert facts.verdict == "ok" and facts.notes == []
    assert facts.licence == "other"
    assert facts.configs["cola"]["data_files"] == {"train": ["cola/train-*"], "validation": ["cola/validation-*"]}
    assert facts.info["cola"]["splits"] == {"train": 8551, "validation": 1043}
    assert facts.info["ax"]["features"] == {"premise": 'Value("string")', "hypothesis": 'Value("string")',
                                            "label": "ClassLabel(names=[entailment, neutral, contradiction])",
                                            "idx": 'Value("int32")'}


@pytest.mark.parametrize(("yaml_text", "expected"), [
    ("data_files: data/*.parquet", {"train": ["data/*.parquet"]}),
    ("data_files:\n  - a.csv\n  - b.csv", {"train": ["a.csv", "b.csv"]}),
    ("data_files:\n    train: tr.jsonl\n    test: [t1.jsonl, t2.jsonl]", {"train": ["tr.jsonl"], "test": ["t1.jsonl", "t2.jsonl"]}),
    ("data_files:\n  - split: test\n    path:\n    - x/*.parquet\n    - y/*.parquet", {"test": ["x/*.parquet", "y/*.parquet"]}),
])
def test_data_files_in_every_shape_the_library_takes(yaml_text, expected):
    """A pattern, a list, a {split: path} mapping and a list of {split, path} all read as {split: [patterns]}."""
    card = f"---\nconfigs:\n- config_name: default\n  {yaml_text.replace(chr(10), chr(10) + '  ')}\n---\n"
    assert read_card(card).configs["default"]["data_files"] == expected


def test_old_cards_with_integer_label_keys_and_a_licence_list():
    """`names: {0: a, 1: b}` (integer keys, as older cards wrote them) and `license: [a, b]`."""
    card = ("---\nlicense:\n- cc-by-4.0\n- mit\ndataset_info:\n  features:\n  - name: label\n    dtype:\n"
            "      class_label:\n        names:\n          1: pos\n          0: neg\n  splits:\n  - name: train\n"
            "    num_examples: 5\n---\n")
    facts = read_card(card)
    assert facts.licence == "cc-by-4.0, mit"
    assert facts.info["default"] == {"features": {"label": "ClassLabel(names=[neg, pos])"}, "splits": {"train": 5}}


def test_a_card_without_front_matter_is_none():
    """No `---` block: verdict none, nothing declared."""
    facts = read_card("# A dataset\n\nNo YAML here.\n")
    assert facts.verdict == "none" and facts.configs == {} and facts.licence is None


def _laughs(levels: int) -> str:
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for i in range(1, levels):
        prev, name = chr(ord("a") + i - 1), chr(ord("a") + i)
        text += f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]\n"
    return text


@pytest.mark.parametrize(("yaml_text", "says"), [
    (_laughs(10), "expands to more than"),
    ("a: &x [*x]\n", "nests deeper than 64"),
    ("refs: [*a]\nbase: &a 1\n", "not YAML: found undefined alias"),
    ("anchors:\n" + "".join(f"- &a{i} {i}\n" for i in range(300)) + "uses: [" + ",".join(f"*a{i}" for i in range(300)) + "]\n",
     "more than 256 YAML aliases"),
    ("x: " + "y" * (3 * 2**20) + "\n", "over 2 MiB"),
    ("key: [unclosed\n", "not YAML"),
    ("- just\n- a list\n", "not a mapping"),
    ("!!python/object:os.system {}\n", "not YAML"),
])
def test_hostile_yaml_is_unreadable_quickly(yaml_text, says):
    """Alias bombs, self-reference, too many aliases, a huge document, bad YAML, Python tags: unreadable, with the
    reason, in well under a second."""
    started = time.perf_counter()
    facts = read_card(f"---\n{yaml_text}---\n# card\n")
    assert time.perf_counter() - started < 2.0
    assert facts.verdict == "unreadable"
    assert says in facts.notes[0]


def test_a_few_aliases_are_fine():
    """A card that reuses a block by anchor (under the cap) is read, the alias expanded."""
    card = "---\nlicense: mit\nbase: &f\n  - name: x\n    dtype: int64\ndataset_info:\n  features: *f\n---\n"
    assert read_card(card).info["default"]["features"] == {"x": 'Value("int64")'}


def test_limits_are_the_documented_ones():
    """The caps the docs state."""
    assert (dataset_card.MAX_YAML_BYTES, dataset_card.MAX_ALIASES) == (2 * 2**20, 256)


# The same features as a card writes them (YAML) and as Features.to_dict() writes them into Parquet metadata.
CARD_FEATURES = [
    {"name": "text", "dtype": "string"},
    {"name": "label", "dtype": {"class_label": {"names": {"0": "neg", "1": "pos"}}}},
    {"name": "tokens", "sequence": "string"},
    {"name": "answers", "sequence": [{"name": "text", "dtype": "string"}, {"name": "answer_start", "dtype": "int32"}]},
    {"name": "themes", "list": "string"},
    {"name": "image", "dtype": "image"},
    {"name": "audio", "dtype": {"audio": {"sampling_rate": 16000}}},
    {"name": "meta", "struct": [{"name": "year", "dtype": "int64"}]},
    {"name": "vec", "sequence": "float32", "length": 3},
]
DICT_FEATURES = {
    "text": {"dtype": "string", "_type": "Value"},
    "label": {"names": ["neg", "pos"], "_type": "ClassLabel"},
    "tokens": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"},
    "answers": {"feature": {"text": {"dtype": "string", "_type": "Value"},
                            "answer_start": {"dtype": "int32", "_type": "Value"}}, "_type": "Sequence"},
    "themes": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "List"},
    "image": {"_type": "Image"},
    "audio": {"sampling_rate": 16000, "_type": "Audio"},
    "meta": {"year": {"dtype": "int64", "_type": "Value"}},
    "vec": {"feature": {"dtype": "float32", "_type": "Value"}, "length": 3, "_type": "Sequence"},
}


def test_card_and_parquet_metadata_read_the_same_types():
    """Each feature reads the same from the card's YAML and from Features.to_dict()."""
    from_card, note = card_feature_types(CARD_FEATURES)
    from_dict, note2 = feature_types(DICT_FEATURES)
    assert note is None and note2 is None
    assert from_card == from_dict
    assert from_card["vec"] == 'Sequence(Value("float32"), length=3)'
    assert from_card["answers"] == 'Sequence({text: Value("string"), answer_start: Value("int32")})'


def test_long_label_lists_are_a_count_and_a_digest():
    """1,000 ClassLabel names: shown as a count and digest, and one name changed changes the type."""
    names = [f"class_{i}" for i in range(1000)]
    a, _ = feature_types({"label": {"names": names, "_type": "ClassLabel"}})
    b, _ = feature_types({"label": {"names": names[:-1] + ["other"], "_type": "ClassLabel"}})
    assert a["label"].startswith("ClassLabel(1,000 names, sha256:") and a != b


def test_a_feature_nested_too_deep_is_a_note():
    """A feature nested past MAX_DEPTH is left out with a note; its siblings are read."""
    deep: dict = {"dtype": "int64", "_type": "Value"}
    for _ in range(100):
        deep = {"feature": deep, "_type": "Sequence"}
    types, note = feature_types({"deep": deep, "ok": {"dtype": "bool", "_type": "Value"}})
    assert types == {"ok": 'Value("bool")'} and "deep: nested deeper than 32" in note
