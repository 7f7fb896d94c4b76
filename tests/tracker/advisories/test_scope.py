"""scope.py: which models an advisory concerns, derived from the text of real records and matched against
the model facts of real repo configs; bad input concerns every model, with the reason."""

from __future__ import annotations

import json

import pytest

from tracker.advisories.advice import loader_advice
from tracker.advisories.facts import RepoFacts, extract_facts
from tracker.advisories.records import AdvisoryIndex, merge_aliases
from tracker.advisories.rules import RULES_FILE, judge
from tracker.advisories.scope import NO_SCOPES, load_scopes, relevance, scope_of

from .kit import ADVISORY_FIXTURES, moved_fix, real, snapshot

CLIP = "histories/laion/CLIP-ViT-B-32-laion2B-s34B-b79K/commits/0002-add-transformers-clipmodel-weights-and-configs/files"
JINA = "histories/jinaai/jina-clip-v2/commits/0002-upload-jinaclipmodel/files/config.json"
MARIAN = json.loads((ADVISORY_FIXTURES / "osv" / "GHSA-59p9-h35m-wg4g.json").read_text())


def advisory(records, *ids):
    [merged] = merge_aliases([records[i] if isinstance(i, str) else i for i in ids])
    return merged


def scope(records, *ids, package="transformers"):
    merged = advisory(records, *ids)
    return scope_of(merged, package, judge(merged, package).rule)


# (real records merged as one advisory, package, scope entries it gets): one row per bundled advisory.
SCOPE_CASES = [
    (("PYSEC-2025-211",), "transformers", ("perceiver",)),
    (("PYSEC-2024-227",), "transformers", ("mobilevitv2",)),
    (("PYSEC-2024-228",), "transformers", ("maskformer",)),
    (("PYSEC-2026-2290",), "transformers", ("lightglue",)),
    (("PYSEC-2026-2288",), "transformers", ("trainer-rng-state",)),
    (("GHSA-37q5-v5qm-c9v8",), "transformers", ("tf-repo-checkpoint",)),
    (("GHSA-3863-2447-669p", "PYSEC-2023-300"), "transformers", ("pickle-files",)),
    (("GHSA-v68g-wm8c-6x7j", "PYSEC-2023-301"), "transformers", ("pickle-files",)),
    (("PYSEC-2026-2289",), "transformers", ()),  # any config.json: every model
    (("PYSEC-2026-3929",), "transformers", ()),  # chat templates: every model (the rule needs one)
    (("PYSEC-2025-40",), "transformers", ()),
    (("PYSEC-2023-299",), "transformers", ()),
    (("PYSEC-2026-2286",), "torch", ()),
    (("PYSEC-2026-139",), "torch", ()),
    (("PYSEC-2022-43015",), "torch", ()),
    (("PYSEC-2024-251", "GHSA-pg7h-5qx3-wjr3"), "torch", ()),
    (("PYSEC-2026-1970",), "torch", ()),
    (("PYSEC-2025-189",), "torch", ()),
]


def test_every_bundled_advisory_has_a_scope_case(records):
    """The table above covers every advisory of the bundle."""
    index = AdvisoryIndex.build(records.values())
    covered = {advisory(records, *ids).key for ids, _, _ in SCOPE_CASES}
    assert covered == {a.key for a in index.advisories}


@pytest.mark.parametrize(("ids", "package", "entries"), SCOPE_CASES, ids=[c[0][0] for c in SCOPE_CASES])
def test_scope_is_derived_from_the_text(records, ids, package, entries):
    """Each real advisory is scoped to the models or files its text names, or to every model."""
    assert tuple(e.id for e in scope(records, *ids, package=package).entries) == entries


