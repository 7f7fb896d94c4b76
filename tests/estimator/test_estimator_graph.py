"""The module graph of every tower equals what transformers builds and runs: each node's module path, class and output
shape, against the graphs recorded from transformers on the meta device (tests/estimator/record_graph.py), and live
under `-m groundtruth`; a broken copy of a real config names the node where transformers fails too."""

from __future__ import annotations

import pytest
from estimator_configs import case_config
from graph_cases import BROKEN, CASES, MOE_CASES, broken_config, broken_id, recorded_graph

from estimator import estimate
from estimator.graph import PARAMETER, collapse, structure_graph

CLIP = "clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json"


def _ours(config: dict) -> dict:
    graph = structure_graph(config)
    nodes = [n for t in graph["towers"] for n in t["nodes"]]
    return {"calls": [[n["name"], n["type"], n["output_shape"]] for n in nodes if n["type"] != PARAMETER],
            "parameters": {n["name"]: n["output_shape"] for n in nodes if n["type"] == PARAMETER}}


@pytest.mark.parametrize("case", CASES)
def test_graph_equals_the_recorded_transformers_graph(case):
    """Every node the forward runs, in order, with its class and output shape, and every parameter a composite
    module owns, equal what transformers recorded for this config."""
    assert _ours(case_config(case)) == recorded_graph("graphs")[case]


def test_every_case_has_its_recorded_graph():
    """The recorded graphs are those of the cases, no more, no fewer."""
    assert sorted(recorded_graph("graphs")) == sorted(CASES)


@pytest.mark.groundtruth
@pytest.mark.parametrize("case", CASES)
def test_graph_equals_transformers(case):
    """The graph equals transformers' model built on the meta device and run on meta tensors."""
    from graph_truth import real_graph

    assert _ours(case_config(case)) == real_graph(case_config(case))


def _moe_view(config: dict, calls: int) -> dict:
    """Our graph as real_moe reads transformers: every leaf module once (sorted), the parameters composite modules
    own, and the first ``calls`` nodes the forward runs."""
    ours = _ours(config)
    return {"leaves": sorted({tuple(c[:2]) for c in ours["calls"]}), "parameters": ours["parameters"],
            "calls": ours["calls"][:calls]}


def _as_recorded(real: dict) -> dict:
    return {**real, "leaves": sorted(tuple(leaf) for leaf in real["leaves"])}


@pytest.mark.parametrize("case", MOE_CASES)
def test_moe_graph_equals_the_recorded_module_tree(case):
    """A mixture-of-experts graph names every leaf module transformers builds, with its class, and every stacked
    expert weight with its shape; the forward up to the router (where meta tensors stop) runs our nodes in order."""
    real = _as_recorded(recorded_graph("moe")[case])
    assert real["calls"] and real["calls"][-1][0].endswith("mlp.gate")
    assert _moe_view(case_config(case), len(real["calls"])) == real


@pytest.mark.groundtruth
@pytest.mark.parametrize("case", MOE_CASES)
def test_moe_graph_equals_transformers(case):
    """The same, live: transformers' MoE model built on the meta device, its forward stopping at the routing."""
    from graph_truth import real_moe

    real = _as_recorded(real_moe(case_config(case)))
    assert _moe_view(case_config(case), len(real["calls"])) == real


def test_every_moe_case_has_its_recorded_tree():
    assert sorted(recorded_graph("moe")) == sorted(MOE_CASES)


@pytest.mark.parametrize("case,expected", [
    # Mixtral-8x7B: 8 experts of width 14336 on hidden 4096, the router's logits per token over the 8
    ("mixtral/Mixtral-8x7B-v0.1.json", {
        "mlp.gate": [8], "mlp.experts.gate_up_proj": [8, 2 * 14336, 4096], "mlp.experts.down_proj": [8, 4096, 14336],
        "mlp.experts.act_fn": [14336]}),
    # Qwen1.5-MoE-A2.7B: a shared expert of 5632 with its one-logit gate, 60 experts of 1408
    ("qwen2_moe/Qwen1.5-MoE-A2.7B.json", {
        "mlp.shared_expert.gate_proj": [5632], "mlp.shared_expert.act_fn": [5632], "mlp.shared_expert.up_proj": [5632],
        "mlp.shared_expert.down_proj": [2048], "mlp.gate": [60], "mlp.experts.gate_up_proj": [60, 2 * 1408, 2048],
        "mlp.experts.down_proj": [60, 2048, 1408], "mlp.experts.act_fn": [1408], "mlp.shared_expert_gate": [1]}),
])
def test_moe_shapes_after_the_router_by_hand(case, expected):
    """Past the router transformers cannot run on meta tensors: the sparse block's shapes, worked out by hand from
    the config (tokens flattened into one axis, so no token axis; stacked weights as experts x out x in), and the
    block hands the decoder back (tokens, hidden)."""
    graph = structure_graph(case_config(case))
    nodes = {n["name"]: n["output_shape"] for n in graph["towers"][0]["nodes"]}
    for name, shape in expected.items():
        assert nodes[f"model.layers.0.{name}"] == shape, name
    seq = graph["towers"][0]["input"]["shape"][0]
    h = case_config(case)["hidden_size"]
    assert nodes["model.layers.1.input_layernorm"] == [seq, h] and nodes["model.norm"] == [seq, h]
    assert graph["forward_pass"] is True


