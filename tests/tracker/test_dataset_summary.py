"""What a dataset revision is: configs, splits, rows and columns from real Parquet footers, JSON Lines first ranges
and card YAML, as the datasets library would lay them out."""

from __future__ import annotations

import json

from tests.support.dataset_cards import glue_card
from tests.support.parquet_files import data_file, glue_files, glue_table, parquet_bytes
from tracker.formats.dataset_card import read_card
from tracker.revision.dataset_summary import Conversion, is_data_file, summarize
from tracker.revision.snapshot import FileEntry


def summary_of(files: dict[str, bytes], card: str | None = None, others: tuple[str, ...] = (), **kwargs) -> dict:
    pairs = [data_file(path, data) for path, data in files.items()]
    entries = [e for e, _ in pairs] + [FileEntry(p, "0" * 40, 10) for p in (*others, "README.md")]
    return summarize("glue", entries, {e.path: s for e, s in pairs}, read_card(card), **kwargs)


def test_glue_configs_rows_and_features_from_footers():
    """Each config of the card holds the splits its data_files name, rows summed over their shards, HF types."""
    files = glue_files({"cola": {"train": 10, "validation": 4}, "mrpc": {"train": 6}}, shards=2)
    summary = summary_of(files, glue_card({"cola": {"train": 10, "validation": 4}, "mrpc": {"train": 6}}), gated="manual")
    cola = summary["configs"]["cola"]["splits"]
    assert {s: f["rows"] for s, f in cola.items()} == {"train": 10, "validation": 4}
    assert cola["train"]["shards"] == ["cola/train-00000-of-00002.parquet", "cola/train-00001-of-00002.parquet"]
    assert cola["train"]["columns"]["label"] == "ClassLabel(names=[unacceptable, acceptable])"
    assert cola["train"]["columns_from"] == "features"
    assert summary["licence"] == "other" and summary["gated"] == "manual" and summary["card_mismatches"] == []
    assert len(summary["shards"]) == 6 and summary["shards"]["mrpc/train-00000-of-00002.parquet"]["rows"] == 3
    assert json.loads(json.dumps(summary)) == summary


def test_card_counts_that_disagree_with_the_footers_are_listed():
    """num_examples in the card against the rows the footers hold."""
    summary = summary_of(glue_files({"cola": {"train": 10}}), glue_card({"cola": {"train": 12}}))
    assert summary["card_mismatches"] == [{"config": "cola", "split": "train", "card": 12, "files": 10}]


def test_without_configs_the_file_names_make_the_splits():
    """No `configs` in the card: one default config, splits from file and folder names (dev is validation)."""
    table = parquet_bytes(glue_table("cola", 3))
    files = {"data/train-00000-of-00001.parquet": table, "data/dev.parquet": table,
             "test/part-0.parquet": table, "notes.parquet": table}
    summary = summary_of(files, "---\nlicense: mit\n---\n")
    splits = summary["configs"]["default"]["splits"]
    assert {s: f["shards"] for s, f in splits.items()} == {
        "train": ["data/train-00000-of-00001.parquet"], "validation": ["data/dev.parquet"], "test": ["test/part-0.parquet"]}
    assert splits["train"]["columns_from"] == "arrow" and splits["train"]["columns"]["idx"] == "int32"


def test_without_a_split_name_everything_is_train():
    """No split keyword in any path: all data files are the train split."""
    summary = summary_of({"a.parquet": parquet_bytes(glue_table("cola", 2)), "b.parquet": parquet_bytes(glue_table("cola", 5))})
    assert summary["configs"]["default"]["splits"]["train"]["rows"] == 7


def test_data_dir_configs_and_jsonl_rows():
    """A config's data_dir scopes its files; a small JSON Lines file is counted, its columns JSON types."""
    jsonl = b'{"q": "a", "n": 1}\n{"q": "b", "n": 2}\n'
    card = "---\nconfigs:\n- config_name: en\n  data_dir: en\n- config_name: fr\n  data_dir: fr\n---\n"
    summary = summary_of({"en/train.jsonl": jsonl, "en/test.jsonl": jsonl, "fr/train.jsonl": jsonl}, card)
    assert {c: sorted(v["splits"]) for c, v in summary["configs"].items()} == {"en": ["test", "train"], "fr": ["train"]}
    train = summary["configs"]["en"]["splits"]["train"]
    assert train["rows"] == 2 and train["columns"] == {"q": "string", "n": "int"} and train["columns_from"] == "text"


