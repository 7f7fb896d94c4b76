"""The structure verifier on real configs (no false alarms) and on broken copies of them (exactly their lint)."""

from __future__ import annotations

import copy
import json
import math

import pytest
from estimator_configs import FIXTURES, load_config

from estimator.lint_rules import RULES, SEVERITIES
from estimator.lints import Finding, LintInputs, TokenizerFacts, lint, worst

CONFIGS = sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*.json"))
WEIGHTS = ("config.json", "model.safetensors")  # a repo with weights: the from-scratch advice does not apply


def ids(findings: list[Finding]) -> list[str]:
    return [f.id for f in findings]


def test_the_fixtures_were_found():
    """The real configs the checks run over are there (a wrong path would check nothing)."""
    assert len(CONFIGS) >= 40 and "llama/Llama-3.1-8B.json" in CONFIGS


@pytest.mark.parametrize("path", CONFIGS)
def test_real_configs_raise_nothing(path):
    """Every real config in the fixtures (44 families and sizes, custom code among them) raises no finding."""
    assert lint(LintInputs(load_config(path), files=WEIGHTS)) == []


def _llama_manifest(config: dict, *, head: bool = True) -> dict:
    """A Llama-lineage checkpoint's manifest at the shapes ``config`` gives (layer 0 and the ends)."""
    h, heads = config["hidden_size"], config["num_attention_heads"]
    d = config.get("head_dim") or h // heads
    kv = config.get("num_key_value_heads", heads)
    out = {"model.embed_tokens.weight": ("BF16", (config["vocab_size"], h)),
           "model.layers.0.self_attn.q_proj.weight": ("BF16", (heads * d, h)),
           "model.layers.0.self_attn.k_proj.weight": ("BF16", (kv * d, h)),
           "model.layers.0.self_attn.v_proj.weight": ("BF16", (kv * d, h)),
           "model.layers.0.self_attn.o_proj.weight": ("BF16", (h, heads * d)),
           "model.layers.0.input_layernorm.weight": ("BF16", (h,)),
           "model.norm.weight": ("BF16", (h,))}
    if head:
        out["lm_head.weight"] = ("BF16", (config["vocab_size"], h))
    return out


def _with(config: dict, **changes) -> dict:
    out = copy.deepcopy(config)
    for key, value in changes.items():
        path = key.split("__")
        target = out
        for part in path[:-1]:
            target = target[part]
        if value is ...:
            target.pop(path[-1], None)
        else:
            target[path[-1]] = value
    return out


LLAMA8 = load_config("llama/Llama-3.1-8B.json")
LLAMA1 = load_config("llama/Llama-3.2-1B.json")
QWEN = load_config("qwen2/Qwen2.5-7B-Instruct.json")
BERT = load_config("bert/bert-base-uncased.json")
GPT2 = load_config("gpt2/gpt2.json")
PHI4 = load_config("phi3/phi-4.json")
LLAMA8_WEIGHTS = _llama_manifest(LLAMA8)
BERT_TOKENIZER = TokenizerFacts(size=30522, largest=("##～", 30521), special={"pad_token": ("[PAD]", 0)},
                                model_max_length=512, source="tokenizer.json")

