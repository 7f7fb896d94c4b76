"""A GGUF-only repo estimated from its headers (estimator/gguf_inputs.py): the same structure and KV cache as the
model's config.json, the weights at the GGUF's exact bytes, split files summed, several quantizations each priced."""

from __future__ import annotations

import math

import pytest
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
from serving_cases import serving_config

from estimator import estimate
from estimator.gguf_inputs import estimate_gguf, gguf_models, tensor_name
from estimator.render import render_serving

LLAMA = "configs/llama/Llama-3.1-8B.json"
# Llama-3.1-8B as llama.cpp's convert_hf_to_gguf.py writes it (bartowski/Meta-Llama-3.1-8B-Instruct-GGUF's keys)
METADATA = {"general.architecture": "llama", "general.name": "Meta Llama 3.1 8B", "general.file_type": 15,
            "llama.block_count": 32, "llama.context_length": 131072, "llama.embedding_length": 4096,
            "llama.feed_forward_length": 14336, "llama.attention.head_count": 32, "llama.attention.head_count_kv": 8,
            "llama.rope.freq_base": 500000.0, "llama.attention.layer_norm_rms_epsilon": 1e-05,
            "llama.vocab_size": 128256, "llama.rope.dimension_count": 128}


def _tensors(quant: str, layers: int = 32) -> list[dict]:
    """Llama-3.1-8B's tensors in GGUF order (innermost dimension first), `quant` for most, as llama.cpp mixes."""
    out = [("token_embd.weight", [4096, 128256], quant), ("rope_freqs.weight", [64], "F32")]
    for i in range(layers):
        p = f"blk.{i}."
        out += [(p + "attn_norm.weight", [4096], "F32"), (p + "attn_q.weight", [4096, 4096], quant),
                (p + "attn_k.weight", [4096, 1024], quant), (p + "attn_v.weight", [4096, 1024], "Q6_K"),
                (p + "attn_output.weight", [4096, 4096], quant), (p + "ffn_norm.weight", [4096], "F32"),
                (p + "ffn_gate.weight", [4096, 14336], quant), (p + "ffn_up.weight", [4096, 14336], quant),
                (p + "ffn_down.weight", [14336, 4096], "Q6_K")]
    out += [("output_norm.weight", [4096], "F32"), ("output.weight", [4096, 128256], "Q6_K")]
    return [{"name": n, "shape": s, "type": t, "offset": 0, "bytes": _bytes(s, t)} for n, s, t in out]


def _bytes(shape: list[int], type_name: str) -> int:
    """Bytes by llama.cpp's own table (the gguf package), not ours."""
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[type_name]]
    return math.prod(shape) // block * size


def _facts(quant: str = "Q4_K", file_type: str = "Q4_K_M", tensors: list[dict] | None = None,
           metadata: dict | None = None) -> dict:
    tensors = _tensors(quant) if tensors is None else tensors
    return {"format": "gguf", "architecture": "llama", "file_type": file_type, "tensors": tensors,
            "tensor_bytes": sum(t["bytes"] or 0 for t in tensors), "metadata": METADATA if metadata is None else metadata}


def test_gguf_llama_matches_its_config_json():
    """Llama-3.1-8B's GGUF gives the parameters and KV cache its config.json gives, its weights at the exact bytes."""
    facts = _facts()
    result = estimate_gguf({"Llama-3.1-8B-Q4_K_M.gguf": facts}).to_dict()
    reference = estimate(serving_config(LLAMA)).to_dict()
    assert result["parameters"]["derived"] == reference["parameters"]["derived"] == 8_030_261_248
    assert result["parameters"]["checkpoint"] == 8_030_261_248  # rope_freqs read as a buffer, not a parameter
    ours, theirs = result["serving"]["kv_cache"], reference["serving"]["kv_cache"]
    for runtime in ("transformers", "vllm"):
        assert ours[runtime]["at_context"] == theirs[runtime]["at_context"]
    weights = result["serving"]["weights"]
    assert weights["bytes"] == facts["tensor_bytes"] and "GGUF" in weights["source"]
    assert result["serving"]["full_context"] == 131072
    assert result["serving"]["gguf"]["chosen"] == "Llama-3.1-8B-Q4_K_M.gguf"


