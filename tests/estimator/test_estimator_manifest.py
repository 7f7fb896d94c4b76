"""Counting the checkpoint's manifest beside the derived count: buffers, quantization, custom code."""

from __future__ import annotations

import copy

import pytest
from estimator_configs import load_config, recorded

from estimator import EstimateError, estimate
from estimator.manifest import count_manifest

# The configs whose checkpoints these tests (and test_estimator_from_weights) write, as transformers would save
# them (recorded by record_truth.py).
MANIFEST_CONFIGS = ["clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json", "gpt2/gpt2.json", "t5/flan-t5-base.json",
                    "llama/Llama-3.2-1B.json", "custom/Phi-3-mini-4k-instruct.json", "whisper/whisper-tiny.json",
                    "qwen3/Qwen3-0.6B.json", "bert/bert-base-uncased.json"]


def manifest_of(path: str, dtype: str = "BF16") -> dict:
    """What save_pretrained would write for the fixture config `path` (a custom-code one without its
    auto_map): each parameter once (tied ones once) in `dtype`, and persistent buffers (int64 or fp32)."""
    tensors = recorded("manifests")[path]
    kinds = {"param": dtype, "int_buffer": "I64", "float_buffer": "F32"}
    return {name: (kinds[kind], tuple(shape)) for name, (kind, shape) in tensors.items()}


def test_every_checkpoint_written_here_is_recorded():
    """The recorded manifests are those of the configs used here, none empty."""
    manifests = recorded("manifests")
    assert sorted(manifests) == sorted(MANIFEST_CONFIGS) and all(manifests.values())


def test_clip_checkpoint_with_integer_position_ids_matches_the_derived_count():
    """Stored int64 position_ids are buffers: the CLIP checkpoint reconciles to 151,277,313 exactly."""
    config = load_config("clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json")
    manifest = manifest_of("clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json", "F32")
    manifest["text_model.embeddings.position_ids"] = ("I64", (1, 77))
    manifest["vision_model.embeddings.position_ids"] = ("I64", (1, 50))
    p = estimate(config, manifest).parameters
    assert p["checkpoint"] == p["derived"] == 151_277_313
    assert p["delta"] == {"parameters": 0, "percent": 0.0} and p["used"] == "derived"
    assert p["checkpoint_detail"]["buffers"] == 127
    assert p["by_dtype"] == {"F32": 151_277_313, "I64": 127}


def test_gpt2_stored_attention_masks_are_not_parameters():
    """GPT-2's stored attn.bias masks (12.6M floats) are buffers, so the checkpoint count stays 124,439,808."""
    config = load_config("gpt2/gpt2.json")
    manifest = manifest_of("gpt2/gpt2.json", "F32")
    for i in range(12):
        manifest[f"h.{i}.attn.bias"] = ("F32", (1, 1, 1024, 1024))
    p = estimate(config, manifest).parameters
    assert p["checkpoint"] == 124_439_808 and p["delta"]["parameters"] == 0


def test_t5_v11_checkpoint_keeps_lm_head_apart():
    """flan-T5 stores lm_head beside the shared embeddings; the derived count agrees with that checkpoint."""
    config = load_config("t5/flan-t5-base.json")
    manifest = manifest_of("t5/flan-t5-base.json")
    manifest["lm_head.weight"] = ("BF16", (32128, 768))
    p = estimate(config, manifest).parameters
    assert p["checkpoint"] == p["derived"] == 247_577_856


def test_edited_config_is_caught_by_the_manifest():
    """A copy of config.json shrunk to 12 layers contradicts the real checkpoint: warned, checkpoint used."""
    real = load_config("llama/Llama-3.2-1B.json")
    edited = copy.deepcopy(real)
    edited["num_hidden_layers"] = 12
    result = estimate(edited, manifest_of("llama/Llama-3.2-1B.json"))
    p = result.parameters
    assert p["used"] == "checkpoint" and p["total"] == 1_235_814_400
    assert p["derived"] < p["checkpoint"] and p["delta"]["parameters"] == p["checkpoint"] - p["derived"]
    assert any("does not match the checkpoint" in w for w in result.warnings)


def test_quantized_checkpoint_keeps_the_derived_count():
    """GPTQ packs weights into int32: element counts are not parameters, so the derived count is used."""
    config = load_config("llama/Llama-3.2-1B.json")
    manifest = {"model.layers.0.self_attn.q_proj.qweight": ("I32", (256, 2048)),
                "model.layers.0.self_attn.q_proj.scales": ("F16", (16, 2048)),
                "model.embed_tokens.weight": ("F16", (128256, 2048))}
    result = estimate(config, manifest)
    assert result.parameters["used"] == "derived" and result.parameters["checkpoint_detail"]["quantized"]
    assert any("quantized" in note for note in result.notes)


def test_custom_code_without_a_manifest_says_it_cannot_derive():
    """jina-clip-v2's auto_map config gives no figures and a plain note, never a stock-architecture guess."""
    result = estimate(load_config("custom/jina-clip-v2-like.json"))
    assert result.parameters["total"] is None and result.parameters["derived"] is None
    assert result.memory == {} and result.cards == {}
    assert any("cannot be derived" in note for note in result.notes)