# Each broken input is a real one with one thing wrong, and must raise exactly that lint.
BROKEN = {
    "config-invalid": LintInputs(["not", "an", "object"]),
    "config-value-invalid": LintInputs(_with(LLAMA8, num_attention_heads=0), files=WEIGHTS),
    "config-size-implausible": LintInputs(_with(LLAMA8, hidden_size=409_600, num_hidden_layers=1000), files=WEIGHTS),
    "vocab-size-embedding": LintInputs(_with(LLAMA8, vocab_size=128_000), manifest=LLAMA8_WEIGHTS, files=WEIGHTS),
    "vocab-size-tokenizer": LintInputs(BERT, tokenizer=TokenizerFacts(
        size=30524, largest=("[DOC]", 30523), model_max_length=512), files=WEIGHTS),
    "special-token-out-of-vocab": LintInputs(_with(LLAMA8, eos_token_id=[128001, 128256]), files=WEIGHTS),
    "kv-heads-divide": LintInputs(_with(LLAMA1, num_key_value_heads=6), files=WEIGHTS),
    "head-dim-hidden": LintInputs(_with(BERT, hidden_size=770), files=WEIGHTS),
    "attention-shape-mismatch": LintInputs(_with(LLAMA8, num_key_value_heads=4), manifest=LLAMA8_WEIGHTS,
                                           files=WEIGHTS),
    "tie-word-embeddings-head": LintInputs(_with(LLAMA8, tie_word_embeddings=True), manifest=LLAMA8_WEIGHTS,
                                           files=WEIGHTS),
    "bn-at-output": LintInputs(LLAMA8, manifest=_llama_manifest(LLAMA8, head=False), files=WEIGHTS),
    "head-missing": LintInputs(_with(GPT2, architectures=["GPT2ForSequenceClassification"]),
                               manifest={"wte.weight": ("F32", (50257, 768)), "h.0.attn.c_attn.weight": ("F32", (768, 2304))},
                               files=WEIGHTS),
    "deep-attention-default-init": LintInputs(LLAMA1, files=("config.json", "README.md")),
    "torch-dtype-weights": LintInputs(_with(LLAMA8, torch_dtype="float32"), manifest=LLAMA8_WEIGHTS, files=WEIGHTS),
    "max-position-tokenizer": LintInputs(_with(BERT, max_position_embeddings=256), tokenizer=BERT_TOKENIZER,
                                         files=WEIGHTS),
    "rope-scaling-invalid": LintInputs(_with(LLAMA8, rope_scaling__low_freq_factor=...), files=WEIGHTS),
    "rope-scaling-version": LintInputs(_with(LLAMA8, transformers_version="4.42.3"), files=WEIGHTS),
    "index-missing-shard": LintInputs(LLAMA8, files=("config.json", "model-00001-of-00002.safetensors",
                                                     "model.safetensors.index.json"),
                                      indexes={"model.safetensors.index.json": {"weight_map": {
                                          "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                                          "lm_head.weight": "model-00002-of-00002.safetensors"}}}),
}


CLIP = load_config("clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json")
QWEN_SMALL = load_config("qwen2/Qwen2.5-0.5B.json")
GEMMA = load_config("gemma/gemma-2b.json")
CLIP_WEIGHTS = {"text_model.embeddings.token_embedding.weight": ("F32", (49408, 512)),
                "text_model.final_layer_norm.weight": ("F32", (512,)), "text_projection.weight": ("F32", (512, 512)),
                "vision_model.post_layernorm.weight": ("F32", (768,)), "visual_projection.weight": ("F32", (512, 768))}
GEMMA_WEIGHTS = {"model.embed_tokens.weight": ("BF16", (256_000, 2048)), "model.norm.weight": ("BF16", (2048,))}

# More of the held-out set: the same lints broken in other families' real configs (two-tower CLIP, GPT-2's own key
# names, Qwen's grouped heads, Gemma's tied default).
BROKEN_MORE = [
    ("vocab-size-embedding", LintInputs(_with(CLIP, text_config__vocab_size=49_000), manifest=CLIP_WEIGHTS,
                                        files=WEIGHTS)),
    ("special-token-out-of-vocab", LintInputs(_with(BERT, pad_token_id=30_522), files=WEIGHTS)),
    ("special-token-out-of-vocab", LintInputs(QWEN_SMALL, generation_config={"eos_token_id": [151_645, 151_936]},
                                              files=WEIGHTS)),
    ("head-dim-hidden", LintInputs(_with(GPT2, n_head=10), files=WEIGHTS)),
    ("head-dim-hidden", LintInputs(_with(CLIP, vision_config__num_attention_heads=7), files=WEIGHTS)),
    ("kv-heads-divide", LintInputs(_with(QWEN, num_key_value_heads=5), files=WEIGHTS)),
    ("max-position-tokenizer", LintInputs(GPT2, tokenizer=TokenizerFacts(size=50_257, model_max_length=2048),
                                          files=WEIGHTS)),
    ("rope-scaling-invalid", LintInputs(_with(QWEN, rope_scaling={"type": "yarn", "factor": 0.5}), files=WEIGHTS)),
    ("tie-word-embeddings-head", LintInputs(GEMMA, manifest={**GEMMA_WEIGHTS, "lm_head.weight": ("BF16", (256_000, 2048))},
                                            files=WEIGHTS)),
    ("bn-at-output", LintInputs(CLIP, manifest={k: v for k, v in CLIP_WEIGHTS.items() if k != "visual_projection.weight"},
                                files=WEIGHTS)),
    ("torch-dtype-weights", LintInputs(_with(CLIP, torch_dtype="float16"), manifest=CLIP_WEIGHTS, files=WEIGHTS)),
]


@pytest.mark.parametrize(("rule", "inputs"), BROKEN_MORE, ids=[f"{r}-{i}" for i, (r, _) in enumerate(BROKEN_MORE)])
def test_more_broken_copies_raise_exactly_their_lint(rule, inputs):
    """The same lints broken in other families' real configs: exactly that lint again."""
    assert ids(lint(inputs)) == [rule], [f.message for f in lint(inputs)]


def test_every_rule_has_a_broken_case():
    """The held-out broken set covers every lint the verifier has."""
    assert sorted(BROKEN) == sorted(RULES)


@pytest.mark.parametrize("rule", sorted(BROKEN))
def test_a_broken_copy_raises_exactly_its_lint(rule):
    """A real config with one thing broken raises that lint and nothing else, with evidence and the fix."""
    findings = lint(BROKEN[rule])
    assert ids(findings) == [rule], [f.message for f in findings]
    finding = findings[0]
    assert finding.severity == RULES[rule].severity
    assert finding.evidence and finding.fix and finding.message
    json.dumps(finding.to_dict())  # plain data


def test_evidence_names_the_config_keys_and_tensors():
    """A vocabulary mismatch names vocab_size, the embedding tensor and its shape."""
    finding = lint(BROKEN["vocab-size-embedding"])[0]
    assert finding.evidence == {"where": "vocab_size", "vocab_size": 128_000, "tensor": "model.embed_tokens.weight",
                                "shape": [128256, 4096]}
    assert finding.message == "vocab_size is 128,000 but model.embed_tokens.weight has 128,256 rows"


@pytest.mark.parametrize(("config", "tokenizer"), [
    (QWEN, TokenizerFacts(size=151_665, largest=("<|file_sep|>", 151_664), model_max_length=131_072)),
    (load_config("phi3/phi-4.json"), TokenizerFacts(size=100_352, model_max_length=16_384)),
    (LLAMA8, TokenizerFacts(size=128_256, model_max_length=1e30)),
    (BERT, BERT_TOKENIZER),
])
def test_real_padding_and_sentinels_are_not_alarms(config, tokenizer):
    """A vocabulary padded above the tokenizer (Qwen's 152,064 rows for 151,665 ids, Phi-4's) and the 1e30
    model_max_length sentinel raise nothing at notice or above."""
    findings = lint(LintInputs(config, tokenizer=tokenizer, files=WEIGHTS))
    assert [f for f in findings if f.severity != "info"] == []


def test_a_rotary_model_past_its_positions_is_advice():
    """Qwen2.5's tokenizer accepts 131,072 tokens over 32,768 positions without rope_scaling: info, not an error."""
    findings = lint(LintInputs(QWEN, tokenizer=TokenizerFacts(size=151_665, model_max_length=131_072), files=WEIGHTS))
    assert [(f.id, f.severity) for f in findings] == [("max-position-tokenizer", "info")]
    yarn = _with(QWEN, rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})
    assert lint(LintInputs(yarn, tokenizer=TokenizerFacts(size=151_665, model_max_length=131_072), files=WEIGHTS)) == []


@pytest.mark.parametrize(("rope", "version", "expected"), [
    ({"type": "linear", "factor": 2.0}, "4.31.0", []),
    ({"type": "linear", "factor": 2.0}, "4.30.2", ["rope-scaling-version"]),
    ({"type": "yarn", "factor": 4.0}, "4.42.4", ["rope-scaling-version"]),
    ({"rope_type": "yarn", "factor": 4.0}, "4.43.0.dev0", []),
    ({"rope_type": "proportional", "rope_theta": 1e6}, "5.4.0", ["rope-scaling-version"]),
    ({"rope_type": "proportional", "rope_theta": 1e6}, "5.5.0", []),
    ({"type": "mystery", "factor": 2.0}, "4.50.0", ["rope-scaling-version"]),
    ({"type": "dynamic", "factor": 0.5}, "4.50.0", ["rope-scaling-invalid"]),
    ({"type": "linear", "factor": 2.0}, "not a version", []),
])
def test_rope_types_against_the_declared_version(rope, version, expected):
    """Each rope type is checked against the version that brought it (a dev release counts as that release)."""
    config = _with(QWEN, rope_scaling=rope, transformers_version=version)
    assert ids(lint(LintInputs(config, files=WEIGHTS))) == expected


def test_longrope_factors_have_half_a_head():
    """Phi-style longrope with 47 short factors for a 128-wide head (64 needed) is invalid; 64 are fine."""
    rope = {"rope_type": "longrope", "short_factor": [1.0] * 47, "long_factor": [1.0] * 64,
            "original_max_position_embeddings": 4096}
    bad = lint(LintInputs(_with(PHI4, rope_scaling=rope), files=WEIGHTS))
    assert ids(bad) == ["rope-scaling-invalid"] and bad[0].evidence["expected"] == 64
    rope["short_factor"] = [1.0] * 64
    assert lint(LintInputs(_with(PHI4, rope_scaling=rope), files=WEIGHTS)) == []


def test_custom_code_is_not_held_to_transformers_rules():
    """A config with auto_map builds its own model: its rope and heads are not checked against transformers."""
    config = _with(LLAMA8, transformers_version="4.40.0", auto_map={"AutoModel": "modeling_x.X"})
    assert lint(LintInputs(config, files=WEIGHTS)) == []


def test_a_family_that_honours_head_dim_is_not_held_to_hidden_size():
    """Gemma and Qwen3 give head_dim x heads != hidden_size on purpose; an incomplete manifest proves no absence."""
    assert lint(LintInputs(load_config("qwen3/Qwen3-8B.json"), files=WEIGHTS)) == []
    missing_head = LintInputs(LLAMA8, manifest=_llama_manifest(LLAMA8, head=False), files=WEIGHTS,
                              weights_complete=False)
    assert lint(missing_head) == []


def test_a_tied_model_without_a_head_tensor_is_fine():
    """Llama-3.2-1B ties lm_head to the embeddings and stores none: nothing is missing."""
    manifest = _llama_manifest(LLAMA1, head=False)
    assert lint(LintInputs(LLAMA1, manifest=manifest, files=WEIGHTS)) == []


def test_clip_final_norm_feeds_a_projection():
    """CLIP's towers end in a LayerNorm that feeds a projection: no bn-at-output; without the text projection in
    the weights, the text tower's LayerNorm is the last module and bn-at-output holds."""
    config = load_config("clip/CLIP-ViT-B-32-laion2B-s34B-b79K.json")
    manifest = {"text_model.embeddings.token_embedding.weight": ("F32", (49408, 512)),
                "text_model.final_layer_norm.weight": ("F32", (512,)),
                "text_projection.weight": ("F32", (512, 512)),
                "vision_model.post_layernorm.weight": ("F32", (768,)),
                "visual_projection.weight": ("F32", (512, 768))}
    assert lint(LintInputs(config, manifest=manifest, files=WEIGHTS)) == []
    del manifest["text_projection.weight"]
    findings = lint(LintInputs(config, manifest=manifest, files=WEIGHTS))
    assert ids(findings) == ["bn-at-output"] and findings[0].evidence["norm"] == "text_model.final_layer_norm.weight"
    evidence = findings[0].evidence
    assert evidence["from"] == "graph" and evidence["tower"] == "text" and evidence["norm_shape"] == [512]
    assert evidence["norm_node"] == "text_model.final_layer_norm" and evidence["norm_type"] == "LayerNorm"
    assert evidence["missing_after"] == ["text_projection"] and "text_projection follow it" in findings[0].message


def _ends(config: dict, tensors: dict) -> list[Finding]:
    return lint(LintInputs(config, manifest=tensors, files=WEIGHTS))


def test_a_model_ending_at_its_norm_by_design_raises_nothing():
    """Base classes whose module tree ends at the final normalization (DINOv2's layernorm, each BART stack's
    final_layer_norm): the weights ending there is the model, not a lint. ViTModel's pooler after its layernorm is
    an optional extra checkpoints often leave out: its absence is no bn-at-output either."""
    dinov2 = load_config("dinov2/dinov2-base.json")
    assert _ends(dinov2, {"embeddings.cls_token": ("F32", (1, 1, 768)), "layernorm.weight": ("F32", (768,))}) == []
    bart = load_config("bart/bart-base.json")
    assert _ends(bart, {"shared.weight": ("F32", (50265, 768)), "encoder.layers.5.final_layer_norm.weight": (
        "F32", (768,)), "decoder.layers.5.final_layer_norm.weight": ("F32", (768,))}) == []
    vit = load_config("vit/vit-base-patch16-224-in21k.json")
    assert _ends(vit, {"embeddings.cls_token": ("F32", (1, 1, 768)), "layernorm.weight": ("F32", (768,))}) == []


def test_the_graph_follows_the_checkpoints_own_names():
    """Stored names the graph reads past: a head-class checkpoint saved from its base class (``norm.weight``, no
    ``model.`` prefix), a PEFT-style prefix, Pythia's ``embed_out`` (transformers 5 names it lm_head), T5's head
    tied to ``shared`` whatever tie_word_embeddings says (flan-t5's false), and OPT-350m's project_out between the
    final norm and the head: no finding. The same OPT without its head, untied, does end at project_out, a Linear:
    head-missing, not bn-at-output."""
    llama = load_config("llama/Llama-3.2-1B.json")
    h, vocab = llama["hidden_size"], llama["vocab_size"]
    untied = {**llama, "tie_word_embeddings": False}
    assert _ends(untied, {"embed_tokens.weight": ("BF16", (vocab, h)), "norm.weight": ("BF16", (h,)),
                          "lm_head.weight": ("BF16", (vocab, h))}) == []
    assert _ends(untied, {"base_model.model.model.embed_tokens.weight": ("BF16", (vocab, h)),
                          "base_model.model.model.norm.weight": ("BF16", (h,)),
                          "base_model.model.lm_head.weight": ("BF16", (vocab, h))}) == []
    pythia = load_config("gpt_neox/pythia-160m.json")
    assert _ends(pythia, {"gpt_neox.embed_in.weight": ("F16", (50304, 768)),
                          "gpt_neox.final_layer_norm.weight": ("F16", (768,)),
                          "embed_out.weight": ("F16", (50304, 768))}) == []
    flan = load_config("t5/flan-t5-base.json")
    assert _ends(flan, {"shared.weight": ("F32", (32128, 768)), "encoder.final_layer_norm.weight": ("F32", (768,)),
                        "decoder.final_layer_norm.weight": ("F32", (768,))}) == []
    opt = {**load_config("opt/opt-350m.json"), "tie_word_embeddings": False}
    stored = {"model.decoder.embed_tokens.weight": ("F16", (50272, 512)),
              "model.decoder.layers.23.final_layer_norm.weight": ("F16", (1024,)),
              "model.decoder.project_out.weight": ("F16", (512, 1024))}
    assert _ends(opt, {**stored, "lm_head.weight": ("F16", (50272, 512))}) == []
    assert ids(_ends(opt, stored)) == ["head-missing"]


def test_a_head_class_without_its_head_ends_at_its_norm_in_the_graph():
    """Llama-3.2-1B untied without lm_head: bn-at-output read from the graph, naming model.norm (a LlamaRMSNorm)
    and the lm_head after it; tied (its config's own setting), the head is the embeddings and nothing is found."""
    llama = load_config("llama/Llama-3.2-1B.json")
    manifest = _llama_manifest(llama, head=False)
    [finding] = lint(LintInputs({**llama, "tie_word_embeddings": False}, manifest=manifest, files=WEIGHTS))
    assert finding.id == "bn-at-output" and finding.evidence["from"] == "graph"
    assert (finding.evidence["norm_node"], finding.evidence["norm_type"], finding.evidence["missing_after"]) == (
        "model.norm", "LlamaRMSNorm", ["lm_head"])
    assert finding.evidence["norm"] == "model.norm.weight" and finding.evidence["tower"] == "text"
    assert lint(LintInputs(llama, manifest=manifest, files=WEIGHTS)) == []


def test_without_a_graph_of_the_family_the_tensor_names_decide():
    """A family the graph does not model (an InternLM2-style config without its custom code): the old reading of
    tensor names, and the evidence says so."""
    config = {"model_type": "internlm2", "architectures": ["InternLM2ForCausalLM"], "hidden_size": 64,
              "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 100, "tie_word_embeddings": False}
    manifest = {"model.tok_embeddings.weight": ("BF16", (100, 64)), "model.layers.0.attention.wqkv.weight": (
        "BF16", (192, 64)), "model.norm.weight": ("BF16", (64,))}
    [finding] = lint(LintInputs(config, manifest=manifest, files=WEIGHTS))
    assert finding.id == "bn-at-output" and finding.evidence["from"] == "tensor names"
    assert finding.evidence["norm"] == "model.norm.weight"


@pytest.mark.parametrize("changes", [
    {"num_attention_heads": 0}, {"num_key_value_heads": 0}, {"hidden_size": -4096}, {"num_hidden_layers": 2.5}, {"vocab_size": "big"},
    {"hidden_size": 10**12}, {"num_key_value_heads": None, "num_attention_heads": True},
    {"max_position_embeddings": -1}, {"rope_scaling": "yes"}, {"architectures": 7}, {"tie_word_embeddings": "no"},
])
def test_absurd_configs_give_findings_not_tracebacks(changes):
    """Zero heads, negative or fractional sizes, strings for numbers: a clear finding naming the key."""
    findings = lint(LintInputs(_with(LLAMA8, **changes), manifest=LLAMA8_WEIGHTS, files=WEIGHTS))
    assert findings or changes in ({"architectures": 7}, {"tie_word_embeddings": "no"})
    for finding in findings:
        assert finding.severity in SEVERITIES and finding.message


def test_a_config_implying_a_trillion_parameters_says_so():
    """10^12-parameter sizes within each key's bounds are reported with the parameters they imply; Llama 3.1 405B's
    real sizes (the largest dense model published) are not."""
    findings = lint(LintInputs(_with(LLAMA8, hidden_size=65_536, num_hidden_layers=20), files=WEIGHTS))
    assert ids(findings) == ["config-size-implausible"]
    assert 10**12 < findings[0].evidence["parameters"] < 1.1 * 10**12
    assert not math.isnan(findings[0].evidence["parameters"])
    llama_405b = _with(LLAMA8, hidden_size=16_384, num_hidden_layers=126, num_attention_heads=128,
                       intermediate_size=53_248)
    assert lint(LintInputs(llama_405b, files=WEIGHTS)) == []


@pytest.mark.parametrize("manifest", [
    {"model.embed_tokens.weight": "BF16"}, {"x": ("BF16", ("a",))}, {1: ("BF16", (1,))}, "not a mapping",
])
def test_a_malformed_manifest_is_ignored_not_fatal(manifest):
    """Entries that are not (dtype, shape) pairs are skipped (the estimator names them); the checks still run."""
    assert ids(lint(LintInputs(_with(LLAMA8, num_key_value_heads=7), manifest=manifest, files=WEIGHTS))) == [
        "kv-heads-divide"]


def test_findings_are_ordered_most_severe_first():
    """Critical before info; worst() gives the top severity."""
    config = _with(LLAMA1, num_key_value_heads=6)
    findings = lint(LintInputs(config, files=("config.json",)))
    assert ids(findings) == ["kv-heads-divide", "deep-attention-default-init"]
    assert worst(findings) == "critical" and worst([]) is None


def test_every_rule_is_described():
    """Each rule has a title, what it checks, its evidence and fix, and a known severity (the docs read these)."""
    for rule in RULES.values():
        assert rule.severity in SEVERITIES
        assert all(len(text) > 10 for text in (rule.title, rule.checks, rule.evidence, rule.fix)), rule.id


VERIFY_FIXTURES = FIXTURES.parents[1] / "verify" / "configs"
REAL_MORE = sorted(p.name for p in VERIFY_FIXTURES.glob("*.json"))


@pytest.mark.parametrize("name", REAL_MORE)
def test_more_real_configs_raise_nothing_with_or_without_their_code(name):
    """Phi-3.5-mini and Phi-4-mini (LongRoPE, partial rotary) and Gemma-7B (head_dim x heads != hidden_size) raise
    nothing, the Phi configs also when read by transformers' own phi3."""
    config = json.loads((VERIFY_FIXTURES / name).read_text())
    assert lint(LintInputs(config, files=WEIGHTS)) == []
    native = _with(config, auto_map=...)
    facts = TokenizerFacts(model_max_length=config["max_position_embeddings"])
    assert lint(LintInputs(native, tokenizer=facts, files=WEIGHTS)) == []


def test_longrope_without_its_partial_rotary_factor_is_found():
    """Phi-4-mini's 48 factors fit 96 rotated dimensions; without partial_rotary_factor the heads rotate 128."""
    config = json.loads((VERIFY_FIXTURES / "Phi-4-mini-instruct.json").read_text())
    broken = _with(config, auto_map=..., partial_rotary_factor=...)
    findings = lint(LintInputs(broken, files=WEIGHTS))
    assert ids(findings) == ["rope-scaling-invalid", "rope-scaling-invalid"]
    assert {f.evidence["where"] for f in findings} == {"rope_scaling.short_factor", "rope_scaling.long_factor"}


def test_transformers_5_rope_parameters_are_read():
    """A config written by transformers 5 keeps its rope under rope_parameters: the same checks apply to it."""
    config = _with(LLAMA8, rope_scaling=..., transformers_version="5.0.0",
                   rope_parameters={"rope_type": "proportional", "rope_theta": 5e5})
    findings = lint(LintInputs(config, files=WEIGHTS))
    assert ids(findings) == ["rope-scaling-version"] and findings[0].evidence["where"] == "rope_parameters"
    assert lint(LintInputs(_with(config, transformers_version="5.5.0"), files=WEIGHTS)) == []


JINA_0002 = (FIXTURES.parents[2] / ".." / "tracker/standins/replay/histories/jinaai/jina-clip-v2/commits/"
             "0002-upload-jinaclipmodel/files/config.json").resolve()


@pytest.mark.parametrize(("manifest", "config"), [
    ("internlm2_5-7b-chat.json", load_config("custom/internlm2_5-7b-chat.json")),
    ("jina-clip-v2.json", json.loads(JINA_0002.read_text())),  # the config of the commit the header is from
])
def test_custom_code_checkpoints_with_their_manifests_raise_nothing(manifest, config):
    """InternLM2.5's and jina-clip-v2's weight manifests (custom module names: tok_embeddings, output) are no alarm."""
    tensors = {name: (dtype, tuple(shape)) for name, (dtype, shape) in
               json.loads((FIXTURES.parent / "manifests" / manifest).read_text()).items()}
    assert lint(LintInputs(config, manifest=tensors, files=WEIGHTS)) == []


def _gemma_manifest(config: dict) -> dict:
    """gemma-7b-it's stored tensors at the shapes its module tree prints (layer 0 and the ends; lm_head is tied)."""
    h, inner, kv = config["hidden_size"], 16 * 256, 16 * 256
    return {"model.embed_tokens.weight": ("BF16", (256_000, h)),
            "model.layers.0.self_attn.q_proj.weight": ("BF16", (inner, h)),
            "model.layers.0.self_attn.k_proj.weight": ("BF16", (kv, h)),
            "model.layers.0.self_attn.v_proj.weight": ("BF16", (kv, h)),
            "model.layers.0.self_attn.o_proj.weight": ("BF16", (h, inner)),
            "model.layers.0.mlp.gate_proj.weight": ("BF16", (24_576, h)),
            "model.layers.0.input_layernorm.weight": ("BF16", (h,)),
            "model.norm.weight": ("BF16", (h,))}


def test_gemma_weights_agree_with_its_head_dim_and_not_without_it():
    """Gemma-7B's 256-wide heads match q_proj's 4,096 rows; drop head_dim and the config says 192: the weights disagree."""
    config = json.loads((VERIFY_FIXTURES / "gemma-7b-it.json").read_text())
    assert lint(LintInputs(config, manifest=_gemma_manifest(config), files=WEIGHTS)) == []
    findings = lint(LintInputs(_with(config, head_dim=...), manifest=_gemma_manifest(config), files=WEIGHTS))
    assert ids(findings) == ["attention-shape-mismatch", "attention-shape-mismatch"]
    assert findings[0].evidence["head_dim"] == 192


@pytest.mark.parametrize(("rope", "expected"), [
    ({"type": "linear", "factor": 2.0}, []),
    ({"type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4096}, ["rope-scaling-version"]),
])
def test_llama_before_4_43_takes_exactly_type_and_factor(rope, expected):
    """transformers 4.31-4.42 refuse a Llama rope_scaling with any key beside type and factor."""
    config = _with(LLAMA1, rope_scaling=rope, transformers_version="4.40.0")
    assert ids(lint(LintInputs(config, files=WEIGHTS))) == expected


ODD_VALUES = (None, True, -1, 0, 2**70, 1.5, float("nan"), float("inf"), "", "x" * 300, [], [1, "a"], {}, {"type": 7})


def test_no_input_raises():
    """Real configs with random keys set to odd values (NaN, inf, huge, strings, lists), with odd manifests and
    tokenizer facts: the verifier always answers with findings, never an exception."""
    import random

    rng = random.Random(39)
    bases = [load_config(path) for path in CONFIGS] + [json.loads(p.read_text()) for p in VERIFY_FIXTURES.glob("*.json")]
    for _ in range(600):
        config = copy.deepcopy(rng.choice(bases))
        target = config
        if rng.random() < 0.3 and isinstance(config.get("text_config"), dict):
            target = config["text_config"]
        for key in rng.sample(sorted(target), k=min(3, len(target))) + [rng.choice(("rope_scaling", "head_dim"))]:
            target[key] = rng.choice(ODD_VALUES)
        manifest = rng.choice([None, LLAMA8_WEIGHTS, {"a.weight": ("BF16", (1, -1))}, {"lm_head.weight": ("I8", (2, 2))}])
        facts = rng.choice([None, TokenizerFacts(size=rng.choice((0, 5, 10**9)), model_max_length=rng.choice(
            (None, 1e30, float("nan"), 3.0)), special={"eos_token": ("</s>", rng.choice((-5, 0, 10**12)))})])
        findings = lint(LintInputs(config, manifest=manifest, tokenizer=facts, files=WEIGHTS,
                                   generation_config=rng.choice((None, {"eos_token_id": [1, "x", 10**15]})),
                                   indexes={"model.safetensors.index.json": rng.choice(ODD_VALUES)}))
        assert all(f.severity in SEVERITIES for f in findings)
        json.dumps([f.to_dict() for f in findings], allow_nan=True)

