"""advice.py: loader advice from the real advisories, by what the revision holds."""

from __future__ import annotations

import pytest

from tracker.advisories.advice import loader_advice
from tracker.advisories.facts import RepoFacts, RequirementLine
from tracker.advisories.records import AdvisoryIndex

RUNTIME_ONLY = ("GHSA-282v-666c-3fvg", "GHSA-47fc-vmwq-366v", "GHSA-887c-mr87-cxwp", "GHSA-pg7h-5qx3-wjr3",
                "GHSA-qq3j-4f4f-9583", "PYSEC-2025-189")


@pytest.fixture(scope="module")
def index(records) -> AdvisoryIndex:
    return AdvisoryIndex.build(records.values())


def floors(advice) -> dict[str, str | None]:
    return {p.package: p.floor for p in advice.packages}


ADVICE_CASES = [
    # (revision features, transformers floor, torch floor, torch unfixed)
    ("safetensors-only", {"config", "safetensors"}, ">= 5.3.0", None, ()),
    ("chat-template", {"config", "safetensors", "chat_template"}, ">= 5.10.0", None, ()),
    ("pickle-weights", {"config", "pickle_weights"}, ">= 5.3.0", ">= 2.10.0", ()),
    ("pt2-archive", {"config", "pt2_archive"}, ">= 5.3.0", None, ("PYSEC-2026-139",)),
]


@pytest.mark.parametrize(("features", "transformers", "torch", "torch_unfixed"), [c[1:] for c in ADVICE_CASES],
                         ids=[c[0] for c in ADVICE_CASES])
def test_floors_follow_what_the_revision_holds(index, features, transformers, torch, torch_unfixed):
    """Chat templates raise the transformers floor to the path-trick fix; pickle weights bring in torch's."""
    advice = loader_advice(index, RepoFacts(features=frozenset(features)))
    assert floors(advice) == {"transformers": transformers, "torch": torch}
    assert tuple(b.key for b in advice.packages[1].unfixed) == torch_unfixed


def test_the_sentence(index):
    """The advice reads as one sentence: floors, then what no release fixes."""
    advice = loader_advice(index, RepoFacts(features=frozenset({"config", "chat_template", "pickle_weights"})))
    assert advice.sentence == (
        "to load this safely you need transformers >= 5.10.0 (torch >= 2.10.0); no release fixes transformers: PYSEC-2025-211"
    )


def test_runtime_only_advisories_never_raise_a_floor(index):
    """ReDoS, DoS and API-misuse advisories are listed apart and do not count."""
    advice = loader_advice(index, RepoFacts(features=frozenset({"config", "pickle_weights"})))
    assert advice.runtime_only == RUNTIME_ONLY
    because = {b.key for p in advice.packages for b in p.because + p.unfixed}
    assert not because & set(RUNTIME_ONLY)


def test_advisories_needing_absent_features_are_named(index):
    """A safetensors-only revision: the torch checkpoint and pt2 advisories do not apply, and are listed."""
    advice = loader_advice(index, RepoFacts(features=frozenset({"config", "safetensors"})))
    assert advice.not_relevant == ("GHSA-63cw-57p8-fm3p", "GHSA-xrqw-3rrv-vx5w", "PYSEC-2026-139")


def test_last_affected_gives_a_strict_floor(records):
    """With only the LightGlue advisory (last_affected 5.2.0), the floor is '> 5.2.0'."""
    index = AdvisoryIndex.build([records["PYSEC-2026-2290"]])
    assert floors(loader_advice(index, RepoFacts()))["transformers"] == "> 5.2.0"


def test_withdrawn_advisory_lowers_the_floor(records):
    """Withdraw the config-key advisory (fix 5.3.0): the LightGlue one ('> 5.2.0') is the floor."""
    withdrawn = {**records["PYSEC-2026-2289"], "withdrawn": "2026-11-01T00:00:00Z"}
    index = AdvisoryIndex.build([*(r for i, r in records.items() if i != "PYSEC-2026-2289"), withdrawn])
    assert floors(loader_advice(index, RepoFacts()))["transformers"] == "> 5.2.0"


def test_requirements_below_the_floor_are_noted(index):
    """A requirements.txt pinning torch 2.4.0, or capping transformers below the floor, is called out."""
    facts = RepoFacts(
        features=frozenset({"config", "pickle_weights", "requirements"}),
        requirements=(
            RequirementLine("requirements.txt", 3, "torch==2.4.0", "pin", "torch", "==2.4.0"),
            RequirementLine("requirements.txt", 4, "transformers>=4.40,<5", "range", "transformers", "<5,>=4.40"),
        ),
    )
    advice = loader_advice(index, facts)
    notes = {p.package: p.notes for p in advice.packages}
    assert notes["torch"] == ("requirements.txt:3 pins torch==2.4.0, below the floor >= 2.10.0",)
    assert notes["transformers"] == ("requirements.txt:4 allows transformers<5,>=4.40, which excludes the floor >= 5.3.0",)


def test_no_advisories_no_floor():
    """With nothing known, the advice says so rather than inventing a floor."""
    advice = loader_advice(AdvisoryIndex.build([]), RepoFacts())
    assert advice.sentence == "no known advisory a repo can trigger while loading applies"


def test_libraries_the_revision_names_are_advised_on(index):
    """diffusers and sentence-transformers join the advice when the revision names them."""
    from tracker.advisories.facts import Dependency

    facts = RepoFacts(dependencies=(Dependency("diffusers", "0.18.0.dev0", ("model_index.json:_diffusers_version",)),))
    assert [p.package for p in loader_advice(index, facts).packages] == ["transformers", "torch", "diffusers"]


def test_advice_round_trips_to_json(index):
    """The stored form carries the sentence, the floors and the reasons."""
    data = loader_advice(index, RepoFacts(features=frozenset({"config"}))).to_dict()
    assert data["packages"][0]["because"][0]["key"] == "GHSA-37q5-v5qm-c9v8"
    assert {"sentence", "packages", "runtime_only", "unclassified", "not_relevant", "notes", "package_sentence"} == set(data)