def test_tensor_names_and_shapes_follow_transformers():
    """GGUF names map to transformers' (towers and LoRA roles read them); shapes turn to torch's order."""
    manifest = gguf_models({"m.gguf": _facts()})[0].manifest()
    assert manifest["model.layers.0.mlp.down_proj.weight"] == ("Q6_K", (4096, 14336))
    assert manifest["lm_head.weight"] == ("Q6_K", (128256, 4096))
    assert tensor_name("blk.3.attn_q.weight") == "model.layers.3.self_attn.q_proj.weight"
    assert tensor_name("blk.3.ssm_in.weight") == "blk.3.ssm_in.weight"  # unmapped names are kept


def test_split_files_are_one_model():
    """The parts of a split GGUF are one model whose tensors are summed: the same estimate as the whole file."""
    whole = _facts()
    tensors = whole["tensors"]
    first = _facts(tensors=tensors[:150])
    second = _facts(tensors=tensors[150:], metadata={"split.no": 1, "split.count": 2})
    split = {"m-Q4_K_M-00001-of-00002.gguf": first, "m-Q4_K_M-00002-of-00002.gguf": second}
    (model,) = gguf_models(split)
    assert model.paths == sorted(split) and model.tensor_bytes == whole["tensor_bytes"]
    a, b = estimate_gguf(split).to_dict(), estimate_gguf({"m.gguf": whole}).to_dict()
    assert a["parameters"] == b["parameters"] and a["serving"]["weights"] == b["serving"]["weights"]


def test_a_missing_split_part_is_noted():
    """A split with a part absent is estimated from the parts present, and says so."""
    result = estimate_gguf({"m-00001-of-00003.gguf": _facts()}).to_dict()
    assert any("1 of 3 parts present" in note for note in result["notes"])


def test_several_quantizations_each_get_their_cards():
    """The largest quantization is the estimate; every quantization gets its weights and per-card verdicts."""
    files = {"m-Q4_K_M.gguf": _facts(), "m-Q8_0.gguf": _facts("Q8_0", "Q8_0"), "m-F16.gguf": _facts("F16", "F16")}
    result = estimate_gguf(files).to_dict()
    section = result["serving"]["gguf"]
    assert section["chosen"] == "m-F16.gguf" and [m["name"] for m in section["models"]] == \
        ["m-F16.gguf", "m-Q8_0.gguf", "m-Q4_K_M.gguf"]
    by_name = {m["name"]: m for m in section["models"]}
    assert [by_name[n]["weights_bytes"] for n in ("m-F16.gguf", "m-Q8_0.gguf", "m-Q4_K_M.gguf")] == \
        [files[n]["tensor_bytes"] for n in ("m-F16.gguf", "m-Q8_0.gguf", "m-Q4_K_M.gguf")]
    t4 = {n: m["cards"]["T4 16GB"]["concurrency"]["8192"] for n, m in by_name.items()}
    assert t4["m-F16.gguf"] == 0 and t4["m-Q4_K_M.gguf"] > t4["m-Q8_0.gguf"]
    assert result["serving"]["weights"]["bytes"] == files["m-F16.gguf"]["tensor_bytes"]
    text = render_serving(result["serving"])
    assert "GGUF models (the figures above are m-F16.gguf's, the largest)" in text and "m-Q4_K_M.gguf  Q4_K_M" in text


def test_sliding_window_context_from_the_header():
    """A header's context length and sliding window reach the cache: a smaller window, a smaller cache."""
    metadata = {**METADATA, "llama.context_length": 8192}
    short = estimate_gguf({"m.gguf": _facts(metadata=metadata)}).to_dict()["serving"]
    assert short["full_context"] == 8192 and "131072" not in short["kv_cache"]["vllm"]["at_context"]


@pytest.mark.parametrize(("metadata", "tensors", "words"), [
    ({}, None, "general.architecture is missing"),
    ({"general.architecture": "llama", "llama.context_length": 4096}, None, "block_count is missing"),
])
def test_bad_headers_are_noted_not_raised(metadata, tensors, words):
    """A header without its architecture or block count still gives what the tensors say, with the reason noted."""
    result = estimate_gguf({"m.gguf": _facts(metadata=metadata, tensors=tensors)}).to_dict()
    assert any(words in note for note in result["notes"])
    assert result["serving"]["weights"]["bytes"] == _facts()["tensor_bytes"]


