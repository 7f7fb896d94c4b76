"""`hubwatch outdated --scan`, `--write`, `--format markdown` and `lock --scan` end to end, against the replay."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.support.cli import run_cli, write_config

EVERY = "hubwatch-tests/every-kind"
GATED = "hubwatch-tests/gated-model"


@pytest.fixture
def config(replay, tmp_path: Path, database_url: str) -> Path:
    return write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url)


def source_tree(root: Path, old: str, current: str) -> Path:
    """A project pinning EVERY twice at an old commit (Python and a serving script), once at its head (YAML),
    once by branch, once unpinned, with a broken .py and a malformed pin."""
    (root / "app").mkdir(parents=True)
    (root / "app" / "model.py").write_text(
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        f'model = AutoModelForCausalLM.from_pretrained("{EVERY}", revision="{old}")\n'
        f'tokenizer = AutoTokenizer.from_pretrained("{EVERY}")\n'
        f'draft = AutoModelForCausalLM.from_pretrained("{EVERY}", revision="main")\n', encoding="utf-8")
    (root / "serve.sh").write_text(f"#!/bin/sh\nexec vllm serve {EVERY} --revision {old} --port 8000\n", encoding="utf-8")
    (root / "deploy.yaml").write_text(f"model:\n  model_id: {EVERY}\n  revision: {current}\n", encoding="utf-8")
    (root / "broken.py").write_text("def f(:\n    from_pretrained('x/y')\n", encoding="utf-8")
    (root / "short.py").write_text(f'snapshot_download("{EVERY}", revision="{old[:7]}")\n', encoding="utf-8")
    return root


def test_scan_checks_each_pin_like_a_lock_entry(replay, config: Path, tmp_path: Path) -> None:
    """Pins found in code are checked upstream once per (repo, sha), with every file and line that pins them."""
    replay.set_head(EVERY, 4)
    commits = replay.commits(EVERY)
    root = source_tree(tmp_path / "src", commits[0].sha, commits[3].sha)
    result = run_cli("outdated", "--scan", str(root), "--json", config=config)
    assert result.returncode == 1, result.stderr  # the short sha cannot be checked
    data = json.loads(result.stdout)
    by_sha = {m["pinned_sha"]: m for m in data["models"]}
    assert by_sha[commits[0].sha]["status"] == "behind" and by_sha[commits[0].sha]["commits_behind"] == 3
    assert {(loc["path"], loc["line"]) for loc in by_sha[commits[0].sha]["locations"]} == {("app/model.py", 2), ("serve.sh", 2)}
    assert by_sha[commits[3].sha]["status"] == "up_to_date"
    assert [(p["path"], p["branch"]) for p in data["branch_pins"]] == [("app/model.py", "main")]
    assert [(p["path"], p["line"]) for p in data["unpinned"]] == [("app/model.py", 3)]
    assert [b["entry"] for b in data["bad_entries"]] == ["short.py:1"] and "short sha" in data["bad_entries"][0]["message"]
    assert [s["path"] for s in data["skipped_files"]] == ["broken.py"]
    text = run_cli("outdated", "--scan", str(root), config=config)
    assert "3 commit(s) behind" in text.stdout and f"{EVERY}  unpinned (no revision): app/model.py:3" in text.stdout
    assert "note: skipped broken.py: does not parse as Python" in text.stderr
    assert "error: short.py:1: " in text.stderr


def test_write_moves_the_pins_behind_to_the_branch_head(replay, config: Path, tmp_path: Path) -> None:
    """`--write` moves each pin behind its head in place; the next scan finds every pin up to date."""
    replay.set_head(EVERY, 4)
    commits = replay.commits(EVERY)
    root = source_tree(tmp_path / "src", commits[0].sha, commits[3].sha)
    (root / "short.py").unlink()
    before = (root / "app" / "model.py").read_text()
    result = run_cli("outdated", "--scan", str(root), "--write", "--json", config=config)
    data = json.loads(result.stdout)
    assert sorted(m["path"] for m in data["moved"]) == ["app/model.py", "serve.sh"] and data["not_moved"] == []
    assert (root / "app" / "model.py").read_text() == before.replace(commits[0].sha, commits[3].sha)
    assert f"--revision {commits[3].sha} --port" in (root / "serve.sh").read_text()
    again = json.loads(run_cli("outdated", "--scan", str(root), "--json", "--fail-on", "info", config=config).stdout)
    assert [m["status"] for m in again["models"]] == ["up_to_date"]


def test_lock_scan_writes_the_pins_found_in_code(replay, config: Path, tmp_path: Path) -> None:
    """`lock --scan` pins each sha the code pins, with its behaviour files; a malformed pin is named and exits 1."""
    replay.set_head(EVERY, 4)
    commits = replay.commits(EVERY)
    root = source_tree(tmp_path / "src", commits[3].sha, commits[3].sha)
    lock_file = tmp_path / "models.lock"
    result = run_cli("lock", "--scan", str(root), "--lock", str(lock_file), config=config)
    assert result.returncode == 1 and "short.py:1" in result.stderr
    [entry] = tomllib.loads(lock_file.read_text())["model"]
    assert entry["repo"] == EVERY and entry["revision"] == commits[3].sha and "config.json" in entry["files"]


def test_markdown_report_has_counts_changes_links_and_scan_findings(replay, config: Path, tmp_path: Path) -> None:
    """`--format markdown`: commits behind, a kind/severity table, behaviour changes, links, unpinned uses."""
    replay.set_head(EVERY, 7)
    commits = replay.commits(EVERY)
    root = source_tree(tmp_path / "src", commits[0].sha, commits[6].sha)
    public = write_config(tmp_path / "public.toml", replay.endpoint, tmp_path / "md.db", '\n[server]\npublic_url = "https://hw.example.com"\n')
    result = run_cli("outdated", "--scan", str(root), "--format", "markdown", config=public)
    md = result.stdout
    assert md.startswith("## hubwatch: upstream changes to pinned models")
    assert f"`{EVERY}@main`: 6 commit(s) behind" in md
    assert "| kind | critical | warning | notice | info |" in md and "| chat_template |" in md
    assert "**Behaviour changes**" in md and "custom_code" in md
    assert f"https://hw.example.com/repos/{EVERY}/compare/{commits[0].sha}...{commits[6].sha}" in md
    assert f"{replay.endpoint}/{EVERY}/commits/main" in md
    assert "### Unpinned (no revision)" in md and "### Files skipped" in md and "short.py:1" in md


def test_markdown_report_is_cut_past_60_kb_with_a_link(replay, config: Path, tmp_path: Path) -> None:
    """A report of many models stays under 60 KB, whole sections only, and says how many were cut."""
    lock_file = tmp_path / "many.lock"
    entries = "".join(f'[[model]]\nrepo = "hubwatch-tests/no-such-{n}"\nrevision = "{n:040x}"\n' for n in range(400))
    lock_file.write_text(f"version = 1\n{entries}", encoding="utf-8")
    result = run_cli("outdated", "--lock", str(lock_file), "--format", "markdown", config=config, timeout=300)
    md = result.stdout
    assert result.returncode == 3 and len(md.encode()) <= 60_000
    assert "…truncated:" in md and "more model(s) not shown" in md
    assert md.count("gone upstream") + int(md.split("…truncated: ")[1].split()[0]) == 400


def test_gated_repo_in_a_lock_file_is_named_the_rest_checked(replay, config: Path, tmp_path: Path) -> None:
    """A lock file naming a gated repo reports it `gated` (exit 3: a state to act on) and still checks the others."""
    lock_file = tmp_path / "gated.lock"
    lock_file.write_text(
        f'version = 1\n[[model]]\nrepo = "{GATED}"\nrevision = "{"b" * 40}"\n'
        f'[[model]]\nrepo = "{EVERY}"\nrevision = "{replay.head_sha(EVERY)}"\n', encoding="utf-8")
    result = run_cli("outdated", "--lock", str(lock_file), "--format", "markdown", config=config)
    assert result.returncode == 3
    assert f"`{GATED}@main`: gated" in result.stdout and f"`{EVERY}@main`: up to date" in result.stdout


def test_scan_and_lock_together_is_a_usage_error(config: Path, tmp_path: Path) -> None:
    """`--scan` with `--lock`, or `--write` without `--scan`, exits 2 saying why."""
    assert run_cli("outdated", "--scan", str(tmp_path), "--lock", "x", config=config).returncode == 2
    result = run_cli("outdated", "--write", config=config)
    assert result.returncode == 2 and "--write moves pins found by --scan" in result.stderr


def test_scan_and_write_pins_in_deployment_files(replay, config: Path, tmp_path: Path) -> None:
    """A Kubernetes manifest (`$(VAR)` from the container's env) and a compose file (TGI's MODEL_ID/REVISION) pinning
    EVERY are reported with file and line; `--write` moves both in place, the YAML unchanged but for the sha."""
    replay.set_head(EVERY, 4)
    commits = replay.commits(EVERY)
    old, head = commits[0].sha, commits[3].sha
    root = tmp_path / "deploy"
    root.mkdir()
    manifest = (
        "# vLLM, pinned\napiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n"
        f"        - name: vllm\n          args: [--model, {EVERY}, --revision, $(REV)]\n          env:\n"
        f"            - name: REV\n              value: &rev '{old}'  # reviewed\n"
    )
    compose = f"services:\n  tgi:\n    environment:\n      MODEL_ID: {EVERY}\n      REVISION: {old}\n"
    (root / "deployment.yaml").write_text(manifest, encoding="utf-8")
    (root / "compose.yml").write_text(compose, encoding="utf-8")
    data = json.loads(run_cli("outdated", "--scan", str(root), "--json", config=config).stdout)
    [model] = data["models"]
    assert model["status"] == "behind" and model["pinned_sha"] == old
    assert {(loc["path"], loc["line"]) for loc in model["locations"]} == {("deployment.yaml", 12), ("compose.yml", 5)}
    text = run_cli("outdated", "--scan", str(root), config=config)
    assert "3 commit(s) behind" in text.stdout, text.stdout
    result = run_cli("outdated", "--scan", str(root), "--write", "--json", config=config)
    moved = json.loads(result.stdout)
    assert sorted(m["path"] for m in moved["moved"]) == ["compose.yml", "deployment.yaml"] and moved["not_moved"] == []
    assert (root / "deployment.yaml").read_text() == manifest.replace(old, head)
    assert (root / "compose.yml").read_text() == compose.replace(old, head)
    assert yaml.safe_load((root / "compose.yml").read_text())["services"]["tgi"]["environment"]["REVISION"] == head
