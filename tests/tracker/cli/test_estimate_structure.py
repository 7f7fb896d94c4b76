"""`hubwatch estimate --structure`: the module graph in --json under structure.towers[].nodes[] and as a collapsed
table, additive to the existing output; a config the estimator refuses still gets its graph and the reason."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import run_cli

CONFIGS = Path(__file__).resolve().parents[2] / "fixtures" / "estimator" / "configs"
LLAMA = CONFIGS / "llama" / "Llama-3.2-1B.json"


def test_structure_json_has_every_node():
    """--structure --json: structure.towers[].nodes[] with name, type and output_shape, and the verdict."""
    out = json.loads(run_cli("estimate", "--config-file", str(LLAMA), "--structure", "--json").stdout)
    [tower] = out["structure"]["towers"]
    assert tower["nodes"][0] == {"name": "model.embed_tokens", "type": "Embedding", "output_shape": [2048, 2048]}
    assert tower["nodes"][-1] == {"name": "lm_head", "type": "Linear", "output_shape": [2048, 128256]}
    assert tower["layers"] == 16 and out["structure"]["forward_pass"] is True
    assert out["parameters"]["derived"] == 1_235_814_400  # the rest of the estimate is still there


def test_without_structure_the_output_is_unchanged():
    """Without --structure there is no structure key and no Structure section."""
    assert "structure" not in json.loads(run_cli("estimate", "--config-file", str(LLAMA), "--json").stdout)
    assert "Structure" not in run_cli("estimate", "--config-file", str(LLAMA)).stdout


def test_table_collapses_repeated_layers():
    """The table shows the 16 identical layers once, as layers.0-15 with x16."""
    text = run_cli("estimate", "--config-file", str(LLAMA), "--structure").stdout
    assert "model.layers.0-15.self_attn.k_proj" in text and "x16" in text
    assert "model.layers.3." not in text


def test_refused_config_still_gets_its_graph(tmp_path: Path):
    """A config the estimator refuses (heads that do not share their key/value heads) prints the reason, and the
    graph naming the node where a forward pass stops."""
    config = {**json.loads(LLAMA.read_text()), "num_key_value_heads": 3}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    out = run_cli("estimate", "--config-file", str(path), "--structure", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert "num_key_value_heads" in result["error"]
    assert result["structure"]["failure"]["node"] == "model.layers.0.self_attn.k_proj"
    text = run_cli("estimate", "--config-file", str(path), "--structure").stdout
    assert "will it forward-pass: no: model.layers.0.self_attn.k_proj" in text
    plain = run_cli("estimate", "--config-file", str(path))
    assert plain.returncode == 1 and "num_key_value_heads" in plain.stderr
