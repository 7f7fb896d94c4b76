"""The module graph of every tower equals what transformers builds and runs: each node's module path, class and output
shape, against the graphs recorded from transformers on the meta device (tests/estimator/record_graph.py), and live
under `-m groundtruth`; a broken copy of a real config names the node where transformers fails too."""

from __future__ import annotations

import pytest
from estimator_configs import REFUSED, case_config
from graph_cases import (
    BROKEN,
    CASES,
    HEADS,
    MOE_CASES,
    VARIANTS,
    broken_config,
    broken_id,
    head_config,
    head_id,
    recorded_graph,
    variant_config,
)

from estimator import EstimateError, estimate
from estimator.graph import PARAMETER, collapse, structure_graph
from estimator.graph_heads import FAMILY_HEADS, IMAGE, QA, SEQ, TOKEN

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


@pytest.mark.parametrize("case", [c for c in CASES + MOE_CASES if c not in REFUSED])
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


@pytest.mark.parametrize("case,key", sorted(REFUSED.items()))
def test_a_config_the_estimate_refuses_still_has_its_graph(case, key):
    """DINOv2-giant's SwiGLU MLP is not in the memory estimate's ledger, which says so naming the key; the graph
    (checked against transformers above) still goes through."""
    with pytest.raises(EstimateError) as refused:
        estimate(case_config(case))
    assert key in str(refused.value)
    graph = structure_graph(case_config(case))
    assert graph["modelled"] is True and graph["forward_pass"] is True


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
    graph = structure_graph({"model_type": "rwkv", "architectures": ["RwkvForCausalLM"], "hidden_size": 2048})
    assert graph["modelled"] is False and graph["towers"] == [] and graph["forward_pass"] is None
    assert "'rwkv' is not modelled" in graph["notes"][0]


# ---- task heads --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case,arch,extra", HEADS, ids=[head_id(c, a) for c, a, _ in HEADS])
def test_head_graph_equals_the_recorded_transformers_graph(case, arch, extra):
    """A task head named by `architectures` (sequence or token classification, question answering, image
    classification): the base model under the head's prefix, then the head's nodes, equal what transformers
    recorded; no note calls the head unmodelled."""
    config = head_config(case, arch, extra)
    assert _ours(config) == recorded_graph("heads")[head_id(case, arch)]
    assert not any("not modelled" in note for note in structure_graph(config)["notes"])


def test_every_head_case_has_its_recorded_graph():
    assert sorted(recorded_graph("heads")) == sorted(head_id(c, a) for c, a, _ in HEADS)


def test_every_head_in_the_table_is_checked():
    """Each (family, head) graph_heads claims has a case checked against transformers."""
    claimed = {(family, kind) for family, kinds in FAMILY_HEADS.items() for kind in kinds}
    checked = {(case_config(c)["model_type"], next(k for k in (SEQ, TOKEN, QA, IMAGE) if a.endswith(k)))
               for c, a, _ in HEADS}
    assert claimed == checked


@pytest.mark.groundtruth
@pytest.mark.parametrize("case,arch,extra", HEADS, ids=[head_id(c, a) for c, a, _ in HEADS])
def test_head_graph_equals_transformers(case, arch, extra):
    from graph_truth import real_graph

    config = head_config(case, arch, extra)
    assert _ours(config) == real_graph(config)


@pytest.mark.groundtruth
def test_the_head_table_is_transformers_own():
    """graph_heads lists, per family, exactly the text heads transformers defines for it (and image classification
    for CLIP and SigLIP): a head it lacks is not claimed, one it has is not left out (the mixture-of-experts families
    are left out on purpose: their forward does not run on meta tensors)."""
    import transformers

    for family, kinds in FAMILY_HEADS.items():
        prefix = type(transformers.AutoConfig.for_model(family)).__name__.removesuffix("Config")
        for kind in (SEQ, TOKEN, QA, IMAGE):
            exists = hasattr(transformers, prefix + kind) and (family, kind) not in UNCHECKABLE_HEADS
            assert exists == (kind in kinds), (family, kind)


# Heads transformers has whose forward cannot run on meta tensors (the encoder-decoders' sequence classifiers find
# the end-of-sequence tokens with unique_consecutive): left "not modelled" rather than unchecked.
UNCHECKABLE_HEADS = {("t5", SEQ), ("bart", SEQ)}


def test_an_uncheckable_head_says_it_is_not_modelled():
    config = {**case_config("bart/bart-base.json"), "architectures": ["BartForSequenceClassification"]}
    assert "the head of BartForSequenceClassification is not modelled: the graph is the base model's" in (
        structure_graph(config)["notes"])


@pytest.mark.parametrize("case,arch,labels", [
    ("bert/bert-base-uncased.json", "BertForTokenClassification", 9),
    ("roberta/roberta-base.json", "RobertaForSequenceClassification", 3),
    ("distilbert/distilbert-base-uncased.json", "DistilBertForSequenceClassification", 5),
    ("clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json", "CLIPForImageClassification", 1000),
    ("llama/Llama-3.2-1B.json", "LlamaForSequenceClassification", 2),
])
def test_classifiers_output_the_configs_labels(case, arch, labels):
    """The classifier's width is id2label's size, else num_labels, else transformers' default of 2."""
    extra = next(x for c, a, x in HEADS if (c, a) == (case, arch))
    last = structure_graph(head_config(case, arch, extra))["towers"][0]["nodes"][-1]
    assert last["type"] == "Linear" and last["output_shape"][-1] == labels


