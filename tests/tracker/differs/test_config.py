"""The config differ on real config files (tests/fixtures/differs/SOURCES.md says where each came from)."""

from __future__ import annotations

import json

import pytest

from tracker.differs import config
from tracker.revision.changes import ChangeKind, Severity

LLAMA = "llama-3.1-8b-instruct"
GEN = f"{LLAMA}/generation_config.json"


def content(kit, source):
    """A fixture name -> its bytes; (name, edit) -> the edited JSON; anything else as is."""
    if isinstance(source, str):
        return kit.bytes(source)
    if isinstance(source, tuple):
        return kit.edited(*source)
    return source


def one_change(kit, path, old_source, new_source, **extra_files):
    old = kit.build({path: content(kit, old_source), **extra_files})
    new = kit.build({path: content(kit, new_source), **extra_files})
    changes = config.diff(old, new)
    assert len(changes) == 1, changes
    return changes[0]


def set_keys(**values):
    return lambda doc: doc.update(values)


def drop_keys(*keys):
    return lambda doc: [doc.pop(k) for k in keys]


REVISIONS = [
    # (id, repo path, old, new, severity, structural, security, summary fragments)
    ("llama3-eos-single-to-list", "generation_config.json", f"{LLAMA}/generation_config.eos-128001.json", GEN,
     Severity.WARNING, False, False, ["generation_config.json: eos_token_id 128001 -> [128001, 128008, 128009]"]),
    ("llama3-eos-list-grows", "generation_config.json", f"{LLAMA}/generation_config.eos-two-ids.json", GEN,
     Severity.WARNING, False, False, ["eos_token_id [128001, 128009] -> [128001, 128008, 128009]"]),
    ("mistral-v0.1-to-v0.3", "config.json", "mistral-7b/config.v0.1.json", "mistral-7b/config.instruct-v0.3.json",
     Severity.WARNING, True, False,
     ["rope_theta 10000.0 -> 1000000.0", "vocab_size 32000 -> 32768", "sliding_window 4096 -> null",
      "attention_dropout added (0.0)"]),
    ("qwen2.5-0.5b-to-1.5b", "config.json", "qwen2.5/config.0.5b-instruct.json", "qwen2.5/config.1.5b-instruct.json",
     Severity.WARNING, True, False, ["hidden_size 896 -> 1536", "num_hidden_layers 24 -> 28"]),
    ("phi2-mixformer-to-phi", "config.json", "phi-2/config.mixformer-sequential.json", "phi-2/config.phi-auto-map.json",
     Severity.CRITICAL, True, True,
     ['config.json: auto_map changed, architectures ["MixFormerSequentialForCausalLM"] -> ["PhiForCausalLM"], '
      'model_type "mixformer-sequential" -> "phi"']),
    ("phi2-auto-map-dropped", "config.json", "phi-2/config.phi-auto-map.json", "phi-2/config.phi-native.json",
     Severity.CRITICAL, False, True, ["auto_map removed", 'transformers_version "4.37.0" -> "4.42.0.dev0"']),
    ("phixtral-cross-repo-code", "config.json", "phixtral-2x2_8/config.local-auto-map.json",
     "phixtral-2x2_8/config.cross-repo-auto-map.json",
     Severity.CRITICAL, False, True, ["auto_map changed: code from mlabonne/phixtral-2x2_8"]),
    ("version-bump-only", "config.json", f"{LLAMA}/config.json",
     (f"{LLAMA}/config.json", set_keys(transformers_version="4.45.0.dev0")),
     Severity.INFO, False, False, ['config.json: transformers_version "4.42.3" -> "4.45.0.dev0"']),
    ("rope-scaling-factor", "config.json", f"{LLAMA}/config.json",
     (f"{LLAMA}/config.json", lambda d: d["rope_scaling"].update(factor=16.0)),
     Severity.WARNING, True, False, ["config.json: rope_scaling.factor 8.0 -> 16.0"]),
    ("dtype-only", "config.json", f"{LLAMA}/config.json", (f"{LLAMA}/config.json", set_keys(torch_dtype="float16")),
     Severity.WARNING, True, False, ['torch_dtype "bfloat16" -> "float16"']),
    ("use-cache-is-not-structural", "config.json", f"{LLAMA}/config.json",
     (f"{LLAMA}/config.json", set_keys(use_cache=False)), Severity.NOTICE, False, False, ["use_cache true -> false"]),
    ("pooling-dimension", "1_Pooling/config.json", "all-minilm-l6-v2/1_Pooling/config.json",
     ("all-minilm-l6-v2/1_Pooling/config.json", set_keys(word_embedding_dimension=768)),
     Severity.WARNING, True, False, ["1_Pooling/config.json: word_embedding_dimension 384 -> 768"]),
    ("pooling-mode", "1_Pooling/config.json", "all-minilm-l6-v2/1_Pooling/config.json",
     ("all-minilm-l6-v2/1_Pooling/config.json", set_keys(pooling_mode_cls_token=True, pooling_mode_mean_tokens=False)),
     Severity.NOTICE, False, False, ["pooling_mode_cls_token false -> true"]),
    ("modules-json-any-change", "modules.json", "all-minilm-l6-v2/modules.json",
     ("all-minilm-l6-v2/modules.json", lambda d: d.pop()), Severity.WARNING, True, False, ["modules.json"]),
    ("sentence-transformers-version", "config_sentence_transformers.json",
     "all-minilm-l6-v2/config_sentence_transformers.json",
     ("all-minilm-l6-v2/config_sentence_transformers.json", lambda d: d["__version__"].update(transformers="4.41.0")),
     Severity.INFO, False, False, ["__version__"]),
    ("trust-remote-code-enabled", "config_sentence_transformers.json",
     "all-minilm-l6-v2/config_sentence_transformers.json",
     ("all-minilm-l6-v2/config_sentence_transformers.json", set_keys(model_kwargs={"trust_remote_code": True})),
     Severity.CRITICAL, False, True, ["model_kwargs.trust_remote_code enabled"]),
    ("custom-pipelines-added", "config.json", "phi-2/config.phi-native.json",
     ("phi-2/config.phi-native.json",
      set_keys(custom_pipelines={"text-generation": {"impl": "pipeline_phi.PhiPipeline",
                                                     "pt": ["AutoModelForCausalLM"]}})),
     Severity.CRITICAL, False, True, ["custom_pipelines added"]),
    ("attention-kernel-from-hub", "config.json", f"{LLAMA}/config.json",
     (f"{LLAMA}/config.json", set_keys(_attn_implementation="kernels-community/flash-attn3")),
     Severity.CRITICAL, False, True, ["kernel code from kernels-community/flash-attn3"]),
    ("attention-builtin", "config.json", f"{LLAMA}/config.json",
     (f"{LLAMA}/config.json", set_keys(_attn_implementation="sdpa")),
     Severity.NOTICE, False, False, ['_attn_implementation added ("sdpa")']),
]


