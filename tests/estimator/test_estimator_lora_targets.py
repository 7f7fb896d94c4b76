"""LoRA's rank and target modules as settings: validation, what they change, and the harness's measured step."""

from __future__ import annotations

import json

import pytest
from estimator_configs import load_config, recorded

from estimator import EstimateError, at_batch, estimate
from estimator.memory import CUDA_CONTEXT_BYTES

LLAMA = "llama/Llama-3.2-1B.json"


def test_explicit_defaults_give_the_same_estimate():
    """rank 16 on all-linear, given or not, is one estimate, and it says so in its assumptions and parts."""
    config = load_config(LLAMA)
    plain = estimate(config).to_dict()
    assert plain == estimate(config, lora_rank=16, lora_targets="all-linear").to_dict()
    assert plain["memory"]["assumptions"]["lora_rank"] == 16
    assert plain["memory"]["assumptions"]["lora_targets"] == "all-linear"
    assert "LoRA r=16 on every linear layer but the head" in plain["memory"]["assumptions"]["text"]


def test_rank_and_targets_size_the_adapters_but_not_the_nf4_base():
    """Adapters are rank x (in + out) over the targeted linears only; QLoRA still quantizes every block linear."""
    config = load_config(LLAMA)  # hidden 2048, 16 layers, k and v 512 wide
    plain = estimate(config).memory
    chosen = estimate(config, lora_rank=64, lora_targets=["q_proj", "v_proj"]).memory
    dims = 16 * ((2048 + 2048) + (2048 + 512))
    assert chosen["lora"]["parts"]["adapters_fp32_grads_adamw"] == 16 * 64 * dims
    assert chosen["lora"]["parts"]["lora_targets"] == ["q_proj", "v_proj"]
    assert chosen["qlora"]["parts"]["lora_rank"] == 64
    assert chosen["qlora"]["parts"]["base_nf4"] == plain["qlora"]["parts"]["base_nf4"]
    assert chosen["lora"]["parts"]["activations_per_sample"] < plain["lora"]["parts"]["activations_per_sample"]
    assert "LoRA r=64 on the q_proj, v_proj linears" in chosen["assumptions"]["text"]


def test_a_target_matches_module_paths_by_their_end():
    """"dense" in BERT is the attention output and the MLP's output and input; "output.dense" only the first two."""
    config = load_config("bert/bert-base-uncased.json")
    dense = estimate(config, lora_targets=["dense"]).memory["lora"]["parts"]["adapters_fp32_grads_adamw"]
    output = estimate(config, lora_targets=["output.dense"]).memory["lora"]["parts"]["adapters_fp32_grads_adamw"]
    assert dense == 16 * 16 * 12 * ((768 + 768) + 2 * (768 + 3072))
    assert output == 16 * 16 * 12 * ((768 + 768) + (3072 + 768))


def test_b_keeps_as_wide_an_input_as_the_rank():
    """Each adapter's B keeps A's bf16 output: 2 x rank bytes a token, so the rank adds to the activations."""
    config = load_config(LLAMA)  # 16 layers x 7 linears, sequence 512
    act = {rank: estimate(config, seq_len_cap=512, lora_rank=rank).memory["lora"]["parts"]["activations_per_sample"]
           for rank in (16, 64)}
    assert act[64] - act[16] == 2 * (64 - 16) * 16 * 7 * 512


def test_relu_keeps_its_output_under_lora():
    """OPT's ReLU output is fc2's input: a full fine-tune saves it once, and under LoRA the ReLU still keeps it
    whether fc2 is adapted or not; a GELU model has no such term."""
    from estimator.families import BUILDERS
    from estimator.reader import ConfigReader

    opt = BUILDERS["opt"](ConfigReader(load_config("opt/opt-350m.json"), ""), 512)
    assert opt.lora_kept == {"text": 2 * 4096 * 24}
    gpt2 = BUILDERS["gpt2"](ConfigReader(load_config("gpt2/gpt2.json"), ""), 512)
    assert gpt2.lora_kept == {"text": 0}


def test_qlora_behind_a_layernorm_keeps_fp32_mlp_tensors():
    """A 4-bit linear returns its input's dtype: behind LayerNorm (fp32 output) the MLP's activation keeps fp32,
    2 bytes an inner element more than LoRA; behind Llama's RMSNorm (bf16 output over a bf16 base) nothing."""
    star = estimate(load_config("starcoder2/starcoder2-3b.json"), seq_len_cap=512).memory
    assert (star["qlora"]["parts"]["activations_per_sample"] - star["lora"]["parts"]["activations_per_sample"]
            == 2 * 12288 * 30 * 512)
    llama = estimate(load_config(LLAMA), seq_len_cap=512).memory
    assert llama["qlora"]["parts"]["activations_per_sample"] == llama["lora"]["parts"]["activations_per_sample"]


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"lora_rank": 0}, "lora_rank"), ({"lora_rank": 4097}, "lora_rank"), ({"lora_rank": True}, "lora_rank"),
    ({"lora_rank": "16"}, "lora_rank"), ({"lora_targets": []}, "lora_targets"),
    ({"lora_targets": [""]}, "lora_targets"), ({"lora_targets": "q_proj"}, "lora_targets"),
    ({"lora_targets": [1]}, "lora_targets"), ({"lora_targets": ["query"]}, "lora_targets"),
])
def test_bad_rank_or_targets_name_the_setting(kwargs, key):
    """A rank outside 1..4096, malformed targets, or a target no linear has are refused, naming the setting."""
    with pytest.raises(EstimateError, match=key):
        estimate(load_config(LLAMA), **kwargs)


