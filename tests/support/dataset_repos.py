"""Dataset repos as the Hub serves them, built in memory for the replay: real Parquet files written with pyarrow
(their footers carry the `huggingface` features as `datasets` writes them), a card whose YAML front matter has
the licence, `dataset_info` (features, splits with num_examples) and `configs` (data_files per split) in the
shape cards written by `datasets.push_to_hub` have on the Hub (one config: `dataset_info` a mapping; several: a
list with `config_name`), and the viewer's Parquet conversion (`refs/convert/parquet`).

`dataset_history` builds any sequence of revisions (`DatasetStep`); `evolving_dataset` is the story the tests
and the demo tell: several configs, a split gaining a column, rows removed, a licence change, and a conversion
that lags the head. `script_only_dataset` is a repo that has only a loading script (unloadable with
`datasets` 4 and later).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from tracker.standins.replay.history import BytesBlob, LfsBlob, RepoHistory, TreeEntry, scripted_history

DATASET_ID = "datasets/hubwatch-test/evolving-qa"  # the evolving dataset's key (storage.kinds.repo_key)
SCRIPT_ONLY_ID = "datasets/hubwatch-test/scripted-corpus"
# The HF feature of each Arrow type the fixtures use, as `datasets` writes it into the schema metadata.
_HF_DTYPES = {pa.string(): "string", pa.int64(): "int64", pa.int32(): "int32", pa.float32(): "float32",
              pa.float64(): "float64", pa.bool_(): "bool"}


def hf_features(schema: pa.Schema) -> dict[str, Any]:
    """The `datasets` Features of a flat schema (`{"col": {"dtype": "string", "_type": "Value"}}`); a list column is
    a `Sequence` of its item's Value."""
    features: dict[str, Any] = {}
    for f in schema:
        if pa.types.is_list(f.type):
            features[f.name] = {"feature": {"dtype": _HF_DTYPES[f.type.value_type], "_type": "Value"}, "_type": "Sequence"}
        else:
            features[f.name] = {"dtype": _HF_DTYPES[f.type], "_type": "Value"}
    return features


def parquet_bytes(table: pa.Table, row_group_size: int | None = None, hf_metadata: bool = True) -> bytes:
    """The table as a Parquet file, as `datasets` writes one: its schema metadata holds `huggingface` (the
    features) unless `hf_metadata` is False. Deterministic: the same table gives the same bytes."""
    if hf_metadata:
        meta = {b"huggingface": json.dumps({"info": {"features": hf_features(table.schema)}}).encode()}
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **meta})
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=row_group_size)
    return sink.getvalue()


def qa_table(rows: int, start: int = 0, with_source: bool = False) -> pa.Table:
    """`rows` question/answer rows numbered from `start`; `with_source` adds a string column `source`."""
    ids = list(range(start, start + rows))
    columns: dict[str, Any] = {
        "id": pa.array(ids, pa.int64()),
        "question": pa.array([f"What is {i} + {i}?" for i in ids], pa.string()),
        "answer": pa.array([str(2 * i) for i in ids], pa.string()),
    }
    if with_source:
        columns["source"] = pa.array(["synthetic" for _ in ids], pa.string())
    return pa.table(columns)


@dataclass
class DatasetStep:
    """One revision of a dataset repo: every config's splits as tables (each a Parquet shard), the card's licence,
    other files (path -> bytes, None: deleted) and the commit title."""

    configs: dict[str, dict[str, pa.Table]]
    license: str | None = "apache-2.0"
    title: str = "Upload dataset"
    files: dict[str, bytes | None] = field(default_factory=dict)
    card: bool = True  # False: no README.md at this revision (deleted if there was one)
    pretty_name: str = "Evolving QA"


def shard_path(config: str, split: str) -> str:
    """Where `datasets.push_to_hub` puts a split's single shard: `data/` for the default config, else the config."""
    folder = "data" if config == "default" else config
    return f"{folder}/{split}-00000-of-00001.parquet"


def dataset_card(configs: dict[str, dict[str, pa.Table]], licence: str | None, pretty_name: str = "Evolving QA") -> str:
    """A README.md as `datasets.push_to_hub` leaves dataset cards on the Hub: YAML front matter with the licence and
    tags, `dataset_info` (features, splits with num_bytes and num_examples, download and dataset sizes: a mapping for
    one config, a list of mappings with `config_name` for several) and `configs` (data_files per split:
    `data/train-*` for the default config), then prose."""
    card: dict[str, Any] = {}
    if licence is not None:
        card["license"] = licence
    card.update({"language": ["en"], "task_categories": ["question-answering"], "pretty_name": pretty_name,
                 "size_categories": ["n<1K"]})
    infos = [
        {
            "config_name": config,
            "features": [_card_feature(name, spec) for name, spec in hf_features(next(iter(splits.values())).schema).items()],
            "splits": [{"name": split, "num_bytes": int(table.nbytes), "num_examples": table.num_rows}
                       for split, table in splits.items()],
            "download_size": sum(len(parquet_bytes(t)) for t in splits.values()),
            "dataset_size": sum(int(t.nbytes) for t in splits.values()),
        }
        for config, splits in configs.items()
    ]
    if len(infos) == 1 and infos[0]["config_name"] == "default":  # one config: a mapping without its name
        infos[0].pop("config_name")
        card["dataset_info"] = infos[0]
    elif infos:
        card["dataset_info"] = infos
    if configs:
        card["configs"] = [
            {"config_name": config, "data_files": [{"split": split, "path": shard_path(config, split).replace(
                "-00000-of-00001.parquet", "-*")} for split in splits]}
            for config, splits in configs.items()
        ]
    front = yaml.safe_dump(card, sort_keys=False)
    return f"---\n{front}---\n\n# Dataset Card for {pretty_name}\n\nA small dataset built for hubwatch's tests.\n"


