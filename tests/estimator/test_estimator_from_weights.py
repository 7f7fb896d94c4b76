"""Custom code: the structure read off the weight manifest, its twin of a stock family, and bad manifests."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from estimator_configs import load_config
from test_estimator_manifest import manifest_of

from estimator import at_batch, estimate, render_table
from estimator.from_weights import structure_from_weights
from estimator.manifest import count_manifest

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "tests/fixtures/estimator/manifests"
JINA_CONFIG = ROOT / "tracker/standins/replay/histories/jinaai/jina-clip-v2/commits/0002-upload-jinaclipmodel/files/config.json"
MODES = ("inference", "full_finetune", "lora", "qlora", "full_finetune_gc", "lora_gc", "qlora_gc")


def load_manifest(name: str) -> dict:
    return {k: tuple(v) for k, v in json.loads((MANIFESTS / name).read_text()).items()}


def internlm2() -> tuple[dict, dict]:
    return load_config("custom/internlm2_5-7b-chat.json"), load_manifest("internlm2_5-7b-chat.json")


def test_jina_clip_v2_gets_every_memory_figure_from_its_weights():
    """jina-clip-v2 (custom code, real safetensors header): both towers read off the weights, every mode
    sized, the source and each assumption stated, and the table has no unknown row."""
    config = json.loads(JINA_CONFIG.read_text())
    result = estimate(config, load_manifest("jina-clip-v2.json"))
    p = result.parameters
    assert p["used"] == "checkpoint" and p["derived"] is None and p["total"] == p["checkpoint"] == 865_274_377
    assert sum(p["by_tower"].values()) == p["total"] and set(p["by_tower"]) == {"text", "vision", "projection"}
    assert result.input["structure_source"] == "weights"
    assert result.input["vision"]["tokens"] == 1297  # 512 / 14 = 36 patches a side, and the class token
    for mode in MODES:
        assert isinstance(result.memory[mode]["per_sample_bytes"], int) and result.memory[mode]["per_sample_bytes"] > 0
        assert isinstance(result.memory[mode]["batch_1_bytes"], int)
    assert not any("activations unknown" in n for n in result.notes)
    derived = next(n for n in result.notes if n.startswith("structure derived from the weight manifest"))
    assert "text_model.transformer.roberta.encoder.layers: 24 x 1024" in derived
    assert "vision_model.blocks: 24 x 1024" in derived and "1297 tokens" in derived
    assumed = [n for n in result.notes if n.startswith("assumed: ")]
    assert any("sequence length" in n for n in assumed) and any("head size 64" in n for n in assumed)
    table = render_table(result)
    memory_rows = table.split("Memory at batch 1")[1].split("includes a")[0]
    assert " - " not in memory_rows and "activations unknown" not in table
    assert "read from the weight manifest" in table
    assert all(isinstance(v, int) for row in result.cards.values() for v in row["max_batch"].values())


def test_jina_clip_v2_ledger_matches_the_manifest_count():
    """Every tensor of the real header lands in the structure's ledger exactly once."""
    config = json.loads(JINA_CONFIG.read_text())
    manifest = load_manifest("jina-clip-v2.json")
    counted = count_manifest(manifest)
    s, reason = structure_from_weights(config, manifest, counted, 2048)
    assert s is not None and reason == ""
    assert s.total == counted.parameters
    assert [(st.tower, st.layers, st.hidden, st.tokens) for st in s.stacks] == [
        ("text", 24, 1024, 2048), ("vision", 24, 1024, 1297)]
    assert s.lora_linear_dims > 0 and s.quantizable > 0 and not s.stacks[0].kv_per_token  # encoders: no KV cache


@pytest.mark.parametrize("mode", ["full_finetune", "lora", "qlora", "inference", "lora_gc"])
def test_internlm2_custom_code_is_within_ten_percent_of_its_llama_twin(mode: str):
    """InternLM2 (custom code, llama layout with a fused wqkv) read off its weights comes out within 10% of
    the Llama config of the same widths, at batch 1 and 4."""
    config, manifest = internlm2()
    result = estimate(config, manifest).to_dict()
    twin = {k: v for k, v in config.items() if k not in ("auto_map", "bias", "attn_implementation", "pretraining_tp")}
    twin.update(model_type="llama", architectures=["LlamaForCausalLM"])
    stock = estimate(twin).to_dict()
    assert result["parameters"]["total"] == stock["parameters"]["total"] == 7_737_708_544
    for batch in (1, 4):
        ours, theirs = (at_batch(r, mode, batch)["peak_bytes"] for r in (result, stock))
        assert abs(ours - theirs) <= 0.10 * theirs, (mode, batch, ours, theirs)