def test_an_unmatched_target_lists_the_models_modules():
    """The error lists the module names the model has, so the user can pick."""
    with pytest.raises(EstimateError, match=r"self_attn\.q_proj.*mlp\.|mlp\..*self_attn\.q_proj"):
        estimate(load_config(LLAMA), lora_targets=["c_attn"])


def test_custom_code_matches_targets_against_the_manifest():
    """Without a structure, targets pick the manifest's 2-D weights by their module path."""
    config = load_config("custom/jina-clip-v2-like.json")
    manifest = {"text.layers.0.attn.q.weight": ("BF16", [4096, 4096]),
                "text.layers.0.mlp.up.weight": ("BF16", [1024, 4096]),
                "text.embed.weight": ("BF16", [250002, 4096])}
    lora = estimate(config, manifest, lora_rank=8, lora_targets=["q"]).memory["lora"]
    assert lora["parts"]["adapters_fp32_grads_adamw"] == 16 * 8 * (4096 + 4096)
    with pytest.raises(EstimateError, match="attn.q, mlp.up"):
        estimate(config, manifest, lora_targets=["v"])


ROLE_PATHS = ["gpt2/gpt2.json", LLAMA, "bert/bert-base-uncased.json", "t5/t5-small.json", "clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json"]


def _roles(path: str) -> dict[str, int]:
    from estimator.families import BUILDERS
    from estimator.reader import ConfigReader

    structure = BUILDERS[load_config(path)["model_type"]](ConfigReader(load_config(path), ""), 512)
    return {role: lin.dims for role, lin in structure.lora_roles.items()}


@pytest.mark.parametrize("path", ROLE_PATHS)
def test_module_roles_are_the_recorded_transformers_module_names(path):
    """Every role a builder records is a linear of the transformers model, with the same (in + out) in total
    (the model's linears as recorded)."""
    real = recorded("linear_roles")[path]
    assert _roles(path) == {role: real[role] for role in _roles(path)}


@pytest.mark.groundtruth
@pytest.mark.parametrize("path", ROLE_PATHS)
def test_module_roles_are_transformers_module_names(path):
    """Every role a builder records is a linear of the transformers model, with the same (in + out) in total."""
    from estimator_truth import linear_roles

    real = linear_roles(load_config(path))
    assert _roles(path) == {role: real[role] for role in _roles(path)}


CASES = [("gpt2/gpt2.json", 64, ["c_attn"], 4), (LLAMA, 16, ["q_proj", "v_proj"], 1),
         ("qwen2/Qwen2.5-0.5B.json", 16, ["q_proj", "v_proj"], 4),
         ("qwen2/Qwen2.5-0.5B.json", 64, ["q_proj", "k_proj", "v_proj", "o_proj"], 1),
         ("opt/opt-350m.json", 16, "all-linear", 4), ("opt/opt-350m.json", 16, ["fc1"], 4),
         ("bert/bert-base-uncased.json", 16, ["query", "value"], 1)]
BOUND = {"bert/bert-base-uncased.json": 0.10}  # decoders 5%: the bounds


def step_key(path: str, rank: int, targets: str | list[str], batch: int) -> str:
    return f"{path}|{rank}|{json.dumps(targets)}|{batch}"


@pytest.mark.parametrize(("path", "rank", "targets", "batch"), CASES, ids=lambda v: str(v))
def test_rank_and_targets_match_the_recorded_step(path, rank, targets, batch):
    """PEFT's LoRA of that rank on those modules, as the harness measured it (recorded; sequence 512): forward
    and backward within 5% for a decoder (10% for an encoder), the optimizer step within 1%."""
    _check_step(path, rank, targets, batch, recorded("lora_steps")[step_key(path, rank, targets, batch)])


def test_every_case_has_its_recorded_step():
    """The recorded steps are those of the cases, no more, no fewer; each has its three phases."""
    steps = recorded("lora_steps")
    assert sorted(steps) == sorted(step_key(*case) for case in CASES)
    assert all(set(peaks) == {"forward", "backward", "optimizer"} for peaks in steps.values())


@pytest.mark.groundtruth
@pytest.mark.parametrize(("path", "rank", "targets", "batch"), CASES, ids=lambda v: str(v))
def test_rank_and_targets_match_the_measured_step(path, rank, targets, batch):
    """PEFT's LoRA of that rank on those modules, stepped in the harness (sequence 512): forward and backward
    within 5% for a decoder (10% for an encoder), the optimizer step within 1%."""
    from step_truth import step_peaks

    measured = step_peaks(load_config(path), "lora", batch, 512, lora_rank=rank, lora_targets=targets)
    _check_step(path, rank, targets, batch, measured)


def _check_step(path: str, rank: int, targets: str | list[str], batch: int, measured: dict[str, int]) -> None:
    config = load_config(path)
    doc = estimate(config, seq_len_cap=512, lora_rank=rank, lora_targets=targets).to_dict()
    estimated = {k: v - CUDA_CONTEXT_BYTES for k, v in at_batch(doc, "lora", batch)["phase_peaks"].items()}
    bound = {"forward": BOUND.get(path, 0.05), "backward": BOUND.get(path, 0.05), "optimizer": 0.01}
    for phase, value in measured.items():
        assert abs(estimated[phase] / value - 1) < bound[phase], (phase, estimated[phase], value)
