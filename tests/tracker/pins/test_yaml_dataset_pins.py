"""Dataset pins in YAML training and evaluation configs (tracker.pins.yaml_scan): lm-evaluation-harness tasks
(`dataset_path` + `dataset_kwargs.revision`, a canonical short name too), Axolotl's `datasets:` items (`path` +
`revision`), TRL / open-r1 recipes (`dataset_name` + `dataset_revision`); each pinned under the dataset's key,
`datasets/ORG/NAME`, distinct from a model of the same name; `outdated --scan` checks them against the dataset."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import app_on, invoke_with
from tests.support.dataset_repos import DATASET_ID, evolving_dataset
from tests.tracker.pins.test_code_scan import SHA_A, SHA_B, tree
from tracker.cli.app import App
from tracker.pins.code_scan import scan_tree
from tracker.pins.code_write import Move, write_moves
from tracker.standins.replay.control import ReplayServer

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "dataset_pins"

# Every pin of the fixture configs: (file, line of the sha, key, sha).
FIXTURE_PINS = {
    ("axolotl-qlora.yaml", 13, "datasets/mhenrichsen/alpaca_2k_test", "d05c1cb585e462b16532a44314aa4859d5a0f6a2"),
    ("axolotl-qlora.yaml", 23, "datasets/tatsu-lab/alpaca", "dce01c9b08f87459cf36a430d809084718273017"),
    ("lm-eval-gsm8k.yaml", 9, "datasets/openai/gsm8k", "e53f048856ff4f594e959d75785d2c2d37b678ee"),
    ("lm-eval-wikitext.yaml", 7, "datasets/wikitext", "b08601e04326c79dfdd32d625aee71d232d685c3"),
    ("open-r1-sft.yaml", 5, "Qwen/Qwen2.5-Math-7B", "7d63c7fb3e8a1ffa8e2e3ab8e0e6c8e1b2f7a2d1"),
    ("open-r1-sft.yaml", 11, "datasets/open-r1/OpenR1-Math-220k", "e4e141ec9dea9f8326f4d347be56105859b2bd68"),
}


def test_every_dataset_pin_of_the_fixture_configs_is_found_with_its_line() -> None:
    """lm-eval, Axolotl and open-r1 configs: each dataset pin under its key (the model of the recipe a model pin),
    the exact characters --write replaces; lm-eval's local `json` builder and Axolotl's local file are no pins."""
    scan = scan_tree(FIXTURES)
    assert {(p.path, p.line, p.repo_id, p.sha) for p in scan.pins} == FIXTURE_PINS
    assert scan.unpinned == [] and scan.branch_pins == [] and scan.problems == [] and scan.skipped == []
    for pin in scan.pins:
        assert (FIXTURES / pin.path).read_text()[pin.start:pin.end] == pin.sha, pin


DATASET_FORMS = [
    ("dataset_name + dataset_revision", f"dataset_name: org/data\ndataset_revision: {SHA_A}\n", 2),
    ("camelCase", f"datasetName: org/data\ndatasetRevision: '{SHA_A}'\n", 2),
    ("dataset + revision", f"train:\n  dataset: org/data\n  revision: {SHA_A}\n", 3),
    ("dataset_id + revision", f"dataset_id: org/data\nrevision: {SHA_A}\n", 2),
    ("lm-eval dataset_kwargs", f"dataset_path: org/data\ndataset_kwargs:\n  trust_remote_code: true\n  revision: {SHA_A}\n", 4),
    ("lm-eval flow mapping", f'dataset_path: "org/data"\ndataset_kwargs: {{revision: "{SHA_A}"}}\n', 2),
    ("axolotl datasets", f"datasets:\n  - path: org/data\n    type: alpaca\n    revision: {SHA_A}\n", 4),
    ("axolotl pretraining", f"pretraining_dataset:\n  - path: org/data\n    revision: {SHA_A}\n    type: pretrain\n", 3),
    ("anchored defaults", f"x: &pin\n  dataset_revision: {SHA_A}\neval:\n  <<: *pin\n  dataset_name: org/data\n", 2),
]


@pytest.mark.parametrize(("form", "text", "line"), DATASET_FORMS, ids=[f[0] for f in DATASET_FORMS])
def test_each_dataset_form_is_one_dataset_pin(tmp_path: Path, form: str, text: str, line: int) -> None:
    scan = scan_tree(tree(tmp_path, {"config.yaml": text}))
    assert [(p.repo_id, p.sha, p.line) for p in scan.pins] == [("datasets/org/data", SHA_A, line)], form
    assert not scan.unpinned and not scan.problems


def test_a_model_and_a_dataset_of_one_name_stay_two_pins(tmp_path: Path) -> None:
    """One mapping naming the model org/x and the dataset org/x, each with its own revision: two pins, each moved on
    its own by --write; with one `revision` only, the model takes it and the dataset is unpinned."""
    text = f"model_name_or_path: org/x\nmodel_revision: {SHA_A}\ndataset_name: org/x\ndataset_revision: {SHA_B}\n"
    root = tree(tmp_path / "two", {"recipe.yaml": text})
    scan = scan_tree(root)
    assert sorted((p.repo_id, p.sha) for p in scan.pins) == [("datasets/org/x", SHA_B), ("org/x", SHA_A)]
    [data] = [p for p in scan.pins if p.repo_id == "datasets/org/x"]
    new = "c" * 40
    write_moves(root, [Move(data, new)])
    assert (root / "recipe.yaml").read_text() == text.replace(SHA_B, new)
    one = scan_tree(tree(tmp_path / "one", {"r.yaml": f"model: org/x\ndataset_name: org/x\nrevision: {SHA_A}\n"}))
    assert [(p.repo_id, p.sha) for p in one.pins] == [("org/x", SHA_A)]
    assert [p.repo_id for p in one.unpinned] == ["datasets/org/x"]


def test_what_is_not_a_dataset_pin_is_left_alone(tmp_path: Path) -> None:
    """`dataset:` without a revision (a registry name, a local file), lm-eval's config name in `dataset_name`, a
    builder of the datasets library by short name, a short name without a revision, Axolotl's local file and an
    item without a revision: no pins, nothing unpinned."""
    text = (
        "a:\n  dataset: org/data\n"  # a weak key without a revision
        "b:\n  dataset: ./data/train.jsonl\n  revision: main\n"
        f"c:\n  dataset_path: json\n  dataset_kwargs: {{revision: {SHA_A}}}\n"
        "d:\n  dataset_path: wikitext\n  dataset_name: wikitext-2-raw-v1\n"
        "e:\n  datasets:\n    - path: data/local.jsonl\n      ds_type: json\n    - path: org/data\n      type: alpaca\n"
        f"f:\n  dataset_path: /mnt/data/eval\n  revision: {SHA_A}\n"
    )
    scan = scan_tree(tree(tmp_path, {"config.yaml": text}))
    assert scan.pins == [] and scan.unpinned == [] and scan.branch_pins == [] and scan.problems == []


def test_an_unpinned_and_a_branch_dataset_are_said(tmp_path: Path) -> None:
    """lm-eval's `dataset_path` without a revision is an unpinned dataset; a branch is a branch pin."""
    text = "t1:\n  dataset_path: cais/mmlu\n  dataset_name: abstract_algebra\nt2:\n  dataset_name: org/data\n  dataset_revision: main\n"
    scan = scan_tree(tree(tmp_path, {"tasks.yaml": text}))
    assert [(p.location, p.repo_id) for p in scan.unpinned] == [("tasks.yaml:2", "datasets/cais/mmlu")]
    assert [(p.repo_id, p.branch) for p in scan.branch_pins] == [("datasets/org/data", "main")]


