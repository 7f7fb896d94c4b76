"""facts.py on real repo files: writer versions, model card, requirements, imports of custom code."""

from __future__ import annotations

import pytest

from tracker.advisories.facts import (
    RepoFacts,
    diff_facts,
    extract_facts,
    imports_of,
    parse_requirements,
)

from .kit import real, snapshot

PHI = "histories/microsoft/phi-2/commits"
CLIP = "histories/laion/CLIP-ViT-B-32-laion2B-s34B-b79K/commits/0002-add-transformers-clipmodel-weights-and-configs/files"


def deps(facts: RepoFacts) -> set[tuple[str, str, tuple[str, ...]]]:
    return {(d.package, d.version, d.sources) for d in facts.dependencies}


VERSION_CASES = [
    (
        "llama-config-and-generation-config",
        {"config.json": real("differs/llama-3.1-8b-instruct/config.json"),
         "generation_config.json": real("differs/llama-3.1-8b-instruct/generation_config.json")},
        {("transformers", "4.42.3", ("config.json:transformers_version", "generation_config.json:transformers_version"))},
    ),
    (
        "sentence-transformers-versions",
        {"config.json": real("differs/all-minilm-l6-v2/config.json"),
         "config_sentence_transformers.json": real("differs/all-minilm-l6-v2/config_sentence_transformers.json")},
        {("transformers", "4.8.2", ("config.json:transformers_version",)),
         ("transformers", "4.6.1", ("config_sentence_transformers.json:__version__.transformers",)),
         ("sentence-transformers", "2.0.0", ("config_sentence_transformers.json:__version__.sentence_transformers",)),
         ("torch", "1.8.1", ("config_sentence_transformers.json:__version__.pytorch",))},
    ),
    (
        "diffusers-pipeline-with-components",
        {"model_index.json": real("advisories/sd-v1-5/model_index.json"),
         "unet/config.json": real("advisories/sd-v1-5/unet/config.json"),
         "text_encoder/config.json": real("advisories/sd-v1-5/text_encoder/config.json")},
        {("diffusers", "0.18.0.dev0", ("model_index.json:_diffusers_version",)),
         ("diffusers", "0.17.0.dev0", ("unet/config.json:_diffusers_version",)),
         ("transformers", "4.37.2", ("text_encoder/config.json:transformers_version",))},
    ),
    (
        "dev-version",
        {"config.json": real("differs/mistral-7b/config.instruct-v0.3.json")},
        {("transformers", "4.42.0.dev0", ("config.json:transformers_version",))},
    ),
    (
        "clip-null-top-level-and-nested-configs",
        {"config.json": real(f"{CLIP}/config.json")},
        {("transformers", "", ("config.json:transformers_version",)),
         ("transformers", "4.24.0.dev0", ("config.json:text_config.transformers_version",
                                          "config.json:vision_config.transformers_version"))},
    ),
]


@pytest.mark.parametrize(("files", "expected"), [c[1:] for c in VERSION_CASES], ids=[c[0] for c in VERSION_CASES])
def test_writer_versions(files, expected):
    """Every writer version is found with the file and key it came from."""
    assert deps(extract_facts(snapshot(files))) == expected


def test_null_version_is_recorded_not_queried():
    """The real CLIP config has `"transformers_version": null` at the top: a reason, and no query for it."""
    facts = extract_facts(snapshot({"config.json": real(f"{CLIP}/config.json")}))
    assert [p.reason for p in facts.problems] == [
        "config.json:transformers_version: the version is null; not checked against OSV"
    ]
    assert facts.versions() == [("transformers", "4.24.0.dev0")]


@pytest.mark.parametrize(
    ("version", "reason"),
    [
        ("latest", "config.json:transformers_version: 'latest' is not a PEP 440 version; not checked against OSV"),
        ("", "config.json:transformers_version: the version is empty; not checked against OSV"),
    ],
)
def test_unparseable_writer_version_gives_a_reason(version, reason):
    """A version PEP 440 cannot parse is kept as written, with a readable reason, and the rest still lands."""
    config = real("differs/llama-3.1-8b-instruct/config.json").decode().replace('"4.42.3"', f'"{version}"')
    facts = extract_facts(snapshot({"config.json": config,
                                    "generation_config.json": real("differs/llama-3.1-8b-instruct/generation_config.json")}))
    assert [p.reason for p in facts.problems] == [reason]
    assert facts.versions() == [("transformers", "4.42.3")]  # generation_config.json still counts