def test_custom_code_is_counted_from_its_manifest():
    """With its manifest, a jina-clip-like repo comes out at the manifest's total, by tower (within 0.1%)."""
    manifest = {
        "text_model.roberta.embeddings.word_embeddings.weight": ("BF16", (250002, 1024)),
        "text_model.roberta.encoder.layers.0.mixer.Wqkv.weight": ("BF16", (3072, 1024)),
        "vision_model.blocks.0.attn.qkv.weight": ("BF16", (3072, 1024)),
        "vision_model.patch_embed.proj.weight": ("BF16", (1024, 3, 14, 14)),
        "logit_scale": ("F32", ()),
    }
    result = estimate(load_config("custom/jina-clip-v2-like.json"), manifest)
    p = result.parameters
    expected = 250002 * 1024 + 2 * 3072 * 1024 + 1024 * 3 * 14 * 14 + 1
    assert p["total"] == p["checkpoint"] == expected and p["used"] == "checkpoint"
    assert abs(p["total"] - expected) <= expected * 0.001
    assert set(p["by_tower"]) == {"text", "vision", "projection"}
    assert result.memory["full_finetune"]["per_sample_bytes"] is None


def test_custom_code_of_a_stock_family_is_not_read_as_stock():
    """Phi-3-mini ships modeling_phi3.py: counted from its manifest (3,821,079,552), never derived."""
    config = load_config("custom/Phi-3-mini-4k-instruct.json")
    p = estimate(config, manifest_of("custom/Phi-3-mini-4k-instruct.json")).parameters
    assert p["derived"] is None and p["total"] == 3_821_079_552


def test_unknown_model_type_with_a_manifest_is_counted_from_it():
    """An architecture the estimator does not model is counted from the manifest, with a note."""
    result = estimate({"model_type": "mamba2"}, {"backbone.embeddings.weight": ("BF16", (50288, 768))})
    assert result.total == 50288 * 768
    assert any("not modelled" in note for note in result.notes)


def test_whisper_manifest_splits_audio_and_text():
    """A Whisper checkpoint's encoder counts as the audio tower, its decoder as text."""
    config = load_config("whisper/whisper-tiny.json")
    result = estimate(config, manifest_of("whisper/whisper-tiny.json", "F32"))
    assert result.parameters["delta"]["parameters"] == 0
    assert set(result.parameters["by_tower"]) == {"audio", "text"}


@pytest.mark.parametrize("manifest,key", [
    ([("a", ("BF16", (1,)))], "manifest"),
    ({}, "manifest"),
    ({"w": ("BF17", (2, 2))}, "manifest['w']"),
    ({"w": ("BF16", (2, -1))}, "manifest['w']"),
    ({"w": ("BF16", "2x2")}, "manifest['w']"),
    ({"w": ("BF16",)}, "manifest['w']"),
    ({"w": ("BF16", (2, True))}, "manifest['w']"),
    ({"w": ("BF16", (10**13,))}, "manifest['w']"),
])
def test_malformed_manifest_names_the_tensor(manifest, key):
    """A malformed manifest raises EstimateError naming the manifest or the tensor at fault."""
    with pytest.raises(EstimateError) as err:
        estimate(load_config("gpt2/gpt2.json"), manifest)
    assert err.value.key == key


def test_the_first_malformed_entry_in_the_manifest_is_the_one_named():
    """Several bad entries among good ones: the error names the first in the manifest's order."""
    manifest = {f"model.layers.{i}.mlp.up_proj.weight": ("BF16", (8, 4)) for i in range(50)}
    manifest["model.layers.20.mlp.up_proj.weight"] = ("BF16", (8, 4.0))
    manifest["model.layers.30.mlp.up_proj.weight"] = ("BF17", (8, 4))
    with pytest.raises(EstimateError) as err:
        count_manifest(manifest)
    assert err.value.key == "manifest['model.layers.20.mlp.up_proj.weight']"
    assert "holds 4.0, not a size" in str(err.value)


def test_layers_alike_in_name_are_counted_tensor_by_tensor():
    """Tensors whose names differ only in a layer or expert index, with differing dtypes and shapes, each
    count as themselves; lower-case dtypes and list shapes are read as safetensors writes them."""
    manifest = {"model.layers.0.mlp.experts.0.w1.weight": ("BF16", (8, 4)),
                "model.layers.0.mlp.experts.1.w1.weight": ["bf16", [8, 4]],
                "model.layers.1.mlp.experts.0.w1.weight": ("F32", (16, 4)),
                "model.layers.1.mlp.experts.0.w2.weight": ("F4", (3, 3)),
                "model.layers.1.mlp.experts.1.w2.weight": ("F4", (3, 3)),
                "model.layers.1.self_attn.rotary_emb.inv_freq": ("F32", (2,)),
                "model.layers.1.mlp.experts.1.w2.qweight": ("I32", (2, 2))}
    counted = count_manifest(manifest)
    assert counted.tensors == 7 and counted.parameters == 8 * 4 * 2 + 16 * 4 + 2 * 9
    assert counted.by_dtype == {"BF16": 64, "F32": 66, "F4": 18, "I32": 4}
    assert counted.stored_bytes == 64 * 2 + 66 * 4 + 2 * int(9 * 0.5) + 4 * 4
    assert counted.buffers == 2 and counted.integer == 4 and counted.quantized
    assert counted.role_dims == {"w1": 12 + 12 + 20, "w2": 12} and counted.largest_linear == 64
    assert counted.linear_dims == 56 and counted.linear_params == 8 * 4 * 2 + 16 * 4 + 2 * 9
