"""The verifier on the module trees transformers itself builds: every fixture config's model, built on the meta
device, gives its parameters as a checkpoint would store them (tied tensors once), and the verifier finds nothing
in them: its tensor names (embeddings, heads, final norms, attention projections) are transformers' own."""

from __future__ import annotations

import pytest
from estimator_configs import FIXTURES, load_config

from estimator.lints import LintInputs, lint

pytestmark = pytest.mark.groundtruth
CONFIGS = sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*.json") if "custom" not in p.parts)
DTYPES = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}


def checkpoint_manifest(config: dict) -> dict:
    """name -> (dtype, shape) of the model's parameters, each shared tensor under its first name (as save_pretrained
    writes a tied head: not at all), at the config's declared dtype."""
    import torch
    from estimator_truth import build

    model = build(config, torch.device("meta"))
    dtype = DTYPES.get(str(config.get("torch_dtype") or config.get("dtype") or "float32"), "F32")
    return {name: (dtype, tuple(p.shape)) for name, p in model.named_parameters()}


@pytest.mark.parametrize("path", CONFIGS)
def test_transformers_module_trees_raise_nothing(path):
    """The real module tree of each fixture's class (CLIP's projections, a pre-norm LM's lm_head, BERT's heads) raises
    no finding: no bn-at-output, no head missing, attention shapes and embeddings as the config says."""
    config = load_config(path)
    manifest = checkpoint_manifest(config)
    assert lint(LintInputs(config, manifest=manifest, files=("config.json", "model.safetensors"))) == []


@pytest.mark.parametrize("path", ["llama/Llama-3.2-1B.json", "gpt2/gpt2.json", "bert/bert-base-uncased.json"])
def test_a_head_class_without_its_head_is_found_on_the_real_tree(path):
    """The same trees with the head's tensors removed (and tying off): the last stored module is a normalization."""
    config = {**load_config(path), "tie_word_embeddings": False}
    arch = config["architectures"][0]
    config["architectures"] = [arch if not arch.endswith("Model") else arch + "ForMaskedLM"]
    manifest = {n: v for n, v in checkpoint_manifest(config).items()
                if not n.startswith(("lm_head", "cls.", "score", "classifier"))}
    assert [f.id for f in lint(LintInputs(config, manifest=manifest, files=("model.safetensors",)))] == ["bn-at-output"]
