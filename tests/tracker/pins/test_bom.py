"""`hubwatch bom`: CycloneDX 1.6 JSON validated against the official schema (cyclonedx-python-lib's validator)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import cli_json, run_cli, write_config

PHI = "microsoft/phi-2"
EVERY = "hubwatch-tests/every-kind"
GATED = "hubwatch-tests/gated-model"


@pytest.fixture
def config(replay, tmp_path: Path, database_url: str) -> Path:
    return write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url)


def valid_bom(text: str) -> dict:
    """The document, after the official 1.6 schema accepted it."""
    # Imported here, not at collection: jsonschema's format checkers build a grammar on import (~2 CPU-s per worker).
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

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


def test_every_record_about_the_repo_is_analysed_for_the_listed_revision(replay, config: Path, tmp_path: Path) -> None:
    """phi-2's custom code (records introduced at 0002/0003, fixed when 0005 removed it): exploitable at 0004 with
    `update` as the response, resolved at 0005, not affected at the initial commit; `--vex` keeps only the
    vulnerabilities and what they affect; every document validates against CycloneDX 1.6."""
    commits = replay.commits(PHI)
    replay.set_head(PHI, len(commits))
    lock_file = tmp_path / "phi.lock"
    lock_file.write_text(f'version = 1\n[[model]]\nrepo = "{PHI}"\nrevision = "{commits[0].sha}"\n', encoding="utf-8")
    assert run_cli("outdated", "--lock", str(lock_file), config=config).returncode == 0

    def states(sha: str, *flags: str) -> tuple[dict, dict[str, str]]:
        result = run_cli("bom", f"{PHI}@{sha}", *flags, config=config)
        assert result.returncode == 0, result.stderr[-2000:]
        bom = valid_bom(result.stdout)
        ours = [v for v in bom["vulnerabilities"] if v["source"]["name"] == "hubwatch"]
        return bom, {v["id"]: v["analysis"]["state"] for v in ours}

    _, at_code = states(commits[3].sha)
    # 0003 replaced the mixformer code (its records fixed there); 0003/0004's phi code is open at 0004
    assert "exploitable" in at_code.values()
    bom, fixed = states(commits[4].sha)
    assert set(fixed) == set(at_code) and set(fixed.values()) == {"resolved"}
    assert {k for k, v in at_code.items() if v == "resolved"} < set(fixed)
    _, before = states(commits[0].sha)
    assert set(before) == set(at_code) and set(before.values()) == {"not_affected"}
    [analysis] = {v["analysis"]["justification"] for v in valid_bom(
        run_cli("bom", f"{PHI}@{commits[0].sha}", config=config).stdout)["vulnerabilities"]}
    assert analysis == "code_not_present"
    exploitable = [v for v in valid_bom(run_cli("bom", f"{PHI}@{commits[3].sha}", config=config).stdout)["vulnerabilities"]
                   if v["source"]["name"] == "hubwatch" and v["analysis"]["state"] == "exploitable"]
    assert all(v["analysis"]["response"] == ["update"] for v in exploitable)  # a later revision fixed it
    vex, vex_states = states(commits[3].sha, "--vex")
    assert vex_states == at_code
    [model] = [c for c in vex["components"] if c["type"] == "machine-learning-model"]
    assert "components" not in model and "modelCard" not in model


def test_the_model_card_carries_template_tokens_stops_licence_and_formats(replay, config: Path) -> None:
    """Llama 3.1's revision: the model card has the architecture, the chat template's sha256 (its text with
    --with-template), the special tokens with ids, the stop set per runtime; the licence is the card's."""
    import hashlib

    llama = "meta-llama/Llama-3.1-8B-Instruct"
    commits = replay.commits(llama)
    replay.set_head(llama, len(commits))
    assert run_cli("watch", "add", llama, "--backfill", "20", config=config).returncode == 0
    assert run_cli("poll", config=config).returncode == 0
    bom = valid_bom(run_cli("bom", f"{llama}@{commits[-1].sha}", "--with-template", config=config).stdout)
    [model] = [c for c in bom["components"] if c["type"] == "machine-learning-model"]
    card = model["modelCard"]
    assert card["modelParameters"]["architectureFamily"] == "llama"
    assert card["modelParameters"]["modelArchitecture"] == "LlamaForCausalLM"
    props = {p["name"]: p["value"] for p in card["properties"]}
    template = props["hubwatch:chat-template"]
    assert props["hubwatch:chat-template-sha256"] == hashlib.sha256(template.encode()).hexdigest()
    assert "<|eot_id|>" in template
    assert props["hubwatch:special-token:eos_token"] == "<|eot_id|> (128009)"
    assert json.loads(props["hubwatch:stop-tokens:transformers"]) == [128001, 128008, 128009]
    assert "hubwatch:stop-tokens:llama.cpp" in props and "hubwatch:stop-tokens:union" in props
    without = valid_bom(run_cli("bom", f"{llama}@{commits[-1].sha}", config=config).stdout)
    [plain] = [c for c in without["components"] if c["type"] == "machine-learning-model"]
    names = {p["name"] for p in plain["modelCard"]["properties"]}
    assert "hubwatch:chat-template-sha256" in names and "hubwatch:chat-template" not in names


def test_the_bom_carries_the_cards_licence_datasets_and_each_weight_files_format(replay, config: Path) -> None:
    """all-MiniLM-L6-v2 with its ONNX export beside the PyTorch pickle: the card's apache-2.0 as an SPDX id, its
    datasets and task in the model card, each weight file's format, and the pickle's verdict."""
    minilm = "sentence-transformers/all-MiniLM-L6-v2"
    commits = replay.commits(minilm)
    replay.set_head(minilm, 6)  # 0006: the ONNX export added, pytorch_model.bin still there
    assert run_cli("watch", "add", minilm, "--backfill", "20", config=config).returncode == 0
    assert run_cli("poll", config=config).returncode == 0
    bom = valid_bom(run_cli("bom", f"{minilm}@{commits[5].sha}", config=config).stdout)
    [model] = [c for c in bom["components"] if c["type"] == "machine-learning-model"]
    assert model["licenses"] == [{"license": {"id": "Apache-2.0"}}]
    parameters = model["modelCard"]["modelParameters"]
    assert {"type": "dataset", "name": "ms_marco"} in parameters["datasets"]
    assert parameters["architectureFamily"] == "bert"
    formats = {f["name"]: {p["name"]: p["value"] for p in f["properties"]} for f in model["components"]}
    assert formats["pytorch_model.bin"]["hubwatch:format"] == "pickle"
    shown = cli_json("show", minilm, commits[5].sha, config=config)
    [scanned] = [f for f in shown["files"] if f["path"] == "pytorch_model.bin"]
    assert formats["pytorch_model.bin"]["hubwatch:pickle-verdict"] == scanned["pickle_scan"]["verdict"]
    assert formats["model.safetensors"]["hubwatch:format"] == "safetensors"
    assert any(p.get("hubwatch:format") == "onnx" for name, p in formats.items() if name.endswith(".onnx"))


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