def test_phi3_custom_code_matches_the_stock_phi3_exactly():
    """Phi-3-mini ships modeling_phi3.py: read off its manifest, every mode equals the stock phi3 builder's."""
    config = load_config("custom/Phi-3-mini-4k-instruct.json")
    stock = {k: v for k, v in config.items() if k != "auto_map"}
    manifest = manifest_of("custom/Phi-3-mini-4k-instruct.json")
    ours, theirs = estimate(config, manifest), estimate(stock, manifest)
    assert ours.parameters["derived"] is None and ours.parameters["total"] == 3_821_079_552
    for mode in MODES:
        assert ours.memory[mode]["phases"] == theirs.memory[mode]["phases"], mode


@pytest.mark.parametrize("path", ["gpt2/gpt2.json", "qwen3/Qwen3-0.6B.json", "bert/bert-base-uncased.json",
                                  "clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json"])
def test_stock_layouts_read_off_their_weights_agree_with_their_builders(path: str):
    """A stock model marked as custom code, read off transformers' own weight names: full fine-tuning's
    activations within 5% of the family builder's (a tied head found, QK norms and two towers read)."""
    stock = load_config(path)
    manifest = manifest_of(path)
    ours = estimate({**stock, "auto_map": {"AutoModel": "modeling.Custom"}}, manifest)
    theirs = estimate(stock, manifest)
    assert ours.input["structure_source"] == "weights"
    mine, builder = (r.memory["full_finetune"]["per_sample_bytes"] for r in (ours, theirs))
    assert abs(mine - builder) <= 0.05 * builder, (mine, builder)


def test_manifest_without_blocks_gives_fixed_bytes_and_the_reason():
    """No repeated blocks: weights, gradients and optimizer state, and 'activations unknown' with why."""
    manifest = {"backbone.embeddings.weight": ("BF16", (50288, 768)), "backbone.mixer.in_proj.weight": ("BF16", (3072, 768))}
    result = estimate({"model_type": "mamba2"}, manifest)
    assert result.memory["full_finetune"]["per_sample_bytes"] is None
    assert result.memory["full_finetune"]["floor_bytes"] > 20 * result.total
    [note] = [n for n in result.notes if n.startswith("activations unknown")]
    assert "no repeated blocks" in note


def test_inconsistent_layers_name_the_tensor_and_still_give_figures():
    """One layer whose gate projection differs: a note names it, each set of layers is stacked, no exception."""
    config, manifest = internlm2()
    manifest["model.layers.5.feed_forward.w1.weight"] = ("BF16", (7168, 4096))
    result = estimate(config, manifest)
    [note] = [n for n in result.notes if n.startswith("inconsistent shapes")]
    assert "model.layers.5.feed_forward.w1.weight is [7168, 4096]" in note and "[14336, 4096]" in note
    assert isinstance(result.memory["full_finetune"]["per_sample_bytes"], int)


def test_zero_size_tensors_are_noted_and_left_out():
    """A zero-size tensor holds nothing: noted by name, the figures stay; a zero-size output projection
    leaves its layer unreadable, which the notes say."""
    config, manifest = internlm2()
    extra = {**manifest, "model.layers.0.attention.rotary_emb.weight": ("BF16", (0,))}
    result = estimate(config, extra)
    assert any("zero-size" in n and "rotary_emb" in n for n in result.notes)
    assert isinstance(result.memory["lora"]["per_sample_bytes"], int)
    broken = copy.deepcopy(manifest)
    for i in range(32):
        broken[f"model.layers.{i}.attention.wo.weight"] = ("BF16", (4096, 0))
    result = estimate(config, broken)
    assert result.memory["lora"]["per_sample_bytes"] is None
    reason = next(n for n in result.notes if n.startswith("activations unknown"))
    assert "output projection" in reason


