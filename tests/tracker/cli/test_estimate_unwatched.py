"""`hubwatch estimate ORG/NAME[@REV]` on a repo hubwatch does not watch: config.json and the weight headers read from
the Hub replay through the real huggingface_hub client (headers by Range, no weights), nothing stored; --structure on
it; an unknown or gated repo a clear message and exit code 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli, write_config

CLIP = "laion/CLIP-ViT-B-32-laion2B-s34B-b79K"


@pytest.fixture
def config(replay, tmp_path: Path) -> Path:
    return write_config(tmp_path / "hubwatch.toml", replay.endpoint, tmp_path / "hubwatch.db")


def test_unwatched_repo_is_estimated_from_the_hub(replay, config):
    """The head's config.json and safetensors header give the parameters; the weights are read by Range only."""
    replay.reset_requests()
    out = run_cli("estimate", CLIP, "--json", config=config)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["sha"] == replay.head_sha(CLIP) and result["watched"] is False
    assert result["weight_files"] == ["model.safetensors"]
    assert result["parameters"]["checkpoint"] == 151_277_313 == result["parameters"]["derived"]
    assert "structure" not in result
    weights = [r for r in replay.requests if r.path.endswith(".safetensors") and r.method == "GET"]
    assert weights and all(r.range for r in weights)


def test_nothing_is_stored(replay, config):
    """Estimating an unwatched repo stores neither a watch nor a revision."""
    assert run_cli("estimate", CLIP, config=config).returncode == 0
    assert CLIP not in run_cli("watch", "list", config=config).stdout
    history = run_cli("history", CLIP, "--json", config=config)
    assert history.returncode != 0 or json.loads(history.stdout) in ([], {"revisions": []})


def test_at_an_older_revision(replay, config):
    """ORG/NAME@SHA reads that commit; the initial commit, with neither config.json nor weights, is a clear refusal."""
    second = next(c.sha for c in replay.commits(CLIP) if c.dirname.startswith("0002-"))
    out = run_cli("estimate", f"{CLIP}@{second}", "--json", config=config)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["sha"] == second != replay.head_sha(CLIP)
    first = next(c.sha for c in replay.commits(CLIP) if c.dirname.startswith("0001-"))
    out = run_cli("estimate", f"{CLIP}@{first}", config=config)
    assert out.returncode == 1
    assert f"{CLIP} at {first[:12]}: nothing to estimate from (the repo has no config.json" in out.stderr


def test_structure_of_an_unwatched_repo(replay, config):
    """--structure gives every tower, the vision tower ending in its projection."""
    out = run_cli("estimate", CLIP, "--structure", "--json", config=config)
    towers = json.loads(out.stdout)["structure"]["towers"]
    assert [t["name"] for t in towers] == ["vision", "text", "similarity"]
    assert towers[0]["nodes"][-1] == {"name": "visual_projection", "type": "Linear", "output_shape": [512]}
    text = run_cli("estimate", CLIP, "--structure", config=config).stdout
    assert f"{CLIP} at {replay.head_sha(CLIP)[:12]} (config.json and weight headers read from the Hub)" in text
    assert "vision_model.encoder.layers.0-11.mlp.fc1" in text and "will it forward-pass: yes" in text


def test_unknown_repo_exits_3(replay, config):
    """A repo the Hub does not have: a message naming it, exit code 3."""
    out = run_cli("estimate", "nobody/no-such-model", config=config)
    assert out.returncode == 3
    assert "nobody/no-such-model" in out.stderr


def test_gated_repo_exits_3(replay, config):
    """A gated repo without access: its files cannot be read; exit code 3 and the message says gated."""
    replay.set_state(CLIP, "gated", gated="manual")
    out = run_cli("estimate", CLIP, config=config)
    assert out.returncode == 3
    assert "gated" in out.stderr.lower()


def test_abbreviated_sha_is_refused(replay, config):
    """@ followed by a short sha is not guessed at: a message asks for the full sha."""
    out = run_cli("estimate", f"{CLIP}@{replay.head_sha(CLIP)[:8]}", config=config)
    assert out.returncode != 0 and "full 40-hex commit sha" in out.stderr


def test_watched_repo_uses_its_history_unless_from_hub(replay, config):
    """A watched repo is estimated from its stored revision; --from-hub reads the Hub instead."""
    assert run_cli("watch", "add", CLIP, config=config).returncode == 0
    assert run_cli("poll", CLIP, config=config).returncode == 0
    stored = json.loads(run_cli("estimate", CLIP, "--json", config=config).stdout)
    assert "watched" not in stored and stored["source"] == "config.json and weight headers"
    hub = json.loads(run_cli("estimate", CLIP, "--from-hub", "--json", config=config).stdout)
    assert hub["watched"] is False and hub["parameters"] == stored["parameters"]


def test_verify_an_unwatched_repo(replay, config):
    """`hubwatch verify ORG/NAME[@REV]` on a repo hubwatch does not watch: the revision fetched from the Hub in
    memory, verified, and nothing stored; CLIP's real model raises no finding."""
    out = run_cli("verify", CLIP, "--json", config=config)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["sha"] == replay.head_sha(CLIP) and result["verified"] is True
    assert result["findings"] == []
    assert CLIP not in run_cli("watch", "list", config=config).stdout
    gone = run_cli("verify", "nobody/no-such-model", config=config)
    assert gone.returncode == 3 and "nobody/no-such-model" in gone.stderr


def test_cost_of_an_unwatched_repo(replay, config):
    """--cost works on an unwatched repo as on a stored one: the training cost per card."""
    out = run_cli("estimate", CLIP, "--cost", "--json", config=config)
    assert out.returncode == 0, out.stderr
    cost = json.loads(out.stdout)["cost"]
    assert cost["train"]["flops_per_sample"] > 0 and cost["train"]["cards"]