def test_local_label_version_is_queried_by_its_public_part():
    """'4.40.0.dev0+local' parses: OSV is asked about 4.40.0.dev0 and the dropped label is noted."""
    config = real("differs/llama-3.1-8b-instruct/config.json").decode().replace('"4.42.3"', '"4.40.0.dev0+local"')
    [dep] = extract_facts(snapshot({"config.json": config})).dependencies
    assert (dep.query_version, dep.note) == ("4.40.0.dev0", "local label +local ignored: compared as 4.40.0.dev0")


def test_model_card_front_matter():
    """library_name and tags come from the real MiniLM model card."""
    facts = extract_facts(snapshot({"README.md": real("differs/all-minilm-l6-v2/README.md")}))
    assert facts.library_name == "sentence-transformers"
    assert facts.tags == ("sentence-transformers", "feature-extraction", "sentence-similarity", "transformers")


def test_malformed_front_matter_is_recorded():
    """A card whose front matter never closes gives a reason, not a crash."""
    card = real("differs/all-minilm-l6-v2/README.md").decode().replace("\n---\n", "\n", 1)
    facts = extract_facts(snapshot({"README.md": card}))
    assert facts.library_name is None
    assert [p.reason for p in facts.problems] == ["README.md: front matter has no closing ---"]


def test_real_requirements_are_pins():
    """Every line of the real requirements.txt is an exact pin, and each becomes a dependency."""
    text = real("differs/requirements/requirements.txt").decode()
    lines = parse_requirements("requirements.txt", text)
    assert {r.kind for r in lines} == {"pin"} and len(lines) == 29
    facts = extract_facts(snapshot({"requirements.txt": text}))
    assert ("torch", "2.4.0") in facts.versions() and ("transformers", "4.43.3") in facts.versions()
    assert next(d for d in facts.dependencies if d.package == "torch").sources == ("requirements.txt:24",)


# A requirements file as remote-code repos write them (the kinds of line pip accepts beyond pins).
MIXED_REQUIREMENTS = """\
--extra-index-url https://download.pytorch.org/whl/cu121
-r base.txt
torch==2.4.0+cu121 --hash=sha256:0123abcd
git+https://github.com/huggingface/transformers.git@main#egg=transformers
flash-attn @ https://github.com/Dao-AILab/flash-attention/releases/download/v2.6.3/flash_attn-2.6.3.whl
numpy>=1.24,\\
  <2
einops  # any version
xformers==0.0.27; sys_platform == "linux"
-e ./local_pkg
--no-binary :all:
accelerate==latest
"""

REQUIREMENT_CASES = [
    (1, "source", None, "adds a package source: pip may take packages from it instead of PyPI"),
    (2, "include", None, "includes another requirements file, not followed: its pins are unknown"),
    (3, "pin", "torch", "per-requirement options --hash=sha256:0123abcd kept as text"),
    (4, "url", "transformers", "installs whatever a VCS checkout serves: no version to check"),
    (5, "url", "flash-attn", ("installs flash-attn from https://github.com/Dao-AILab/flash-attention/releases/download/"
                              "v2.6.3/flash_attn-2.6.3.whl: no version to check")),
    (6, "range", "numpy", "<2,>=1.24 is not a single version: checked against the advice floor"),
    (8, "any", "einops", "any version of einops allowed: no single version to check"),
    (9, "pin", "xformers", 'only when sys_platform == "linux"'),
    (10, "editable", None, "an editable install from a path or URL: no version to check"),
    (11, "option", None, "a pip option, not a requirement"),
]


