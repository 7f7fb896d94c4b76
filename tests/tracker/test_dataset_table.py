"""The table a dataset revision's event carries (tracker/revision/dataset_table.py): rows before and after per
config and split, the schema diff, notes, the conversion's state, bounded, from two summaries."""

from __future__ import annotations

from typing import Any

from tracker.revision.dataset_table import MAX_COLUMNS, MAX_SPLITS, dataset_table


def _split(rows: int | None, columns: dict[str, str], known: bool = True) -> dict[str, Any]:
    return {"rows": rows if known else None, "rows_known": known, "shards": ["f.parquet"], "columns": columns}


def _summary(configs: dict[str, dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"licence": "apache-2.0", "gated": False, "shards": {"f.parquet": {}},
            "configs": {name: {"splits": splits} for name, splits in configs.items()}, **extra}


def test_retyped_removed_and_added_columns_with_their_splits() -> None:
    a = {"id": "Value(int32)", "text": "Value(string)", "old": "Value(bool)"}
    b = {"id": "Value(int64)", "text": "Value(string)", "new": "Sequence(Value(string))"}
    table = dataset_table(_summary({"default": {"train": _split(10, a), "test": _split(5, a)}}),
                          _summary({"default": {"train": _split(12, b), "test": _split(5, a)}}))
    assert [(c["column"], c["change"], c["before"], c["after"], c["splits"]) for c in table["schema"]] == [
        ("id", "retyped", "Value(int32)", "Value(int64)", ["train"]),
        ("new", "added", None, "Sequence(Value(string))", ["train"]),
        ("old", "removed", "Value(bool)", None, ["train"])]
    assert table["splits"][0] == {"config": "default", "split": "train", "before": 10, "after": 12, "delta": 2,
                                  "state": "same", "columns": 3}
    assert table["line"] == "1 config, 2 splits, 17 rows (+2); 3 column changes"


def test_rows_not_all_counted_have_no_delta() -> None:
    cols = {"x": "string"}
    table = dataset_table(_summary({"c": {"train": _split(10, cols)}}),
                          _summary({"c": {"train": _split(None, cols, known=False)}}))
    assert table["splits"][0]["after"] is None and table["splits"][0]["delta"] is None
    assert table["line"] == "1 config, 1 split, rows not all counted"


def test_config_removed_shows_its_splits_removed() -> None:
    cols = {"x": "string"}
    table = dataset_table(_summary({"a": {"train": _split(1, cols)}, "b": {"train": _split(2, cols)}}),
                          _summary({"a": {"train": _split(1, cols)}}))
    assert [(s["config"], s["state"], s["before"], s["after"]) for s in table["splits"]] == [
        ("a", "same", 1, 1), ("b", "removed", 2, None)]


def test_bounded_with_totals() -> None:
    """A dataset of thousands of splits and columns: the first MAX_* carried, the totals said."""
    many = {f"c{i}": "string" for i in range(MAX_COLUMNS + 50)}
    old = _summary({f"config{i}": {"train": _split(i, {})} for i in range(MAX_SPLITS + 20)})
    old["configs"]["config0"]["splits"]["train"]["columns"] = {"keep": "string"}
    new = _summary({f"config{i}": {"train": _split(i, {})} for i in range(MAX_SPLITS + 20)})
    new["configs"]["config0"]["splits"]["train"]["columns"] = {"keep": "string", **many}
    table = dataset_table(old, new)
    assert len(table["splits"]) == MAX_SPLITS and table["splits_total"] == MAX_SPLITS + 20
    assert len(table["schema"]) == MAX_COLUMNS and table["schema_total"] == MAX_COLUMNS + 50


def test_script_only_head_is_read_through_its_conversion_and_notes() -> None:
    """A head with no data files: its conversion's splits stand for it; the script, the licence, the gate and the
    card's disagreeing counts are notes; the conversion's lag is said."""
    cols = {"x": "string"}
    old = _summary({"default": {"train": _split(3, cols)}}, gated=False)
    new = {"licence": "mit", "gated": "manual", "shards": {}, "configs": {}, "script_only": True,
           "loading_script": "corpus.py", "card_mismatches": [{"config": "default", "split": "train", "card": 4, "files": 3}],
           "conversion": {"sha": "c" * 40, "source_sha": "a" * 40, "lagging": True,
                          "configs": {"default": {"splits": {"train": _split(3, cols)}}}}}
    table = dataset_table(old, new)
    assert [(s["split"], s["before"], s["after"], s["state"]) for s in table["splits"]] == [("train", 3, 3, "same")]
    assert table["notes"] == ["licence changed: apache-2.0 -> mit", "gate changed: not gated -> gated (manual)",
                              "only a loading script (corpus.py), no data files: datasets 4.0 and later cannot load it",
                              "default/train: the card declares 4 rows, the files hold 3"]
    assert table["conversion"]["state"] == f"lags the head: made from {'a' * 12}"
    assert table["line"].endswith("; loading script only")


def test_baseline_has_no_before_and_no_schema_diff() -> None:
    table = dataset_table(None, _summary({"default": {"train": _split(7, {"x": "string"})}}))
    assert table["splits"] == [{"config": "default", "split": "train", "before": None, "after": 7, "delta": None,
                                "state": "added", "columns": 1}]
    assert table["schema"] == [] and table["notes"] == [] and table["conversion"] is None
