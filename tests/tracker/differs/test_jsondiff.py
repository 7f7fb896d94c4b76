"""The deepdiff wrapper: our own paths, change types and summaries, never deepdiff's types."""

from __future__ import annotations

import json

import pytest

from tracker.differs.jsondiff import format_path, json_changes


@pytest.mark.parametrize(
    "keys, path",
    [
        (("text_config", "num_hidden_layers"), "text_config.num_hidden_layers"),
        (("eos_token_id", 2), "eos_token_id[2]"),
        (("id2label", "7"), 'id2label["7"]'),
        (("weight_map", "model.embed_tokens.weight"), 'weight_map["model.embed_tokens.weight"]'),
        ((0, "name"), "[0].name"),
        (("__version__", "transformers"), "__version__.transformers"),
        ((), ""),
    ],
)
def test_paths(keys, path):
    """Paths read as dotted names, with indices and non-name keys bracketed."""
    assert format_path(keys) == path


CASES = [
    # (id, old, new, expected [(path, change, old, new)])
    ("scalar", {"a": 1}, {"a": 2}, [("a", "changed", 1, 2)]),
    ("int-float-same", {"rope_theta": 500000}, {"rope_theta": 500000.0}, []),
    ("null-to-value", {"rope_scaling": None}, {"rope_scaling": {"factor": 8.0}},
     [("rope_scaling", "changed", None, {"factor": 8.0})]),
    ("type", {"eos_token_id": 128001}, {"eos_token_id": [128001, 128009]},
     [("eos_token_id", "type_changed", 128001, [128001, 128009])]),
    ("list-insert", {"eos_token_id": [128001, 128009]}, {"eos_token_id": [128001, 128008, 128009]},
     [("eos_token_id[1]", "added", None, 128008)]),
    ("added-removed", {"a": 1, "b": 2}, {"b": 2, "c": 3}, [("a", "removed", 1, None), ("c", "added", None, 3)]),
    ("dunder-keys", {"__version__": {"transformers": "4.6.1"}}, {"__version__": {"transformers": "4.41.0"}},
     [("__version__.transformers", "changed", "4.6.1", "4.41.0")]),
    ("few-shared-keys", {"n_embd": 2560, "n_layer": 32, "vocab_size": 51200},
     {"hidden_size": 2560, "num_hidden_layers": 32, "vocab_size": 51200},
     [("hidden_size", "added", None, 2560), ("n_embd", "removed", 2560, None), ("n_layer", "removed", 32, None),
      ("num_hidden_layers", "added", None, 32)]),
]


@pytest.mark.parametrize("old, new, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_changes(old, new, expected):
    """Each difference comes back as (path, change type, old, new), sorted by path."""
    got = [(c.path, c.change, c.old, c.new) for c in json_changes(old, new)]
    assert got == expected
    json.dumps([c.to_dict() for c in json_changes(old, new)])


def test_big_list_is_summarised():
    """A list of more than 50 items is summarised as a multiset: counts and examples, not items."""
    old = {"merges": [f"a{i} b{i}" for i in range(1000)]}
    new = {"merges": [f"a{i} b{i}" for i in range(3, 1000)] + ["x y"]}
    [change] = json_changes(old, new)
    assert change.path == "merges" and change.old is None and change.new is None
    assert (change.summary["added"], change.summary["removed"]) == (1, 3)
    assert change.summary["examples"]["added"] == ["x y"]


def test_big_value_added_is_described_not_copied():
    """A big container added whole is described by type and length."""
    [change] = json_changes({}, {"id2label": {str(i): str(i) for i in range(500)}})
    assert change.change == "added"
    assert change.summary == {"old": None, "new": {"type": "dict", "length": 500}}


def test_order_is_stable():
    """The same inputs always give the same order, whatever the key insertion order."""
    old = {"b": 1, "a": {"y": 1, "x": 1}, "c": [1, 2]}
    new = {"c": [1, 3], "a": {"x": 2, "y": 2}, "b": 2}
    first = [c.path for c in json_changes(old, new)]
    assert first == ["a.x", "a.y", "b", "c[1]"]
    assert [c.path for c in json_changes(dict(reversed(old.items())), new)] == first