@pytest.mark.parametrize("text", [
    "dataset_path: org/data\ndataset_kwargs: revision-as-a-string\n",
    "dataset_path: org/data\ndataset_kwargs: [revision, x]\n",
    "datasets: not-a-list\n",
    "datasets:\n  - org/data\n  - [path, revision]\n  - {path: 12, revision: 34}\n  - {path: org/data, revision: [x]}\n",
    "dataset_name: [org/data]\ndataset_revision: {a: b}\n",
    "dataset_kwargs:\n  revision: " + SHA_A + "\n",
])
def test_odd_shapes_are_no_pins_and_no_errors(tmp_path: Path, text: str) -> None:
    """Keys of unexpected types (a string for dataset_kwargs, a list for datasets' items, numbers, lists) are not
    pins: the scan goes on, nothing raised; an lm-eval dataset without a revision is unpinned, as in code."""
    scan = scan_tree(tree(tmp_path, {"odd.yaml": text}))
    assert scan.pins == [] and scan.problems == [] and scan.skipped == []
    assert {p.repo_id for p in scan.unpinned} <= {"datasets/org/data"}


def test_a_short_dataset_sha_is_a_problem_naming_its_line(tmp_path: Path) -> None:
    scan = scan_tree(tree(tmp_path, {"t.yaml": "dataset_name: org/data\ndataset_revision: abc1234\n"}))
    assert scan.pins == [] and [loc for loc, _ in scan.problems] == ["t.yaml:2"] and "short sha" in scan.problems[0][1]