@pytest.mark.parametrize(
    "path, old, new, severity, structural, security, fragments",
    [r[1:] for r in REVISIONS],
    ids=[r[0] for r in REVISIONS],
)
def test_real_config_revisions(kit, path, old, new, severity, structural, security, fragments):
    """Each real revision pair yields one Change with the expected severity, flags and summary."""
    change = one_change(kit, path, old, new)
    assert change.kind is ChangeKind.CONFIG and change.path == path
    assert (change.severity, change.structural, change.security) == (severity, structural, security)
    for fragment in fragments:
        assert fragment in change.summary
    assert change.summary.startswith(path)
    json.dumps(change.to_dict())


def test_reformatted_file(kit):
    """A file rewritten with the same values is an info Change that says nothing changed."""
    compact = json.dumps(kit.json(f"{LLAMA}/config.json")).encode()
    change = one_change(kit, "config.json", f"{LLAMA}/config.json", compact)
    assert change.summary == "config.json: reformatted, no value changed"
    assert change.severity is Severity.INFO and change.detail["changes"] == []


def test_eos_change_comes_first_in_the_summary(kit):
    """The eos id change in generation_config.json leads the summary, ahead of sampling settings."""
    new = (GEN, set_keys(temperature=0.7, eos_token_id=[128001, 128009]))
    change = one_change(kit, "generation_config.json", GEN, new)
    assert change.summary.startswith(
        "generation_config.json: eos_token_id [128001, 128008, 128009] -> [128001, 128009]"
    )


def test_cross_repo_finding_names_the_repo(kit):
    """An auto_map value `repo--module.Class` is reported with the repo it pulls code from."""
    change = one_change(kit, "config.json", "phixtral-2x2_8/config.local-auto-map.json",
                        "phixtral-2x2_8/config.cross-repo-auto-map.json")
    [finding] = change.detail["security"]
    assert finding["repos"] == ["mlabonne/phixtral-2x2_8"]
    assert finding["path"] == "auto_map" and finding["severity"] == "critical"


def test_detail_lists_key_changes_with_paths(kit):
    """The detail carries each key change with a dotted path and plain old/new values."""
    change = one_change(kit, "config.json", "mistral-7b/config.v0.1.json", "mistral-7b/config.instruct-v0.3.json")
    by_path = {c["path"]: c for c in change.detail["changes"]}
    assert by_path["vocab_size"] == {"path": "vocab_size", "change": "changed", "old": 32000, "new": 32768}
    assert by_path["sliding_window"]["change"] == "changed" and by_path["sliding_window"]["new"] is None
    assert by_path["attention_dropout"]["change"] == "added"