def test_tokenizer_advisory_is_scoped_to_its_tokenizer():
    """The MarianTokenizer ReDoS names Marian: it is about Marian models and the MarianTokenizer class."""
    [merged] = merge_aliases([MARIAN])
    found = scope_of(merged, "transformers", judge(merged, "transformers").rule)
    assert ([e.id for e in found.entries], found.reason) == (
        ["marian-tokenizer"], "GHSA-59p9-h35m-wg4g names Marian models (MarianTokenizer)")


LLAMA = {"config.json": real("differs/llama-3.1-8b-instruct/config.json")}
CLIP_FILES = {"config.json": real(f"{CLIP}/config.json"), "tokenizer_config.json": real(f"{CLIP}/tokenizer_config.json"),
              "preprocessor_config.json": real(f"{CLIP}/preprocessor_config.json")}
OPUS = {"config.json": real("advisories/opus-mt/config.json")}
MASKFORMER = {"config.json": {"architectures": ["MaskFormerForInstanceSegmentation"], "model_type": "maskformer",
                              "backbone_config": {"model_type": "swin"}, "transformers_version": "4.26.0.dev0"}}

# (case, record ids or "marian", files, LFS files, relevant, reason)
RELEVANCE_CASES = [
    ("vision-model-vs-mobilevitv2", ("PYSEC-2024-227",), CLIP_FILES, {}, False,
     "not relevant to this model: about MobileViTV2 models; this revision has model_type clip, clip_text_model, "
     "clip_vision_model; tokenizer CLIPTokenizer"),
    ("maskformer-model", ("PYSEC-2024-228",), MASKFORMER, {}, True,
     "about MaskFormer models: this revision has model_type maskformer"),
    ("tokenizer-advisory-vs-marian", "marian", OPUS, {}, True,
     "about Marian models (MarianTokenizer): this revision has model_type marian"),
    ("tokenizer-class-alone", "marian", {**LLAMA, "tokenizer_config.json": {"tokenizer_class": "MarianTokenizer"}}, {}, True,
     "about Marian models (MarianTokenizer): this revision has tokenizer class MarianTokenizer"),
    ("tokenizer-advisory-vs-llama", "marian", LLAMA, {}, False,
     "not relevant to this model: about Marian models (MarianTokenizer); this revision has model_type llama"),
    ("general-deserialization-with-pickle", ("GHSA-3863-2447-669p", "PYSEC-2023-300"), LLAMA,
     {"pytorch_model.bin": "p"}, True, "about every repo with pickle-format files: this revision has pickle_weights present"),
    ("general-deserialization-safetensors-only", ("GHSA-3863-2447-669p", "PYSEC-2023-300"), LLAMA,
     {"model.safetensors": "s"}, False,
     "not relevant to this model: about every repo with pickle-format files; this revision holds no pickle_weights"),
    ("trainer-checkpoint-file", ("PYSEC-2026-2288",), LLAMA, {"checkpoint-500/rng_state.pth": "r"}, True,
     "about Trainer checkpoints (rng_state*.pth): this revision has file checkpoint-500/rng_state.pth"),
    ("config-key-advisory-concerns-every-model", ("PYSEC-2026-2289",), CLIP_FILES, {}, True,
     "PYSEC-2026-2289 names no model, tokenizer or file: it concerns every model"),
]


@pytest.mark.parametrize(("ids", "files", "lfs", "relevant", "reason"), [c[1:] for c in RELEVANCE_CASES],
                         ids=[c[0] for c in RELEVANCE_CASES])
def test_relevance_to_real_repo_configs(records, ids, files, lfs, relevant, reason):
    """A scoped advisory concerns a revision whose model type, architecture, tokenizer or files it names."""
    merged = merge_aliases([MARIAN])[0] if ids == "marian" else advisory(records, *ids)
    facts = extract_facts(snapshot(files, lfs=lfs))
    judgement = judge(merged, "transformers")
    found = relevance(scope_of(merged, "transformers", judgement.rule), facts)
    assert (found.relevant, found.reason) == (relevant, reason)


