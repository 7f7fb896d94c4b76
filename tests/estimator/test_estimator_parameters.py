"""Parameter counts from config.json equal what transformers builds, for every family, to the parameter: against
the figures recorded from transformers (tests/estimator/record_truth.py), and live under `-m groundtruth`."""

from __future__ import annotations

import pytest
from estimator_configs import FIXTURES, REFUSED, load_config, recorded

from estimator import estimate

CONFIGS = sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.glob("*/*.json")
                 if p.parent.name != "custom" and str(p.relative_to(FIXTURES)) not in REFUSED)

# Parameter totals of the published checkpoints where known (stored buffers such as GPT-2's attn.bias excluded).
CHECKPOINT_TOTALS = {
    "llama/Llama-3.1-8B.json": 8_030_261_248,
    "llama/Llama-3.2-1B.json": 1_235_814_400,
    "llama/Llama-2-7b-hf.json": 6_738_415_616,
    "mistral/Mistral-7B-v0.1.json": 7_241_732_096,
    "mixtral/Mixtral-8x7B-v0.1.json": 46_702_792_704,
    "qwen2/Qwen2.5-0.5B.json": 494_032_768,
    "qwen2/Qwen2.5-7B-Instruct.json": 7_615_616_512,
    "qwen3/Qwen3-8B.json": 8_190_735_360,
    "gpt2/gpt2.json": 124_439_808,
    "phi/phi-2.json": 2_779_683_840,
    "phi3/phi-4.json": 14_659_507_200,
    "gemma/gemma-2b.json": 2_506_172_416,
    "gemma2/gemma-2-2b.json": 2_614_341_888,
    "t5/flan-t5-base.json": 247_577_856,
    "bloom/bloom-560m.json": 559_214_592,
    "falcon/falcon-7b.json": 6_921_720_704,
    "falcon/falcon-rw-1b.json": 1_311_625_216,
    "clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json": 151_277_313,
    "llava/llava-1.5-7b-hf.json": 7_063_427_072,
}


@pytest.mark.parametrize("path", CONFIGS)
def test_derived_count_equals_the_recorded_transformers_count(path):
    """The count derived from config.json equals transformers' own model's, as recorded."""
    assert estimate(load_config(path)).parameters["derived"] == recorded("parameters")[path]


def test_every_config_has_its_recorded_count():
    """The recorded counts are those of the fixture configs, no more, no fewer."""
    assert sorted(recorded("parameters")) == CONFIGS


@pytest.mark.groundtruth
@pytest.mark.parametrize("path", CONFIGS)
def test_derived_count_equals_transformers(path):
    """The count derived from config.json equals transformers' own model built on the meta device."""
    from estimator_truth import count_parameters

    config = load_config(path)
    assert estimate(config).parameters["derived"] == count_parameters(config)


@pytest.mark.parametrize("path", sorted(CHECKPOINT_TOTALS))
def test_derived_count_equals_published_checkpoint(path):
    """Where the checkpoint's published total is known, the derived count equals it."""
    assert estimate(load_config(path)).parameters["derived"] == CHECKPOINT_TOTALS[path]


def test_every_family_of_the_issue_has_a_real_config():
    """Each family the issue names has at least one real config fixture."""
    families = {p.split("/")[0] for p in CONFIGS}
    wanted = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "gemma", "gemma2", "gemma3_text", "phi",
              "phi3", "gpt2", "gpt_neox", "gptj", "falcon", "opt", "bloom", "starcoder2", "bert", "roberta",
              "xlm-roberta", "distilbert", "deberta-v2", "electra", "t5", "bart", "whisper", "vit", "clip", "siglip",
              "dinov2", "llava"}
    assert wanted <= families


TOWERS = [
    ("clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json",
     {"text": ["text_model"], "vision": ["vision_model"], "projection": ["visual_projection", "text_projection"]},
     {"projection": 1}),  # logit_scale
    ("llava/llava-1.5-7b-hf.json",
     {"text": ["model.language_model"], "vision": ["model.vision_tower"],
      "projection": ["model.multi_modal_projector"], "head": ["lm_head"]}, {}),
    ("whisper/whisper-tiny.json", {"audio": ["model.encoder"], "text": ["model.decoder"]}, {}),
    ("siglip/siglip-base-patch16-224.json", {"text": ["text_model"], "vision": ["vision_model"]},
     {"projection": 2}),  # logit_scale, logit_bias
]


@pytest.mark.parametrize("path", [t[0] for t in TOWERS])
def test_every_tower_equals_the_recorded_transformers_submodules(path):
    """Multi-tower models count every tower and the projections between them, each to the parameter (recorded)."""
    assert estimate(load_config(path)).parameters["by_tower"] == recorded("towers")[path]


@pytest.mark.groundtruth
@pytest.mark.parametrize("path,modules,loose", TOWERS, ids=[t[0] for t in TOWERS])
def test_every_tower_equals_the_transformers_submodules(path, modules, loose):
    """Multi-tower models count every tower and the projections between them, each to the parameter."""
    from estimator_truth import tower_counts

    config = load_config(path)
    assert estimate(config).parameters["by_tower"] == tower_counts(config, modules, loose)