def test_sub_config_paths_are_dotted(kit):
    """A change inside a sub-config reads `text_config.num_hidden_layers` and is structural."""
    base = {"model_type": "llava", "text_config": kit.json(f"{LLAMA}/config.json")}
    grown = json.loads(json.dumps(base))
    grown["text_config"]["num_hidden_layers"] = 40
    change = one_change(kit, "config.json", base, grown)
    assert "text_config.num_hidden_layers 32 -> 40" in change.summary
    assert change.structural and change.severity is Severity.WARNING


@pytest.mark.parametrize("key, value", [("sliding_window", 4096), ("use_sliding_window", True),
                                        ("kv_lora_rank", 512), ("attention_chunk_size", 8192)])
def test_attention_layout_keys_are_structural(kit, key, value):
    """A sliding window or a latent cache added to a config changes what serving it costs: structural, re-estimated."""
    old = kit.json(f"{LLAMA}/config.json")
    change = one_change(kit, "config.json", old, {**old, key: value})
    assert change.structural and change.severity is Severity.WARNING


def test_huge_id2label_is_summarised(kit):
    """A 1,000-entry id2label that changes is summarised by counts, never listed entry by entry."""
    labels = {str(i): f"class_{i}" for i in range(1000)}
    relabelled = {**labels, "7": "tabby cat", "1000": "extra"}
    old = {**kit.json(f"{LLAMA}/config.json"), "id2label": labels}
    new = {**kit.json(f"{LLAMA}/config.json"), "id2label": relabelled}
    change = one_change(kit, "config.json", old, new)
    [entry] = change.detail["changes"]
    assert entry["summary"]["added"] == 1 and entry["summary"]["changed"] == 1
    assert entry["summary"]["examples"]["changed"] == {"7": ["class_7", "tabby cat"]}
    assert not change.structural and change.severity is Severity.NOTICE
    assert "id2label: 1 added, 1 changed" in change.summary
    assert len(json.dumps(change.detail)) < 2_000


@pytest.mark.parametrize(
    "old_files, new_files, summary, severity",
    [
        ({}, {"generation_config.json": GEN}, "generation_config.json added", Severity.WARNING),
        ({"generation_config.json": GEN}, {}, "generation_config.json removed", Severity.WARNING),
        ({}, {"preprocessor_config.json": "all-minilm-l6-v2/sentence_bert_config.json"},
         "preprocessor_config.json added", Severity.NOTICE),
        ({}, {"config.json": "phi-2/config.phi-auto-map.json"}, "config.json added: auto_map added", Severity.CRITICAL),
    ],
    ids=["generation-config-added", "generation-config-removed", "processor-config-added", "auto-map-config-added"],
)
def test_files_added_and_removed(kit, old_files, new_files, summary, severity):
    """Adding or removing a config file is one Change that says so (security keys still found)."""
    old = kit.build({p: kit.bytes(f) for p, f in old_files.items()})
    new = kit.build({p: kit.bytes(f) for p, f in new_files.items()})
    [change] = config.diff(old, new)
    assert change.summary.startswith(summary)
    assert change.severity is severity


def test_malformed_new_version(kit):
    """A new version that is not valid JSON is a warning carrying the parse error, not an exception."""
    change = one_change(kit, "config.json", f"{LLAMA}/config.json", f"{LLAMA}/config.truncated.json")
    assert change.severity is Severity.WARNING
    assert "not valid JSON" in change.summary and "not valid JSON" in change.detail["error"]


def test_malformed_old_version(kit):
    """An unreadable previous version is compared as empty, so code keys in the new one are still caught."""
    change = one_change(kit, "config.json", f"{LLAMA}/config.truncated.json", "phi-2/config.phi-auto-map.json")
    assert "previous version unreadable" in change.summary
    assert change.severity is Severity.CRITICAL and change.security
    assert "not valid JSON" in change.detail["old_error"]


def test_unavailable_config_is_compared_by_content_id(kit):
    """A config we could not download is reported changed by content id, with the reason."""
    old = kit.build({"config.json": kit.bytes(f"{LLAMA}/config.json")})
    new = kit.build(unavailable={"config.json": ("404 from the Hub", b"{}")})
    [change] = config.diff(old, new)
    assert change.severity is Severity.NOTICE
    assert change.detail["unavailable"] == "404 from the Hub"
    assert change.detail["old_content_id"] != change.detail["new_content_id"]


def test_unchanged_and_first_revision(kit):
    """No Change for an identical file, and none at all for a repo's first revision."""
    snap = kit.build({"config.json": kit.bytes(f"{LLAMA}/config.json")})
    assert config.diff(snap, kit.build({"config.json": kit.bytes(f"{LLAMA}/config.json")})) == []
    assert config.diff(None, snap) == []


def test_other_kinds_are_ignored(kit):
    """Files of other kinds (tokenizer_config.json, weights, README) are not the config differ's."""
    old = kit.build({"tokenizer_config.json": {"a": 1}, "README.md": "x"})
    new = kit.build({"tokenizer_config.json": {"a": 2}, "README.md": "y"})
    assert config.diff(old, new) == []