def test_requirements_with_urls_and_options_keep_text_and_reason():
    """URLs, VCS lines, options and ranges are kept as text with the reason they give no version."""
    lines = parse_requirements("requirements.txt", MIXED_REQUIREMENTS)
    assert [(r.line, r.kind, r.name, r.reason) for r in lines][:-1] == REQUIREMENT_CASES
    last = lines[-1]
    assert (last.kind, last.text) == ("invalid", "accelerate==latest")
    assert last.reason.startswith("not a valid requirement: ")


def test_mixed_requirements_still_give_their_pins():
    """The pins among them are queried; the rest is facts with reasons, nothing lost."""
    facts = extract_facts(snapshot({"requirements.txt": MIXED_REQUIREMENTS}))
    assert facts.versions() == [("torch", "2.4.0"), ("xformers", "0.0.27")]
    assert len(facts.requirements) == 11


IMPORT_CASES = [
    ("configuration_phi", "differs/phi-2/configuration_phi.py",
     [("transformers.configuration_utils", "transformers", False), ("transformers.utils", "transformers", False)]),
    ("modeling_mixformer", f"{PHI}/0002-upload-mixformersequentialforcausallm/files/modeling_mixformer_sequential.py",
     [("torch", "torch", False), ("torch.nn", "torch", False), ("einops", "einops", False),
      ("transformers.activations", "transformers", False), ("transformers", "transformers", False),
      ("transformers.modeling_outputs", "transformers", False),
      ("flash_attn.layers.rotary", "flash-attn", True), ("flash_attn.ops.fused_dense", "flash-attn", True)]),
    ("modeling_phi", f"{PHI}/0003-update-to-transformers-phi-implementation/files/modeling_phi.py",
     [("torch", "torch", False), ("torch.nn.functional", "torch", False), ("torch.utils.checkpoint", "torch", False),
      ("torch.nn", "torch", False), ("transformers.activations", "transformers", False),
      ("transformers.cache_utils", "transformers", False), ("transformers.modeling_attn_mask_utils", "transformers", False),
      ("transformers.modeling_outputs", "transformers", False), ("transformers.modeling_utils", "transformers", False),
      ("transformers.utils", "transformers", False), ("flash_attn", "flash-attn", False),
      ("flash_attn.bert_padding", "flash-attn", False)]),
]


@pytest.mark.parametrize(("path", "expected"), [c[1:] for c in IMPORT_CASES], ids=[c[0] for c in IMPORT_CASES])
def test_imports_of_real_custom_code(path, expected):
    """Third-party imports of real remote code, mapped to PyPI names (optional when inside try/except);
    the standard library and the repo's own modules left out."""
    facts, error = imports_of(path.rsplit("/", 1)[-1], real(path).decode())
    assert error is None
    assert [(f.module, f.package, f.optional) for f in facts] == expected


def test_conditional_and_dynamic_imports():
    """Imports inside try/except ImportError are optional; importlib.import_module("...") is dynamic; an
    import the table does not know is assumed to be its own PyPI name, and says so."""
    code = (
        "import importlib\ntry:\n    import flash_attn\nexcept ImportError:\n    flash_attn = None\n"
        "import cv2\nimport some_private_pkg.sub\nmod = importlib.import_module('timm.models')\nfrom . import local\n"
    )
    facts, _ = imports_of("modeling_x.py", code)
    assert [(f.module, f.package, f.mapping, f.optional, f.dynamic) for f in facts] == [
        ("flash_attn", "flash-attn", "table", True, False),
        ("cv2", "opencv-python", "table", False, False),
        ("some_private_pkg.sub", "some-private-pkg", "assumed", False, False),
        ("timm.models", "timm", "table", False, True),
    ]


def test_code_that_does_not_parse_gives_a_reason_and_the_rest_lands():
    """A .py with a syntax error: its imports are unknown, said with the line; other files still count."""
    broken = real("differs/phi-2/configuration_phi.py").decode().replace(
        "class PhiConfig(PretrainedConfig):", "class PhiConfig(PretrainedConfig)"
    )
    facts = extract_facts(snapshot({
        "configuration_phi.py": broken,
        "modeling_mixformer_sequential.py": real(
            f"{PHI}/0002-upload-mixformersequentialforcausallm/files/modeling_mixformer_sequential.py"
        ),
        "config.json": real("differs/phi-2/config.phi-auto-map.json"),
    }))
    [problem] = facts.problems
    assert problem.path == "configuration_phi.py"
    assert problem.reason.startswith("configuration_phi.py does not parse as Python (line ")
    assert problem.reason.endswith("); its imports are unknown")
    assert {i.package for i in facts.imports} == {"torch", "einops", "transformers", "flash-attn"}
    assert facts.versions() == [("transformers", "4.37.0")]


