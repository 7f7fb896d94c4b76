"""`hubwatch bom` of datasets: a pinned or watched dataset revision is a CycloneDX 1.6 `data` component (no purl:
the `huggingface` purl type is for models; its Hub tree and page as external references), its licence the card's,
its configs and splits with rows in its `data` entry, validated strictly against the 1.6 schema."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.kinds import split_repo_key
from tests.support.cli import run_cli, write_config
from tests.support.dataset_repos import DATASET_ID, evolving_dataset
from tests.tracker.pins.test_bom import valid_bom
from tracker.standins.replay.control import ReplayServer
from tracker.standins.replay.history import synthetic_history

NAME = split_repo_key(DATASET_ID)[1]  # also a model's name on this Hub
MISSING = "datasets/hubwatch-test/no-such-dataset"


@pytest.fixture(scope="module")
def hub() -> Iterator[ReplayServer]:
    """The evolving dataset (apache-2.0, then mit at its fourth commit) and a model of the same name."""
    with ReplayServer(roots=[]) as server:
        server.add_repo(evolving_dataset(with_conversion=False))
        server.add_repo(synthetic_history(NAME, commits=2))
        yield server


@pytest.fixture
def config(hub: ReplayServer, tmp_path: Path, database_url: str) -> Path:
    return write_config(tmp_path / "hubwatch.toml", hub.endpoint, database_url)


def components(bom: dict, kind: str) -> list[dict]:
    return [c for c in bom["components"] if c["type"] == kind]


def test_a_pinned_dataset_is_a_data_component_with_its_revision_licence_splits_and_hub_references(
        hub: ReplayServer, config: Path) -> None:
    """`bom datasets/ORG/NAME@SHA` (ingested for the BOM): type data, version the sha, no purl, bom-ref and
    distribution its tree on the Hub, website its page; the card's licence at that revision; each config/split's
    rows as properties and in its `data` entry (type dataset, columns with HF types); its data files with sha256."""
    shas = [c.sha for c in hub.commits(DATASET_ID)]
    first = run_cli("bom", f"{DATASET_ID}@{shas[0]}", config=config)
    assert first.returncode == 0, first.stderr[-2000:]
    bom = valid_bom(first.stdout)
    [data] = components(bom, "data")
    assert components(bom, "machine-learning-model") == []
    tree = f"{hub.endpoint}/{DATASET_ID}/tree/{shas[0]}"
    assert (data["group"], data["name"], data["version"], data["bom-ref"]) == (*NAME.split("/"), shas[0], tree)
    assert "purl" not in data
    assert {(r["type"], r["url"]) for r in data["externalReferences"]} == {
        ("distribution", tree), ("website", f"{hub.endpoint}/datasets/{NAME}")}
    assert [lic["license"]["id"] for lic in data["licenses"]] == ["Apache-2.0"]
    props = {p["name"]: p["value"] for p in data["properties"]}
    assert props["hubwatch:repo-type"] == "dataset" and props["hubwatch:branch"] == "main"
    assert {k: v for k, v in props.items() if k.startswith("hubwatch:rows:")} == {
        "hubwatch:rows:default/train": "100", "hubwatch:rows:default/test": "20", "hubwatch:rows:extra/train": "30"}
    [entry] = data["data"]
    assert entry["type"] == "dataset" and entry["name"] == NAME and entry["contents"]["url"] == tree
    splits = {p["name"]: p["value"] for p in entry["contents"]["properties"]}
    assert set(splits) == {"hubwatch:split:default/train", "hubwatch:split:default/test", "hubwatch:split:extra/train"}
    assert '"rows": 100' in splits["hubwatch:split:default/train"] and "default/test 20 rows" in entry["description"]
    files = data["components"]
    assert files and all(f["type"] == "file" and f["name"].endswith(".parquet") for f in files)
    assert all(h["alg"] == "SHA-256" and len(h["content"]) == 64 for f in files for h in f["hashes"])

    last = run_cli("bom", f"{DATASET_ID}@{shas[3]}", config=config)  # relicensed under MIT; default/test lost 5 rows
    assert last.returncode == 0, last.stderr[-2000:]
    [data] = components(valid_bom(last.stdout), "data")
    assert [lic["license"]["id"] for lic in data["licenses"]] == ["MIT"]
    assert {p["name"]: p["value"] for p in data["properties"]}["hubwatch:rows:default/test"] == "15"


def test_a_lock_file_lists_a_dataset_and_the_model_of_its_name_apart_and_names_a_missing_dataset(
        hub: ReplayServer, config: Path, tmp_path: Path) -> None:
    """`bom --lock` with a dataset, the model of the same name and a dataset not on the Hub: the missing one is named
    on stderr with the status a model gets (exit 1); the dataset is a data component, the model a
    machine-learning-model with its huggingface purl, in one valid document."""
    lock = tmp_path / "pins.lock"
    lock.write_text(
        f'version = 1\n[[model]]\nrepo = "{DATASET_ID}"\nrevision = "{hub.head_sha(DATASET_ID)}"\n'
        f'[[model]]\nrepo = "{NAME}"\nrevision = "{hub.head_sha(NAME)}"\n'
        f'[[model]]\nrepo = "{MISSING}"\nrevision = "{"c" * 40}"\n', encoding="utf-8")
    result = run_cli("bom", "--lock", str(lock), config=config)
    assert result.returncode == 1 and f"({MISSING}): gone: {MISSING} does not exist on the Hub" in result.stderr, result.stderr
    bom = valid_bom(result.stdout)
    [data] = components(bom, "data")
    [model] = components(bom, "machine-learning-model")
    assert data["version"] == hub.head_sha(DATASET_ID) and data["name"] == model["name"] == NAME.split("/")[1]
    assert model["purl"] == f"pkg:huggingface/{NAME}@{hub.head_sha(NAME)}"
    outdated = run_cli("outdated", "--lock", str(lock), "--json", config=config)  # the status outdated gives it
    assert {m["repo_id"]: m["status"] for m in json.loads(outdated.stdout)["models"]}[MISSING] == "gone"


def test_a_vex_of_a_watched_dataset_keeps_the_component_without_its_splits(hub: ReplayServer, config: Path) -> None:
    """`bom --vex` of a watched dataset named without a revision: its branch head, the data component (referenced
    by its tree URL), no data files, no `data` entry."""
    assert run_cli("watch", "add", DATASET_ID, config=config).returncode == 0
    result = run_cli("bom", DATASET_ID, "--vex", config=config)
    assert result.returncode == 0, result.stderr[-2000:]
    [data] = components(valid_bom(result.stdout), "data")
    assert "data" not in data and "components" not in data and data["bom-ref"].endswith(hub.head_sha(DATASET_ID))
    assert data["version"] == hub.head_sha(DATASET_ID)


def test_a_dataset_of_very_many_splits_and_columns_is_listed_in_bounds() -> None:
    """A stored summary of 201 splits, one of 501 columns (what a hostile repo's footers may say): 200 splits listed
    and the rest counted, 500 columns listed and the rest counted, the document still valid; no summary stored (a
    revision ingested before summaries) is said, not an error."""
    from datetime import UTC, datetime

    from tracker.pins.bom import MAX_COLUMNS, MAX_SPLITS, BomModel, render_bom

    wide = {f"c{i:04d}": 'Value("int64")' for i in range(MAX_COLUMNS + 1)}
    splits = {f"s{i:04d}": {"rows": i, "columns": wide if i == 0 else {}} for i in range(MAX_SPLITS + 1)}
    many = BomModel(DATASET_ID, "a" * 40, "main", dataset={"licence": "odc-by", "configs": {"default": {"splits": splits}}},
                    licence="odc-by")
    bare = BomModel("datasets/org/older", "b" * 40, "main", dataset={})
    bom = valid_bom(render_bom([many, bare], "https://huggingface.co", datetime(2026, 1, 1, tzinfo=UTC), "test"))
    listed, older = components(bom, "data")
    props = {p["name"]: p["value"] for p in listed["properties"]}
    assert sum(k.startswith("hubwatch:rows:") for k in props) == MAX_SPLITS and props["hubwatch:splits-not-listed"] == "1"
    first = json.loads(listed["data"][0]["contents"]["properties"][0]["value"])
    assert len(first["columns"]) == MAX_COLUMNS and first["columns_not_listed"] == 1
    assert listed["licenses"] == [{"license": {"name": "odc-by"}}]  # not an SPDX id: by name
    assert listed["bom-ref"] == f"https://huggingface.co/{DATASET_ID}/tree/{'a' * 40}"
    assert {p["name"]: p["value"] for p in older["properties"]}["hubwatch:dataset-summary"].startswith("none stored")