# -- outdated --scan against the replay's dataset ---------------------------------------------------------------


@pytest.fixture(scope="module")
def hub() -> Iterator[ReplayServer]:
    with ReplayServer(roots=[]) as server:
        server.add_repo(evolving_dataset(with_conversion=False))
        yield server


@pytest.fixture
def app(hub: ReplayServer, database_url: str) -> Iterator[App]:
    with app_on(hub.endpoint, database_url) as app:
        yield app


def test_outdated_scan_checks_a_yaml_dataset_pin_against_the_dataset(app: App, hub: ReplayServer, tmp_path: Path) -> None:
    """An lm-eval task pinning the replay's dataset at its first commit: `outdated --scan` reports the dataset's key
    behind its head with the dataset's changes since; `--write` moves the sha and only it; `lock --scan` locks it."""
    old = hub.commits(DATASET_ID)[0].sha
    org_name = DATASET_ID.removeprefix("datasets/")
    task = (FIXTURES / "lm-eval-gsm8k.yaml").read_text().replace("openai/gsm8k", org_name).replace(
        "e53f048856ff4f594e959d75785d2c2d37b678ee", old)
    root = tree(tmp_path / "tasks", {"gsm8k.yaml": task})
    result = invoke_with(app, "outdated", "--scan", str(root), "--json")
    assert result.exit_code in (0, 1, 3), result.output
    [entry] = json.loads(result.output)["models"]
    assert (entry["repo_id"], entry["status"]) == (DATASET_ID, "behind")
    assert entry["commits_behind"] == len(hub.commits(DATASET_ID)) - 1
    assert [(loc["path"], loc["line"]) for loc in entry["locations"]] == [("gsm8k.yaml", 9)]
    summaries = [c["summary"] for c in entry["changes"]]
    assert "config default, split test: 5 rows removed (20 -> 15)" in summaries
    assert sum("apache-2.0" in s for s in summaries) == 1  # the licence said once, by the dataset's change
    lock = tmp_path / "hubwatch.lock"
    locked = invoke_with(app, "lock", "--lock", str(lock), "--scan", str(root))
    assert locked.exit_code == 0, locked.output
    assert f'repo = "{DATASET_ID}"' in lock.read_text() and old in lock.read_text()
    written = invoke_with(app, "outdated", "--scan", str(root), "--write")
    assert written.exit_code in (0, 1, 3), written.output
    assert (root / "gsm8k.yaml").read_text() == task.replace(old, hub.head_sha(DATASET_ID))


def test_the_fixture_configs_copy_as_they_are(tmp_path: Path) -> None:
    """The fixtures are plain files (the Renovate suite copies them): no scan depends on their folder's name."""
    copied = tmp_path / "copy"
    shutil.copytree(FIXTURES, copied)
    assert {(p.path, p.repo_id, p.sha) for p in scan_tree(copied).pins} == {(f, r, s) for f, _, r, s in FIXTURE_PINS}