def test_a_head_transformers_lacks_keeps_the_base_graph_and_says_so():
    """GemmaForQuestionAnswering is not a transformers class: the graph is the base model's, with a note."""
    config = {**case_config("gemma/gemma-2b.json"), "architectures": ["GemmaForQuestionAnswering"]}
    graph = structure_graph(config)
    assert "the head of GemmaForQuestionAnswering is not modelled: the graph is the base model's" in graph["notes"]
    assert graph["towers"][0]["nodes"][-1]["name"] == "model.norm"


# ---- LLaVA -------------------------------------------------------------------------------------------------------

LLAVA = "llava/llava-1.5-7b-hf.json"


def test_llava_has_its_three_towers():
    """LLaVA-1.5: the CLIP ViT-L/14 tower on a 336 px image (577 tokens), the projector on the 576 patch features of
    the second-to-last layer (class token dropped), the Vicuna language model on the text; 24 + 32 layers."""
    graph = structure_graph(case_config(LLAVA))
    towers = {t["name"]: t for t in graph["towers"]}
    assert list(towers) == ["vision", "projection", "text"]
    assert towers["vision"]["input"] == {"name": "pixel_values", "shape": [3, 336, 336]}
    assert towers["projection"]["input"] == {"name": "image_features", "shape": [576, 1024]}
    assert [n["name"] for n in towers["projection"]["nodes"]] == [
        "model.multi_modal_projector.linear_1", "model.multi_modal_projector.act", "model.multi_modal_projector.linear_2"]
    assert towers["projection"]["output_shape"] == [576, 4096]
    assert towers["text"]["nodes"][-1] == {"name": "lm_head", "type": "Linear", "output_shape": [2048, 32064]}
    assert (towers["vision"]["layers"], towers["text"]["layers"], graph["layers"]) == (24, 32, 56)
    assert graph["forward_pass"] is True


@pytest.mark.parametrize("edit,shape", [
    ({"vision_feature_select_strategy": "full"}, [577, 1024]),      # the class token kept
    ({"vision_feature_layer": [-2, -5]}, [576, 2048]),               # two layers' features side by side
])
def test_llava_projector_reads_the_features_the_config_selects(edit, shape):
    config = {**case_config(LLAVA), **edit}
    projection = structure_graph(config)["towers"][1]
    assert projection["input"]["shape"] == shape and projection["output_shape"] == [shape[0], 4096]


@pytest.mark.parametrize("edit,node,reason", [
    ({"vision_feature_layer": -30}, "model.multi_modal_projector.linear_1", "vision_feature_layer=-30"),
    ({"text_config": {**case_config(LLAVA)["text_config"], "max_position_embeddings": 512}},
     "model.language_model.embed_tokens", "512 text tokens cannot hold the 576 image features"),
])
def test_llava_that_cannot_run_names_its_node(edit, node, reason):
    """A feature layer the vision tower does not have, or a text window shorter than the image's features: no
    forward pass, at the node that cannot run."""
    graph = structure_graph({**case_config(LLAVA), **edit})
    assert graph["forward_pass"] is False
    assert graph["failure"]["node"] == node and reason in graph["failure"]["reason"]


def test_llava_with_a_vision_tower_not_modelled_says_so():
    config = {**case_config(LLAVA), "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152}}
    graph = structure_graph(config)
    assert graph["modelled"] is False and graph["towers"] == []
    assert "vision tower 'siglip_vision_model' is not modelled" in graph["notes"][0]


# ---- branches checked on a real config with one key changed --------------------------------------------------------

@pytest.mark.parametrize("case,key,value", VARIANTS, ids=[broken_id(*v) for v in VARIANTS])
def test_variant_graph_equals_the_recorded_transformers_graph(case, key, value):
    assert _ours(variant_config(case, key, value)) == recorded_graph("variants")[broken_id(case, key, value)]


@pytest.mark.groundtruth
@pytest.mark.parametrize("case,key,value", VARIANTS, ids=[broken_id(*v) for v in VARIANTS])
def test_variant_graph_equals_transformers(case, key, value):
    from graph_truth import real_graph

    assert _ours(variant_config(case, key, value)) == real_graph(variant_config(case, key, value))


def test_swiglu_dinov2_and_alibi_falcon_by_hand():
    """DINOv2-giant's SwiGLU keeps two thirds of 4 x 1536 rounded up to a multiple of 8 (4096), SiLU on the gate;
    Falcon-RW-1B (ALiBi, no parallel block) has a full 3 x 2048 qkv, a post-attention norm and no dropout module
    under SDPA."""
    giant = {n["name"]: n for n in structure_graph(case_config("dinov2/dinov2-giant.json"))["towers"][0]["nodes"]}
    assert giant["encoder.layer.0.mlp.gate_proj"]["output_shape"] == [1370, 4096]
    assert giant["encoder.layer.0.mlp.act_fn"]["type"] == "SiLUActivation"
    assert giant["encoder.layer.39.mlp.down_proj"]["output_shape"] == [1370, 1536]
    rw = {n["name"]: n for n in structure_graph(case_config("falcon/falcon-rw-1b.json"))["towers"][0]["nodes"]}
    assert rw["transformer.h.0.self_attention.query_key_value"]["output_shape"] == [2048, 6144]
    assert "transformer.h.0.post_attention_layernorm" in rw
    assert not any("attention_dropout" in name for name in rw)


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