def test_local_modules_are_not_packages():
    """`import configuration_phi` in a repo that has configuration_phi.py is the repo's own code."""
    facts = extract_facts(snapshot({
        "configuration_phi.py": "import torch\n",
        "modeling_phi.py": "import configuration_phi\nimport torch\n",
    }))
    assert {i.module for i in facts.imports} == {"torch"}


def test_unavailable_files_give_reasons():
    """Files listed but not downloaded (too large, missing) are named with the reason."""
    facts = extract_facts(snapshot(unavailable={"modeling_x.py": "missing upstream", "requirements.txt": "too large"}))
    assert sorted(p.reason for p in facts.problems) == [
        "modeling_x.py: imports unknown, missing upstream",
        "requirements.txt not read: too large",
    ]


@pytest.mark.parametrize(
    ("files", "lfs", "features"),
    [
        ({"config.json": {}}, {"model.safetensors": "s"}, {"config", "safetensors"}),
        ({}, {"pytorch_model.bin": "p"}, {"pickle_weights"}),
        ({}, {"model.pt2": "x"}, {"pt2_archive"}),
        ({}, {"model-q4.gguf": "g"}, {"gguf"}),
        ({"tokenizer_config.json": {"chat_template": "{{ messages }}"}}, {}, {"chat_template"}),
        ({"chat_template.jinja": "{{ messages }}"}, {}, {"chat_template"}),
        ({"config.json": {"auto_map": {"AutoConfig": "configuration_phi.PhiConfig"}}, "configuration_phi.py": "x = 1\n"},
         {}, {"config", "auto_map", "custom_code"}),
        ({"requirements.txt": "torch\n"}, {}, {"requirements"}),
    ],
)
def test_features(files, lfs, features):
    """The repo features the rules look at."""
    assert extract_facts(snapshot(files, lfs=lfs)).features == features


def test_facts_round_trip_through_json():
    """Facts stored as JSON read back equal."""
    facts = extract_facts(snapshot({"requirements.txt": MIXED_REQUIREMENTS, "README.md": real("differs/all-minilm-l6-v2/README.md"),
                                    "modeling.py": "import torch\n"}))
    assert RepoFacts.from_dict(facts.to_dict()) == facts


def test_fact_diff_between_revisions():
    """A version bump, a new import and a changed card are each one readable fact change."""
    old = extract_facts(snapshot({"config.json": real("differs/phi-2/config.phi-auto-map.json"), "modeling.py": "import torch\n"}))
    new_config = real("differs/phi-2/config.phi-auto-map.json").decode().replace('"4.37.0"', '"4.38.2"')
    new = extract_facts(snapshot({"config.json": new_config, "modeling.py": "import torch\nimport einops\n",
                                  "README.md": "---\nlibrary_name: transformers\n---\n"}))
    assert [c["summary"] for c in diff_facts(old, new)] == [
        "transformers (written by): 4.37.0 -> 4.38.2",
        "library_name: None -> transformers",
        "imports: +einops",
    ]
    assert diff_facts(None, new) == []


def test_facts_are_worked_out_once_per_snapshot():
    """The ingest asks again for a snapshot's facts when it is the next revision's parent: the same object comes back
    (nothing read again), equal to what a fresh snapshot of the same files gives."""
    files = {"config.json": real("differs/llama-3.1-8b-instruct/config.json"), "requirements.txt": "torch==2.1.0\n"}
    snap = snapshot(files)
    first = extract_facts(snap)
    assert extract_facts(snap) is first
    assert extract_facts(snapshot(files)) == first and first is not extract_facts(snapshot(files))
