"""`hubwatch bom`: CycloneDX 1.6 JSON validated against the official schema (cyclonedx-python-lib's validator)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from tests.support.cli import run_cli, write_config

PHI = "microsoft/phi-2"
EVERY = "hubwatch-tests/every-kind"
GATED = "hubwatch-tests/gated-model"


@pytest.fixture
def config(replay, tmp_path: Path, database_url: str) -> Path:
    return write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url)


def valid_bom(text: str) -> dict:
    """The document, after the official 1.6 schema accepted it."""
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    return json.loads(text)


def test_bom_of_a_revision_lists_model_files_packages_and_hubwatch_findings(replay, config: Path, tmp_path: Path) -> None:
    """A revision carrying custom code: the model's purl, its behaviour files with blob ids, custom code marked,
    transformers with its version, and hubwatch's own OSV records as vulnerabilities."""
    commits = replay.commits(PHI)
    replay.set_head(PHI, len(commits))
    lock_file = tmp_path / "phi.lock"
    lock_file.write_text(f'version = 1\n[[model]]\nrepo = "{PHI}"\nrevision = "{commits[0].sha}"\n', encoding="utf-8")
    assert run_cli("outdated", "--lock", str(lock_file), config=config).returncode == 0  # history back to the pin
    head = commits[3].sha  # 0004-sync-modeling-phi: custom code, before 0005 removes it
    result = run_cli("bom", f"{PHI}@{head}", config=config)
    assert result.returncode == 0, result.stderr[-2000:]
    bom = valid_bom(result.stdout)
    assert bom["specVersion"] == "1.6"
    [model] = [c for c in bom["components"] if c["type"] == "machine-learning-model"]
    assert model["purl"] == f"pkg:huggingface/{PHI}@{head}" and model["version"] == head
    files = {f["name"]: {p["name"]: p["value"] for p in f["properties"]} for f in model["components"]}
    assert files["config.json"]["hubwatch:kind"] == "config" and len(files["config.json"]["hubwatch:git-blob-id"]) == 40
    assert any(props.get("hubwatch:custom-code") == "true" for props in files.values()), files
    weights = [f for f in model["components"] if f.get("hashes")]
    assert weights and all(h["alg"] == "SHA-256" and len(h["content"]) == 64 for f in weights for h in f["hashes"])
    libraries = {c["name"]: c for c in bom["components"] if c["type"] == "library"}
    assert libraries["transformers"]["purl"] == f"pkg:pypi/transformers@{libraries['transformers']['version']}"
    [dependency] = [d for d in bom["dependencies"] if d["ref"] == model["bom-ref"]]
    assert libraries["transformers"]["bom-ref"] in dependency["dependsOn"]
    ours = [v for v in bom["vulnerabilities"] if v["source"]["name"] == "hubwatch"]
    assert ours and all(v["id"].startswith("x_HUBWATCH-") and v["affects"] == [{"ref": model["bom-ref"]}] for v in ours)


def test_bom_of_a_lock_file_names_a_gated_repo_and_lists_the_others(replay, config: Path, tmp_path: Path) -> None:
    """`bom --lock`: a gated repo is named on stderr (exit 1); the other models are in a valid document."""
    lock_file = tmp_path / "models.lock"
    lock_file.write_text(
        f'version = 1\n[[model]]\nrepo = "{GATED}"\nrevision = "{"b" * 40}"\n'
        f'[[model]]\nrepo = "{EVERY}"\nrevision = "{replay.head_sha(EVERY)}"\n', encoding="utf-8")
    result = run_cli("bom", "--lock", str(lock_file), config=config)
    assert result.returncode == 1 and GATED in result.stderr and "gated" in result.stderr
    bom = valid_bom(result.stdout)
    assert [c["purl"] for c in bom["components"] if c["type"] == "machine-learning-model"] == [
        f"pkg:huggingface/{EVERY}@{replay.head_sha(EVERY)}"]


def test_bom_usage_errors(config: Path) -> None:
    """Neither or both of REPO and --lock, or a short sha, is refused with a reason."""
    assert run_cli("bom", config=config).returncode == 2
    short = run_cli("bom", f"{EVERY}@abc1234", config=config)
    assert short.returncode != 0 and "full 40-hex commit sha" in short.stderr


def test_bom_of_a_renamed_repo_names_it_as_it_is_now_and_as_it_was(replay, config: Path, monkeypatch) -> None:
    """`bom OLD@SHA` of a repo renamed on the Hub (watched, its history moved to the new name): a valid document
    whose model has the new name's purl, `hubwatch:repo-state` moved, since when, and both names."""
    monkeypatch.delenv("HF_TOKEN", raising=False)
    old, new = "hubwatch-tests/broken-model", "hubwatch-tests/renamed-model"
    replay.set_head(old, 1)
    assert run_cli("watch", "add", old, config=config).returncode == 0
    assert run_cli("poll", config=config).returncode == 0
    replay.rename(old, new)
    replay.set_head(new, 2)
    assert run_cli("poll", config=config).returncode == 0
    sha = replay.commits(new)[0].sha
    result = run_cli("bom", f"{old}@{sha}", config=config)
    assert result.returncode == 0, result.stderr[-2000:]
    [model] = [c for c in valid_bom(result.stdout)["components"] if c["type"] == "machine-learning-model"]
    assert model["purl"] == f"pkg:huggingface/{new}@{sha}"
    properties = {p["name"]: p["value"] for p in model["properties"]}
    assert (properties["hubwatch:repo-state"], properties["hubwatch:moved-from"], properties["hubwatch:moved-to"]) == (
        "moved", old, new)
    assert properties["hubwatch:repo-state-since"]


def test_bom_of_a_pin_renamed_before_hubwatch_saw_it_is_ingested_under_the_new_name(replay, config: Path, tmp_path,
                                                                                     monkeypatch) -> None:
    """`bom --lock` of a pin whose repo was renamed before hubwatch stored anything of it: ingested under the new
    name and listed with the new name's purl, exit 0."""
    monkeypatch.delenv("HF_TOKEN", raising=False)
    old, new = "hubwatch-tests/broken-model", "hubwatch-tests/renamed-model"
    replay.set_head(old, 2)
    sha = replay.commits(old)[0].sha
    replay.rename(old, new)
    lock_file = tmp_path / "renamed.lock"
    lock_file.write_text(f'version = 1\n[[model]]\nrepo = "{old}"\nrevision = "{sha}"\n', encoding="utf-8")
    result = run_cli("bom", "--lock", str(lock_file), config=config)
    assert result.returncode == 0, result.stderr[-2000:]
    [model] = [c for c in valid_bom(result.stdout)["components"] if c["type"] == "machine-learning-model"]
    assert model["purl"] == f"pkg:huggingface/{new}@{sha}"