def _card_feature(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    if spec["_type"] == "Sequence":
        return {"name": name, "sequence": spec["feature"]["dtype"]}
    return {"name": name, "dtype": spec["dtype"]}


def dataset_history(repo_id: str, steps: list[DatasetStep], start: datetime | None = None,
                    gated: str | bool = False) -> RepoHistory:
    """A dataset repo (key `datasets/org/name`) with one commit per step: each step's shards written as LFS files
    (a shard whose table is unchanged keeps its bytes and oid), shards of configs or splits a step drops deleted,
    the card rewritten from the step (licence, configs, dataset_info)."""
    if not repo_id.startswith("datasets/"):
        raise ValueError(f"a dataset's key starts with datasets/, not {repo_id!r}")
    scripted: list[dict[str, bytes | TreeEntry | None]] = []
    previous: set[str] = set()
    had_card = False
    for step in steps:
        changes: dict[str, bytes | TreeEntry | None] = {}
        paths = set()
        for config, splits in step.configs.items():
            for split, table in splits.items():
                path = shard_path(config, split)
                paths.add(path)
                changes[path] = lfs_file(parquet_bytes(table))
        for gone in previous - paths:
            changes[gone] = None
        if step.card:
            changes["README.md"] = dataset_card(step.configs, step.license, step.pretty_name).encode()
        elif had_card:
            changes["README.md"] = None
        had_card = step.card
        changes.update(step.files)
        scripted.append(changes)
        previous = paths
    return scripted_history(repo_id, scripted, start=start or datetime(2025, 3, 1, tzinfo=UTC), gated=gated,
                            titles=[step.title for step in steps])


def lfs_file(data: bytes) -> TreeEntry:
    """A file stored in LFS with these real bytes (its sha256 theirs), as the Hub stores Parquet shards."""
    return TreeEntry(LfsBlob(len(data), source=BytesBlob(data)))


def evolving_steps() -> list[DatasetStep]:
    """Four revisions: two configs (default: train and test; extra: train) under apache-2.0; default/train gains a
    column `source`; default/test loses 5 of its 20 rows; the licence becomes mit (nothing else changes)."""
    train, test, extra = qa_table(100), qa_table(20, start=1000), qa_table(30, start=5000)
    train_with_source = qa_table(100, with_source=True)
    fewer_test = qa_table(15, start=1000)
    return [
        DatasetStep({"default": {"train": train, "test": test}, "extra": {"train": extra}}, title="Upload dataset"),
        DatasetStep({"default": {"train": train_with_source, "test": test}, "extra": {"train": extra}},
                    title="Add a source column to train"),
        DatasetStep({"default": {"train": train_with_source, "test": fewer_test}, "extra": {"train": extra}},
                    title="Remove 5 test rows (opt-out requests)"),
        DatasetStep({"default": {"train": train_with_source, "test": fewer_test}, "extra": {"train": extra}},
                    license="mit", title="Relicense under MIT"),
    ]


def evolving_dataset(repo_id: str = DATASET_ID, with_conversion: bool = True) -> RepoHistory:
    """The evolving dataset (`evolving_steps`), with its Parquet conversion on `refs/convert/parquet`: converted at
    the first revision, converted again at the second, and not yet for the third and fourth (it lags the head)."""
    steps = evolving_steps()
    history = dataset_history(repo_id, steps)
    if with_conversion:
        for after, step in ((1, steps[0]), (2, steps[1])):
            history.add_conversion(after, {
                f"{config}/{split}/0000.parquet": lfs_file(parquet_bytes(table))
                for config, splits in step.configs.items() for split, table in splits.items()
            })
    return history


def script_only_dataset(repo_id: str = SCRIPT_ONLY_ID) -> RepoHistory:
    """A dataset that is only a loading script and a card without data files: first with a Parquet shard and the
    script, then the shard deleted (only the script left: `datasets` 4 and later cannot load it)."""
    script = (
        b'"""A loading script, as datasets before 4.0 ran them."""\nimport datasets\n\n\n'
        b"class ScriptedCorpus(datasets.GeneratorBasedBuilder):\n"
        b"    def _info(self):\n        return datasets.DatasetInfo(features=datasets.Features({'text': datasets.Value('string')}))\n"
    )
    table = pa.table({"text": pa.array(["a", "b", "c"], pa.string())})
    steps = [
        DatasetStep({"default": {"train": table}}, files={"scripted-corpus.py": script}, title="Add data and script",
                    pretty_name="Scripted corpus"),
        DatasetStep({}, files={"scripted-corpus.py": script}, title="Keep only the loading script",
                    pretty_name="Scripted corpus"),
    ]
    return dataset_history(repo_id, steps, start=datetime(2025, 4, 1, tzinfo=UTC) + timedelta(hours=1))