@pytest.mark.parametrize("manifest", [
    {"model.layers.0.self_attn.q_proj.weight": ("BF16", (64, 64))},
    {"layers.0.norm.weight": ("F32", (64,))},
    {"h.0.attn.c_attn.weight": ("F32", (64, 192)), "h.0.attn.c_proj.weight": ("F32", (64, 64)), "wte.weight": ("F32", (10, 64))},
    {"blocks.0.x": ("F32", ()), "blocks.1.x": ("F32", (3,))},
])
def test_a_few_odd_tensors_never_raise(manifest: dict):
    """Tiny or strange manifests: figures where they can be read, otherwise the reason; never an exception."""
    result = estimate({"auto_map": {"AutoModel": "m.M"}}, manifest)
    assert result.parameters["total"] == count_manifest(manifest).parameters
    figures = result.memory["full_finetune"]["per_sample_bytes"] is not None
    assert figures or any(n.startswith("activations unknown: ") for n in result.notes)


def moe_manifest(layers: int, experts: int, hidden: int = 64, inner: int = 32) -> dict:
    """A per-expert checkpoint in Qwen3-MoE's names: attention, QK norms, a router and every expert apart."""
    out = {"model.embed_tokens.weight": ("BF16", (1000, hidden))}
    for i in range(layers):
        p = f"model.layers.{i}."
        out.update({p + "input_layernorm.weight": ("BF16", (hidden,)),
                    p + "self_attn.q_proj.weight": ("BF16", (hidden, hidden)),
                    p + "self_attn.k_proj.weight": ("BF16", (hidden // 4, hidden)),
                    p + "self_attn.v_proj.weight": ("BF16", (hidden // 4, hidden)),
                    p + "self_attn.o_proj.weight": ("BF16", (hidden, hidden)),
                    p + "self_attn.q_norm.weight": ("BF16", (16,)),
                    p + "self_attn.k_norm.weight": ("BF16", (16,)),
                    p + "post_attention_layernorm.weight": ("BF16", (hidden,)),
                    p + "mlp.gate.weight": ("BF16", (experts, hidden))})
        for e in range(experts):
            out.update({f"{p}mlp.experts.{e}.gate_proj.weight": ("BF16", (inner, hidden)),
                        f"{p}mlp.experts.{e}.up_proj.weight": ("BF16", (inner, hidden)),
                        f"{p}mlp.experts.{e}.down_proj.weight": ("BF16", (hidden, inner))})
    out["model.norm.weight"] = ("BF16", (hidden,))
    out["lm_head.weight"] = ("BF16", (1000, hidden))
    return out


def test_per_expert_checkpoint_is_read_as_one_stack_of_its_experts():
    """Thousands of per-expert tensors (12 layers of 128 experts): one stack of 12 identical layers, every
    expert in the ledger, the router left out of LoRA; the manifest is not changed by reading it. (What this
    costs is measured in benchmarks/bench_estimator.py, never here.)"""
    manifest = moe_manifest(12, 128)
    before = dict(manifest)
    config = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "num_attention_heads": 4,
              "num_experts_per_tok": 8, "max_position_embeddings": 4096, "tie_word_embeddings": False}
    counted = count_manifest(manifest)
    assert counted.tensors == len(manifest) == 3 + 12 * (9 + 3 * 128)
    assert counted.role_dims["gate_proj"] == counted.role_dims["up_proj"] == counted.role_dims["down_proj"] \
        == 12 * 128 * (32 + 64)
    s, reason = structure_from_weights(config, manifest, counted, 2048)
    assert s is not None and reason == "" and s.total == counted.parameters
    assert [(st.name, st.layers, st.hidden) for st in s.stacks] == [("model.layers", 12, 64)]
    assert any("128 experts" in n for n in s.notes) and not any("inconsistent" in n for n in s.notes)
    assert manifest == before


def test_a_plain_mlp_read_off_weights_gets_the_lora_and_qlora_terms_of_its_builder():
    """gpt2 (LayerNorm, plain GELU MLP) as custom code: LoRA and QLoRA keep what its builder says (QLoRA's
    fp32 activation behind a 4-bit fc1), not full fine-tuning's figure less the adapters alone."""
    stock = load_config("gpt2/gpt2.json")
    manifest = manifest_of("gpt2/gpt2.json")
    ours = estimate({**stock, "auto_map": {"AutoModel": "modeling.Custom"}}, manifest)
    theirs = estimate(stock, manifest)
    for mode in ("lora", "qlora"):
        mine, builder = (r.memory[mode]["per_sample_bytes"] for r in (ours, theirs))
        assert abs(mine - builder) <= 0.05 * builder, (mode, mine, builder)
    assert ours.memory["qlora"]["per_sample_bytes"] > ours.memory["lora"]["per_sample_bytes"]