def test_an_unreadable_shard_keeps_the_rest():
    """A truncated Parquet file: its split's rows are unknown, its verdict and reason kept; other splits whole."""
    files = glue_files({"cola": {"train": 10, "validation": 4}})
    files["cola/train-00000-of-00001.parquet"] = files["cola/train-00000-of-00001.parquet"][:-20]
    summary = summary_of(files, glue_card({"cola": {"train": 10, "validation": 4}}))
    splits = summary["configs"]["cola"]["splits"]
    assert splits["train"]["rows"] is None and splits["train"]["rows_known"] is False
    assert splits["validation"]["rows"] == 4
    shard = summary["shards"]["cola/train-00000-of-00001.parquet"]
    assert shard["verdict"] == "unreadable" and "not a Parquet file" in shard["note"]


def test_shards_of_one_split_with_different_columns_are_named():
    """A shard that gained a column while the others did not: the split names it."""
    files = glue_files({"cola": {"train": 4}}, shards=2)
    wider = glue_table("cola", 2).append_column("source", [["web", "web"]])
    files["cola/train-00001-of-00002.parquet"] = parquet_bytes(wider)
    summary = summary_of(files, glue_card({"cola": {"train": 4}}))
    assert summary["configs"]["cola"]["splits"]["train"]["columns_differ"] == ["cola/train-00001-of-00002.parquet"]


def test_a_repo_of_only_a_loading_script():
    """glue.py and a card, no data: the script is named and script_only set; the card's configs still listed."""
    summary = summary_of({}, glue_card({"cola": {"train": 10}}), others=("glue.py",))
    assert summary["loading_script"] == "glue.py" and summary["script_only"] is True
    assert summary["configs"]["cola"]["splits"]["train"]["card_rows"] == 10


def test_the_conversion_is_tied_to_its_commit():
    """refs/convert/parquet's CONFIG/SPLIT/NNNN.parquet and partial-SPLIT files summarized, with its commit and lag."""
    table = parquet_bytes(glue_table("cola", 5))
    pairs = [data_file(p, table) for p in ("cola/train/0000.parquet", "cola/train/0001.parquet", "cola/partial-test/0000.parquet")]
    conversion = Conversion("c" * 40, [e for e, _ in pairs], {e.path: s for e, s in pairs}, source_sha="a" * 40, lagging=True)
    summary = summary_of({}, None, others=("glue.py",), conversion=conversion)
    converted = summary["conversion"]
    assert converted["sha"] == "c" * 40 and converted["source_sha"] == "a" * 40 and converted["lagging"] is True
    assert converted["configs"]["cola"]["splits"]["train"]["rows"] == 10
    assert converted["configs"]["cola"]["splits"]["test"]["partial"] is True


def test_which_files_are_data():
    """Data by suffix, compressed too; the card, attributes and scripts are not."""
    assert [p for p in ("a.parquet", "b.jsonl.gz", "c.csv", "README.md", ".gitattributes", "glue.py", "x.png")
            if is_data_file(p)] == ["a.parquet", "b.jsonl.gz", "c.csv"]


def test_files_not_read_say_why():
    """A JSON file is its size only, said so; the library's own metadata files are not data."""
    summary = summary_of({"train.jsonl": b'{"a": 1}\n'}, None, others=("data/test.json", "dataset_infos.json"))
    assert summary["shards"]["data/test.json"]["note"] == "size only: .json files are not read by range"
    assert summary["shards"]["data/test.json"]["verdict"] == "not read" and "dataset_infos.json" not in summary["shards"]


def _large_jsonl(rows: int, last: dict | None = None) -> bytes:
    body = b"".join(json.dumps({"q": f"question {i:06d}", "n": i % 10}).encode() + b"\n" for i in range(rows))
    return body + (json.dumps(last).encode() + b"\n" if last is not None else b"")


def test_an_estimate_is_never_a_count_nor_a_rows_event():
    """Large JSON Lines files: their splits' rows stay unknown whatever the estimate says, so rows moved by the
    estimate alone raise no rows event; a column added in the last record is an `inconsistent` file, a finding."""
    from tracker.differs.dataset import diff

    before = summary_of({"train.jsonl": _large_jsonl(60_000)})
    after = summary_of({"train.jsonl": _large_jsonl(90_000, {"q": "x", "n": 1, "source": "web"})})
    split = after["configs"]["default"]["splits"]["train"]
    assert split["rows"] is None and not split["rows_known"] and after["shards"]["train.jsonl"]["rows"] is None
    assert "about" in after["shards"]["train.jsonl"]["note"] and "an estimate, never compared" in after["shards"]["train.jsonl"]["note"]
    assert after["shards"]["train.jsonl"]["verdict"] == "inconsistent"
    events = [c.detail["event"] for c in diff(before, after, "org/glue")]
    assert not any(e.startswith("dataset.rows") for e in events)
    [unreadable] = [c for c in diff(before, after, "org/glue") if c.detail["event"] == "dataset.file_unreadable"]
    assert "added source" in unreadable.summary