@pytest.mark.parametrize("case", CASES + MOE_CASES)
def test_graph_runs_at_the_memory_estimates_input_shape(case):
    """Each tower's input is the sequence length or image the memory estimate sizes activations at."""
    config = case_config(case)
    shape = estimate(config).input
    graph = structure_graph(config)
    inputs = {t["input"]["name"]: t["input"]["shape"] for t in graph["towers"]}
    text = shape.get("text", shape)
    if "input_ids" in inputs:
        assert inputs["input_ids"] == [text["sequence_length"]]
    if "decoder_input_ids" in inputs:  # an encoder-decoder's decoder at the estimate's (target) length
        assert inputs["decoder_input_ids"] == [text["sequence_length"]]
    if "input_features" in inputs:  # Whisper's log-mel frames
        assert inputs["input_features"] == [shape["mel_bins"], shape["audio_frames"]]
    if "pixel_values" in inputs:
        v = shape["vision"]
        assert inputs["pixel_values"] == [v["channels"], v["image_size"], v["image_size"]]
    assert graph["forward_pass"] is True and graph["failure"] is None


def test_clip_has_every_tower_and_its_projections():
    """CLIP's vision tower ends in its projection (not in a LayerNorm), the text tower is there too, and the layer
    count is both towers'."""
    graph = structure_graph(case_config(CLIP))
    towers = {t["name"]: t for t in graph["towers"]}
    assert list(towers) == ["vision", "text", "similarity"]
    assert towers["vision"]["nodes"][-1] == {"name": "visual_projection", "type": "Linear", "output_shape": [512]}
    assert towers["vision"]["nodes"][-2]["type"] == "LayerNorm"
    assert towers["text"]["nodes"][-1] == {"name": "text_projection", "type": "Linear", "output_shape": [512]}
    assert (towers["vision"]["layers"], towers["text"]["layers"], graph["layers"]) == (12, 12, 24)
    assert towers["vision"]["input"] == {"name": "pixel_values", "shape": [3, 224, 224]}
    assert towers["vision"]["nodes"][0]["output_shape"] == [768, 7, 7]


@pytest.mark.parametrize("case,key,value,node", BROKEN, ids=[broken_id(c, k, v) for c, k, v, _ in BROKEN])
def test_broken_config_names_the_node_where_transformers_fails(case, key, value, node):
    """A real config with one dimension broken does not forward-pass: the graph names the first node that cannot be
    built or run and says why; transformers refused the same config when it was recorded."""
    graph = structure_graph(broken_config(case, key, value))
    assert graph["forward_pass"] is False
    assert graph["failure"]["node"] == node
    assert key.split(".")[-1] in graph["failure"]["reason"] or str(value) in graph["failure"]["reason"]
    assert graph["node_count"] == structure_graph(case_config(case))["node_count"]  # every node still listed
    assert recorded_graph("broken")[broken_id(case, key, value)]


@pytest.mark.groundtruth
@pytest.mark.parametrize("case,key,value,node", BROKEN, ids=[broken_id(c, k, v) for c, k, v, _ in BROKEN])
def test_broken_config_fails_in_transformers(case, key, value, node):
    """transformers refuses to build or run each broken config (so the graph's No is true)."""
    from graph_truth import real_failure

    assert real_failure(broken_config(case, key, value))