def test_custom_code_repo_names_its_classes_through_auto_map():
    """jina-clip-v2's config sends auto_map to another repo: its classes are model facts a scope can name."""
    facts = extract_facts(snapshot({"config.json": real(JINA)}))
    assert facts.auto_map == ("jinaai/jina-clip-implementation--configuration_clip.JinaCLIPConfig",
                              "jinaai/jina-clip-implementation--modeling_clip.JinaCLIPModel")
    assert facts.model_types == ("jina_clip", "jina_clip_text", "jina_clip_vision")


def test_auto_map_class_matches_a_scope(tmp_path, records):
    """A scope naming a class matches a custom-code repo whose auto_map points at that class."""
    doc = json.loads(RULES_FILE.read_text())
    doc["scopes"]["entries"] = [{"id": "jina", "about": "JinaCLIP configs", "packages": ["transformers"],
                                 "text": ["Perceiver"], "names": ["Perceiver"], "architectures": ["JinaCLIPConfig"]}]
    path = tmp_path / "rules.json"
    path.write_text(json.dumps(doc))
    table = load_scopes(path)
    merged = advisory(records, "PYSEC-2025-211")
    found = relevance(scope_of(merged, "transformers", "loader-deserialization", table),
                      extract_facts(snapshot({"config.json": real(JINA)})))
    assert found.reason == ("about JinaCLIP configs: this revision has auto_map class "
                            "jinaai/jina-clip-implementation--configuration_clip.JinaCLIPConfig")


def test_sub_config_model_types_are_facts():
    """The real CLIP config's text and vision sub-configs give their model types too."""
    facts = extract_facts(snapshot(CLIP_FILES))
    assert (facts.model_types, facts.architectures, facts.tokenizer_classes) == (
        ("clip", "clip_text_model", "clip_vision_model"), ("CLIPModel",), ("CLIPTokenizer",))


# --- bad input: concerns every model, with the reason -----------------------------------------------------

def test_record_with_no_text_concerns_every_model(records):
    """A record with neither summary nor details is not scoped away: every model, and why."""
    bare = {k: v for k, v in records["PYSEC-2025-211"].items() if k not in ("summary", "details")}
    found = scope(records, bare)
    assert found.general and found.reason == "PYSEC-2025-211 has no summary or details to scope it by: it concerns every model"


def test_unknown_model_name_concerns_every_model(records):
    """A model the scope table does not know (here the Perceiver record renamed) concerns every model."""
    renamed = {**records["PYSEC-2025-211"],
               "details": records["PYSEC-2025-211"]["details"].replace("Perceiver", "Zebrafish")}
    found = scope(records, renamed)
    assert found.general
    assert found.reason == "PYSEC-2025-211 names Zebrafish, which hubwatch's scope table does not know: it concerns every model"


def test_aliases_that_disagree_on_scope_concern_every_model(records):
    """A GHSA alias of the Perceiver record whose text names no model: the records disagree, every model."""
    ghsa = {"id": "GHSA-0000-perc-eivr", "modified": "2026-05-21T00:00:00Z", "aliases": ["CVE-2025-14920"],
            "summary": "Deserialization of untrusted data in transformers", "details": "",
            "affected": records["PYSEC-2025-211"]["affected"]}
    found = scope(records, "PYSEC-2025-211", ghsa)
    assert found.general
    assert found.reason == ("its records disagree on scope (GHSA-0000-perc-eivr: every repo with pickle-format files; "
                            "PYSEC-2025-211: Perceiver models): it concerns every model")


def test_facts_stored_before_model_facts_count_every_advisory(records):
    """Old stored facts carry no model facts: a scoped advisory counts, and says why."""
    old = RepoFacts.from_dict({"features": ["config"]})
    found = relevance(scope(records, "PYSEC-2025-211"), old)
    assert (found.relevant, found.assumed, found.reason) == (
        True, True, "about Perceiver models; this revision's model facts were not read, so it counts")