def test_unknown_tensor_type_is_left_out_with_a_note():
    """A tensor whose ggml type has no known size is not counted, and the note says so."""
    tensors = _tensors("Q4_K")
    tensors[2] = {**tensors[2], "type": "unknown(77)", "bytes": None}
    facts = {**_facts(tensors=tensors), "tensor_bytes": None}
    result = estimate_gguf({"m.gguf": facts}).to_dict()
    assert any("no known size" in note for note in result["notes"])
    assert result["serving"]["gguf"]["models"][0]["weights_bytes"] is None


def test_no_gguf_is_no_estimate():
    """Scans with no tensors and no metadata are not a model."""
    assert estimate_gguf({"m.gguf": {"format": "gguf", "tensors": [], "metadata": {}}}) is None


def test_a_partly_read_header_is_noted():
    """A header the reader could not finish is estimated from what was read, and the estimate says so."""
    facts = {**_facts(), "note": "truncated at byte 4,096"}
    result = estimate_gguf({"m.gguf": facts}).to_dict()
    assert any("header not fully read (truncated at byte 4,096)" in note for note in result["notes"])


def _hybrid_gguf(arch: str, path: str) -> dict:
    """A hybrid's GGUF header as llama.cpp's converter writes it from the fixture's config.json: per-layer K/V heads
    (0 where no attention), per-layer feed-forward widths for Nemotron-H (0 on its mamba and attention layers), the
    SSM under ssm.* (inner size, heads as time_step_rank, groups), the attention's head width as key_length."""
    config = serving_config(path)
    if arch == "nemotron_h":
        pattern = config["hybrid_override_pattern"]
        kv = [config["num_key_value_heads"] if p == "*" else 0 for p in pattern]
        ff = [config["intermediate_size"] if p == "-" else 0 for p in pattern]
        ssm = {"conv_kernel": config["conv_kernel"], "state_size": config["ssm_state_size"],
               "inner_size": config["mamba_num_heads"] * config["mamba_head_dim"], "group_count": config["n_groups"],
               "time_step_rank": config["mamba_num_heads"]}
        head_dim = config["attention_head_dim"]
    else:
        kv = [config["num_key_value_heads"] if t == "attention" else 0 for t in config["layer_types"]]
        ff = config["shared_intermediate_size"]
        ssm = {"conv_kernel": config["mamba_d_conv"], "state_size": config["mamba_d_state"],
               "inner_size": config["mamba_n_heads"] * config["mamba_d_head"], "group_count": config["mamba_n_groups"],
               "time_step_rank": config["mamba_n_heads"]}
        head_dim = config["hidden_size"] // config["num_attention_heads"]
    metadata = {"general.architecture": arch, f"{arch}.block_count": config["num_hidden_layers"],
                f"{arch}.embedding_length": config["hidden_size"], f"{arch}.feed_forward_length": ff,
                f"{arch}.attention.head_count": config["num_attention_heads"], f"{arch}.attention.head_count_kv": kv,
                f"{arch}.attention.key_length": head_dim, f"{arch}.attention.value_length": head_dim,
                f"{arch}.context_length": config["max_position_embeddings"]}
    metadata.update({f"{arch}.ssm.{k}": v for k, v in ssm.items()})
    return metadata


@pytest.mark.parametrize(("arch", "path"), [
    ("nemotron_h", "serving/nemotron_h/Nemotron-H-8B-Base-8K.json"),
    ("granitehybrid", "serving/granitemoehybrid/granite-4.0-h-small.json"),
])
def test_a_hybrid_gguf_prices_the_cache_as_its_config_json(arch, path):
    """A hybrid's GGUF header gives the cache its config.json gives, per runtime: Nemotron-H's MLP-only layers keep
    nothing (not a mamba state), and the SSM's head width is the SSM's (inner size / heads), not the attention's."""
    from estimator.gguf_inputs import config_from_gguf
    from estimator.kv_cache import layout

    from_gguf, notes = config_from_gguf(_hybrid_gguf(arch, path))
    assert not [n for n in notes if n.startswith("unknown")], notes
    gguf, json_ = layout(from_gguf), layout(serving_config(path))
    for runtime in ("transformers", "vllm"):
        assert gguf.fixed_bytes(runtime, 2) == json_.fixed_bytes(runtime, 2)
        assert gguf.at_context(runtime, 8192, 2) == json_.at_context(runtime, 8192, 2)