@pytest.mark.parametrize("key,value,node,reason", [
    ("num_attention_heads", 0, "model.rotary_emb", "num_attention_heads=0 is not a positive integer"),
    ("hidden_size", -2048, "model.embed_tokens", "hidden_size=-2048 is not a positive integer"),
    ("intermediate_size", "8192", "model.layers.0.mlp.gate_proj", "intermediate_size='8192' is not a positive"),
    ("vocab_size", None, "model.embed_tokens", "vocab_size is missing"),
])
def test_absurd_values_name_their_node_and_keep_the_rest(key, value, node, reason):
    """Zero heads, negative or non-integer widths, a missing key: the first node needing it is named, with the key,
    and the graph still lists every node."""
    config = {**case_config("llama/Llama-3.2-1B.json"), key: value}
    if value is None:
        del config[key]
    graph = structure_graph(config)
    assert graph["forward_pass"] is False
    assert graph["failure"]["node"] == node and reason in graph["failure"]["reason"]
    assert graph["towers"][0]["layers"] == 16 and graph["node_count"] == 164


def test_a_trillion_parameter_config_still_has_its_graph():
    """A config of 10^12 parameters (which the memory estimate refuses) still has a graph whose shapes are its own."""
    config = {**case_config("llama/Llama-3.2-1B.json"), "hidden_size": 400_000, "intermediate_size": 1_000_000,
              "num_attention_heads": 3125, "num_key_value_heads": 3125, "head_dim": 128}
    graph = structure_graph(config)
    assert graph["forward_pass"] is True
    assert graph["towers"][0]["nodes"][-1]["output_shape"] == [2048, 128256]


@pytest.mark.parametrize("factor", [float("nan"), float("inf"), -1.0, 0.0, 2.5])
def test_a_partial_rotary_factor_out_of_range_never_raises(factor):
    """phi-2's partial_rotary_factor NaN, infinite or outside (0, 1] (the verifier builds the graph on any config):
    the graph still comes, its rotary embedding at the full head width."""
    graph = structure_graph({**case_config("phi/phi-2.json"), "partial_rotary_factor": factor})
    assert graph["modelled"] is True and graph["node_count"] > 0


def test_more_layers_than_listed_says_so():
    """Past 1,000 layers a tower lists the first 1,000 and a note says so; the layer count is the config's."""
    graph = structure_graph({**case_config("gpt2/gpt2.json"), "n_layer": 5000})
    assert graph["towers"][0]["layers"] == 5000
    assert any("lists the first 1,000" in note for note in graph["notes"])
    assert graph["node_count"] < 10_000 + 10


def test_unmodelled_family_says_so():
    """A family without a graph builder says so instead of guessing a graph."""
    graph = structure_graph(case_config("llava/llava-1.5-7b-hf.json"))
    assert graph["modelled"] is False and graph["towers"] == [] and graph["forward_pass"] is None
    assert "'llava' is not modelled" in graph["notes"][0]


def test_collapse_shows_each_repeated_block_once():
    """The page's rows: twelve identical CLIP layers shown once as layers.0-11 with a repeat of 12."""
    vision = structure_graph(case_config(CLIP))["towers"][0]
    rows = collapse(vision["nodes"])
    names = [r["name"] for r in rows]
    assert "vision_model.encoder.layers.0-11.self_attn.q_proj" in names
    assert len(rows) == 114 - 11 * 9
    assert {r["repeat"] for r in rows} == {1, 12}


def test_collapse_keeps_a_block_that_differs():
    """A layer whose nodes differ from the one before starts a run of its own."""
    nodes = [{"name": f"m.layers.{i}.fc", "type": "Linear", "output_shape": [4, 8 if i == 2 else 4]} for i in range(4)]
    rows = collapse(nodes)
    assert [(r["name"], r["repeat"]) for r in rows] == [("m.layers.0-1.fc", 2), ("m.layers.2.fc", 1),
                                                        ("m.layers.3.fc", 1)]


def test_qwen2_moe_dense_layers_keep_a_plain_mlp():
    """Qwen2-MoE layers named in mlp_only_layers (or off the sparse step) keep the dense MLP of intermediate_size
    on (tokens, width); the others get the sparse block."""
    config = {**case_config("qwen2_moe/Qwen1.5-MoE-A2.7B.json"), "mlp_only_layers": [0], "decoder_sparse_step": 2}
    nodes = {n["name"]: n for n in structure_graph(config)["towers"][0]["nodes"]}
    assert nodes["model.layers.0.mlp.gate_proj"]["output_shape"] == [2048, 5632]
    assert nodes["model.layers.0.mlp.down_proj"]["output_shape"] == [2048, 2048]
    assert "model.layers.0.mlp.gate" not in nodes and "model.layers.1.mlp.gate" in nodes
    assert "model.layers.2.mlp.gate" not in nodes and nodes["model.layers.2.mlp.up_proj"]["type"] == "Linear"