def test_scope_entry_must_name_something(tmp_path):
    """A scope entry that names no model, tokenizer, file or feature makes the file unusable."""
    doc = json.loads(RULES_FILE.read_text())
    doc["scopes"]["entries"] = [{"id": "x", "about": "x", "text": ["x"]}]
    path = tmp_path / "rules.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="names no model type"):
        load_scopes(path)


# --- the advice: both floors ----------------------------------------------------------------------------

def test_advice_gives_the_floor_for_this_model_and_for_the_package(records):
    """A Llama repo with pickle weights: its floor leaves out the Perceiver, MobileViTV2, MaskFormer and
    LightGlue advisories, which set the package's floor and are named with the reason."""
    index = AdvisoryIndex.build(records.values())
    facts = extract_facts(snapshot(LLAMA, lfs={"pytorch_model.bin": "p"}))
    advice = loader_advice(index, facts)
    transformers = advice.packages[0]
    assert (transformers.floor, transformers.unfixed) == (">= 5.3.0", ())
    assert (transformers.package_floor, transformers.package_unfixed) == (">= 5.10.0", ("PYSEC-2025-211",))
    assert {b.key for b in transformers.not_counted} == {
        "GHSA-37q5-v5qm-c9v8", "GHSA-fgcw-684q-jj6r", "GHSA-xrqw-3rrv-vx5w", "PYSEC-2024-227", "PYSEC-2024-228",
        "PYSEC-2025-211", "PYSEC-2026-2288"}
    assert advice.sentence == "to load this safely you need transformers >= 5.3.0 (torch >= 2.10.0)"
    assert advice.package_sentence == (
        "for any model: transformers >= 5.10.0, no release fixes PYSEC-2025-211; torch >= 2.10.0, no release fixes "
        "PYSEC-2026-139; 8 of these advisories do not concern this revision")


def test_without_scopes_every_advisory_drives_the_advice(records):
    """With an empty scope table (hubwatch before scopes), the Perceiver advisory is counted for Llama."""
    index = AdvisoryIndex.build(records.values())
    facts = extract_facts(snapshot(LLAMA, lfs={"pytorch_model.bin": "p"}))
    advice = loader_advice(index, facts, scopes=NO_SCOPES)
    assert [b.key for b in advice.packages[0].unfixed] == ["PYSEC-2025-211"]


# --- substance: what a re-announcement is about -----------------------------------------------------------

SUBSTANCE_CASES = [
    ("details reworded", {"details": "Reworded."}, False),
    ("reference added", {"references": [{"type": "WEB", "url": "https://example.org/x"}]}, False),
    ("versions re-enumerated under the same range", {"affected": "versions"}, False),
    ("fix moved", {"affected": "fix"}, True),
    ("severity changed", {"severity": [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:L"}]}, True),
    ("alias added", {"aliases": ["CVE-2026-4372", "GHSA-aaaa-bbbb-cccc"]}, True),
    ("withdrawn", {"withdrawn": "2026-12-01T00:00:00Z"}, True),
]


@pytest.mark.parametrize(("change", "news"), [c[1:] for c in SUBSTANCE_CASES], ids=[c[0] for c in SUBSTANCE_CASES])
def test_substance_moves_only_with_ranges_severity_aliases_or_withdrawal(records, change, news):
    """A new `modified` with the same ranges, severity, aliases and withdrawal keeps the digest."""
    record = records["PYSEC-2026-2289"]
    edited = {**record, **change, "modified": "2026-12-01T08:00:00Z"}
    if change.get("affected") == "versions":
        edited["affected"] = json.loads(json.dumps(record["affected"]))
        edited["affected"][0]["versions"] = edited["affected"][0]["versions"] + ["5.2.1.post1"]
    elif change.get("affected") == "fix":
        edited["affected"] = moved_fix(record, "5.3.1")
    before, after = advisory(records, "PYSEC-2026-2289"), advisory(records, edited)
    assert (before.substance != after.substance) is news
