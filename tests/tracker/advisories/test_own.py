"""own.py: the real differs' Changes on real files become hubwatch's own OSV records, one test per class;
every record validates against the official OSV schema."""

from __future__ import annotations

import json
import math

import pytest

from tests.support.pickle_repos import calling_fragment, scanned, tensor_pickle, torch_zip
from tracker.advisories.own import (
    ID_PREFIX,
    RECOGNISERS,
    classify,
    close_record,
    own_classes,
    own_id,
    own_records,
)
from tracker.differs import diff_snapshots
from tracker.formats.manifest import TensorInfo, WeightManifest
from tracker.revision.changes import Change, ChangeKind, Severity

from .kit import T0, real, snapshot

REPO = "org/model"
OLD_SHA, NEW_SHA, LATER_SHA = "1" * 40, "2" * 40, "3" * 40
HUB = "https://huggingface.co"
PHI = "histories/microsoft/phi-2/commits"
TEMPLATE = "chat_templates/meta-llama-Meta-Llama-3-8B-Instruct/2024-05-add-generation-prompt.jinja"


def minilm_manifest() -> WeightManifest:
    header = json.loads(real("differs/all-minilm-l6-v2/model.safetensors.header.json"))
    return WeightManifest(tuple(TensorInfo(n, s["dtype"], tuple(s["shape"])) for n, s in header.items() if n != "__metadata__"))


def _json_edit(path: str, **changes) -> dict:
    doc = json.loads(real(path))
    doc.update(changes)
    return doc


def _scanned_pickle(payload: bytes) -> object:
    """A snapshot whose pytorch_model.bin is a torch zip with `payload` in its data.pkl, scanned."""
    snap = snapshot(CONFIG, lfs={"pytorch_model.bin": payload.hex() or "benign"})
    snap.scans["pytorch_model.bin"] = scanned("pytorch_model.bin", torch_zip(tensor_pickle(payload)))
    return snap


def _card_with_license(license_name: str) -> str:
    return real("differs/all-minilm-l6-v2/README.md").decode().replace("license: apache-2.0", f"license: {license_name}")


CONFIG = {"config.json": real("differs/all-minilm-l6-v2/config.json")}

# (class, old snapshot, new snapshot): each a real file, or a real file with the edit that makes the change.
CLASS_CASES = [
    ("pickle-added", snapshot(CONFIG), snapshot(CONFIG, lfs={"pytorch_model.bin": "p1"})),
    ("pickle-dangerous-import", snapshot(CONFIG), _scanned_pickle(calling_fragment("os", "system", "id"))),
    ("pickle-unknown-import", snapshot(CONFIG), _scanned_pickle(calling_fragment("somepkg", "thing", "x"))),
    ("pickle-replaces-safetensors",
     snapshot(CONFIG, lfs={"model.safetensors": "s1", "pytorch_model.bin": "p1"}, manifests={"model.safetensors": minilm_manifest()}),
     snapshot(CONFIG, lfs={"pytorch_model.bin": "p1"})),
    ("custom-code", snapshot(CONFIG), snapshot({**CONFIG, "configuration_phi.py": real("differs/phi-2/configuration_phi.py")})),
    ("requirements-source",
     snapshot({"requirements.txt": real("differs/requirements/requirements.txt")}),
     snapshot({"requirements.txt": b"--extra-index-url https://download.pytorch.org/whl/cu121\n"
                                   + real("differs/requirements/requirements.txt")})),
    ("auto-map",
     snapshot({"config.json": real("differs/phi-2/config.phi-native.json")}),
     snapshot({"config.json": real("differs/phi-2/config.phi-auto-map.json")})),
    ("cross-repo-code",
     snapshot({"config.json": real("differs/phixtral-2x2_8/config.local-auto-map.json")}),
     snapshot({"config.json": real("differs/phixtral-2x2_8/config.cross-repo-auto-map.json")})),
    ("config-code-reference",
     snapshot({"config.json": real("differs/llama-3.1-8b-instruct/config.json")}),
     snapshot({"config.json": _json_edit("differs/llama-3.1-8b-instruct/config.json",
                                         _attn_implementation_internal="attacker-org/flash-kernels")})),
    ("chat-template-dangerous",
     snapshot({"chat_template.jinja": real(TEMPLATE)}),
     snapshot({"chat_template.jinja": real(TEMPLATE).decode() + "{{ self.__init__.__globals__ }}"})),
    ("silent-weight-swap",
     snapshot(CONFIG, lfs={"model.safetensors": "s1"}, manifests={"model.safetensors": minilm_manifest()}),
     snapshot(CONFIG, lfs={"model.safetensors": "s2"}, manifests={"model.safetensors": minilm_manifest()})),
    ("gguf-changed", snapshot(CONFIG), snapshot(CONFIG, lfs={"model-Q4_K_M.gguf": "g1"})),
    ("special-tokens",
     snapshot({"special_tokens_map.json": real("differs/all-minilm-l6-v2/special_tokens_map.json")}),
     snapshot({"special_tokens_map.json": _json_edit("differs/all-minilm-l6-v2/special_tokens_map.json", eos_token="[SEP2]")})),
    ("stop-token-dropped",
     snapshot({"generation_config.json": real("differs/llama-3.1-8b-instruct/generation_config.json")}),
     snapshot({"generation_config.json": _json_edit("differs/llama-3.1-8b-instruct/generation_config.json",
                                                    eos_token_id=[128001, 128008])})),
    ("license-or-gating",
     snapshot({"README.md": real("differs/all-minilm-l6-v2/README.md")}),
     snapshot({"README.md": _card_with_license("other")})),
]


def changes_between(old, new) -> list[Change]:
    new.sha = NEW_SHA
    return diff_snapshots(old, new)


def test_every_class_has_a_case():
    """Each class of data/own_classes.json has a recogniser and a case here (history rewrite below)."""
    assert set(own_classes()) == set(RECOGNISERS)
    assert {c[0] for c in CLASS_CASES} | {"history-rewrite"} == set(own_classes())


@pytest.mark.parametrize(("class_id", "old", "new"), CLASS_CASES, ids=[c[0] for c in CLASS_CASES])
def test_security_change_becomes_an_osv_record(class_id, old, new, osv_schema):
    """The real differ's Change of this kind is recognised, and the record it makes is valid OSV."""
    changes = changes_between(old, new)
    records = own_records(REPO, NEW_SHA, changes, hub_url=HUB, published_at=T0, commit_title="Update")
    mine = [r for r in records if r["database_specific"]["hubwatch"]["class"] == class_id]
    assert len(mine) == 1, [c.summary for c in changes]
    record = mine[0]
    assert list(osv_schema.iter_errors(record)) == []
    assert record["id"] == own_id(REPO, NEW_SHA, class_id) and record["id"].startswith(ID_PREFIX)
    assert record["affected"] == [{
        "package": {"ecosystem": "GIT", "name": "https://huggingface.co/org/model"},
        "ranges": [{"type": "GIT", "repo": "https://huggingface.co/org/model", "events": [{"introduced": NEW_SHA}]}],
    }]
    assert record["references"][0] == {"type": "INTRODUCED", "url": f"https://huggingface.co/org/model/commit/{NEW_SHA}"}
    assert record["published"] == record["modified"] == "2026-11-29T12:00:00Z"
    assert record["database_specific"]["hubwatch"]["severity"] == own_classes()[class_id].severity


def test_history_rewrite_becomes_an_osv_record(osv_schema):
    """The history-rewrite Change the ingest writes (kind repo, detail.rewrite) becomes a medium record."""
    rewrite = Change(ChangeKind.REPO, "", "history rewritten: 1 commit(s) seen before are no longer on main (0123456789ab)",
                     Severity.WARNING, {"rewrite": True, "dropped": ["0123456789ab" + "0" * 28], "branch": "main"}, security=True)
    [record] = own_records(REPO, NEW_SHA, [rewrite], hub_url=HUB, published_at=T0)
    assert record["summary"] == "org/model: history rewritten"
    assert record["database_specific"]["hubwatch"]["paths"] == ["0123456789ab" + "0" * 28]
    assert osv_schema.is_valid(record)


def test_pickle_records_name_the_file_and_callable():
    """A dangerous import's record names the file and the callable, in its summary, details and event title."""
    from tracker.advisories.events import own_advisory_event

    changes = changes_between(snapshot(CONFIG), _scanned_pickle(calling_fragment("os", "system", "id")))
    [record] = own_records(REPO, NEW_SHA, changes, hub_url=HUB, published_at=T0)
    assert record["summary"] == "org/model: pickle imports a dangerous callable (pytorch_model.bin: os.system)"
    assert "os.system in archive/data.pkl at byte" in record["details"]
    event = own_advisory_event(REPO, NEW_SHA, record)
    assert event.severity == "critical" and "(pytorch_model.bin: os.system)" in event.title


def test_a_pickle_of_tensor_rebuilds_only_makes_no_record():
    """A torch checkpoint importing only tensor rebuilds is a notice and no own record."""
    changes = changes_between(snapshot(CONFIG), _scanned_pickle(b""))
    [weights] = [c for c in changes if c.path == "pytorch_model.bin"]
    assert weights.severity == Severity.NOTICE and "pickle format, imports only tensor rebuilds" in weights.summary
    assert own_records(REPO, NEW_SHA, changes, hub_url=HUB, published_at=T0) == []


def test_harmless_changes_make_no_record():
    """A config value change and a removed .py are not advisories (nothing dangerous was introduced)."""
    config = snapshot({"config.json": real("differs/llama-3.1-8b-instruct/config.json")})
    tweaked = snapshot({"config.json": _json_edit("differs/llama-3.1-8b-instruct/config.json", rope_theta=600000.0)})
    assert own_records(REPO, NEW_SHA, changes_between(config, tweaked), hub_url=HUB, published_at=T0) == []
    with_code = snapshot({"configuration_phi.py": real("differs/phi-2/configuration_phi.py")})
    assert own_records(REPO, NEW_SHA, changes_between(with_code, snapshot({})), hub_url=HUB, published_at=T0) == []


def test_baseline_summary_is_not_a_change():
    """The baseline Change lists pickle files already there: not an advisory of this commit."""
    baseline = Change(ChangeKind.REPO, "", "baseline: 2 files", Severity.INFO,
                      {"baseline": True, "pickle_files": ["pytorch_model.bin"]}, security=True)
    assert classify(baseline) == {}


def test_several_files_of_one_class_are_one_record():
    """Three shards of pickle weights added in one commit: one record listing the three."""
    old = snapshot(CONFIG)
    new = snapshot(CONFIG, lfs={f"pytorch_model-0000{i}-of-00003.bin": f"p{i}" for i in (1, 2, 3)})
    [record] = own_records(REPO, NEW_SHA, changes_between(old, new), hub_url=HUB, published_at=T0)
    assert record["database_specific"]["hubwatch"]["paths"] == [f"pytorch_model-0000{i}-of-00003.bin" for i in (1, 2, 3)]
    assert record["summary"] == ("org/model: pickle-format weights added or changed (pytorch_model-00001-of-00003.bin, "
                                 "pytorch_model-00002-of-00003.bin, pytorch_model-00003-of-00003.bin)")


def test_custom_code_record_lists_notable_lines():
    """A .py that adds subprocess calls: the record's details quote the added lines."""
    text = real("differs/phi-2/configuration_phi.py").decode()
    evil = text.replace("import logging\n", "import logging\nimport subprocess\n", 1)
    old, new = snapshot({"configuration_phi.py": text}), snapshot({"configuration_phi.py": evil})
    [record] = own_records(REPO, NEW_SHA, changes_between(old, new), hub_url=HUB, published_at=T0)
    assert "Added lines that reach outside the process:\n    import subprocess" in record["details"]


def test_ids_are_stable_and_distinct():
    """The same (repo, commit, class) always gives the same id; any difference gives another."""
    assert own_id(REPO, NEW_SHA, "custom-code") == own_id(REPO, NEW_SHA, "custom-code")
    ids = {own_id(r, s, c) for r in ("a/b", "a/c") for s in (OLD_SHA, NEW_SHA) for c in ("custom-code", "auto-map")}
    assert len(ids) == 8


@pytest.mark.parametrize(
    ("class_id", "old", "new", "later"),
    [
        ("pickle-added", snapshot(CONFIG), snapshot(CONFIG, lfs={"pytorch_model.bin": "p"}), snapshot(CONFIG)),
        ("custom-code", snapshot({}),
         snapshot({"modeling_phi.py": real(f"{PHI}/0004-sync-modeling-phi-with-transformers-4-38/files/modeling_phi.py")}),
         snapshot({"README.md": "moved to transformers"})),
        ("auto-map", snapshot({"config.json": real("differs/phi-2/config.phi-native.json")}),
         snapshot({"config.json": real("differs/phi-2/config.phi-auto-map.json")}),
         snapshot({"config.json": real("differs/phi-2/config.phi-native.json")})),
        ("stop-token-dropped", snapshot({"generation_config.json": real("differs/llama-3.1-8b-instruct/generation_config.json")}),
         snapshot({"generation_config.json": _json_edit("differs/llama-3.1-8b-instruct/generation_config.json",
                                                        eos_token_id=[128001, 128008])}),
         snapshot({"generation_config.json": _json_edit("differs/llama-3.1-8b-instruct/generation_config.json",
                                                        eos_token_id=[128009, 128001, 128008], temperature=0.7)})),
    ],
    ids=["pickle-removed", "code-removed", "auto-map-removed", "stop-token-back"],
)
def test_record_is_fixed_when_what_it_is_about_is_gone(class_id, old, new, later, osv_schema):
    """A later revision without the files (or the auto_map, or with the dropped stop token back) adds a `fixed` event
    and a FIX reference."""
    [record] = [r for r in own_records(REPO, NEW_SHA, changes_between(old, new), hub_url=HUB, published_at=T0)
                if r["database_specific"]["hubwatch"]["class"] == class_id]
    assert close_record(record, new, HUB, T0) is None  # still there
    later.sha = LATER_SHA
    fixed = close_record(record, later, HUB, T0.replace(hour=13))
    assert fixed["affected"][0]["ranges"][0]["events"] == [{"introduced": NEW_SHA}, {"fixed": LATER_SHA}]
    assert fixed["references"][-1] == {"type": "FIX", "url": f"https://huggingface.co/org/model/commit/{LATER_SHA}"}
    assert (fixed["published"], fixed["modified"]) == ("2026-11-29T12:00:00Z", "2026-11-29T13:00:00Z")
    assert close_record(fixed, later, HUB, T0) is None  # fixed once
    assert osv_schema.is_valid(fixed)


def test_classes_without_a_notion_of_gone_stay_open():
    """A silent weight swap is a fact of history: no later revision fixes it."""
    [record] = own_records(REPO, NEW_SHA, changes_between(*CLASS_CASES[8][1:]), hub_url=HUB, published_at=T0)
    assert close_record(record, snapshot({}, sha=LATER_SHA), HUB, T0) is None


# CVSS v3.1 base score (FIRST specification, section 7), to check each class's vector against its label.
_W = {"AV": {"N": 0.85, "A": 0.62, "L": 0.55, "P": 0.2}, "AC": {"L": 0.77, "H": 0.44}, "UI": {"N": 0.85, "R": 0.62},
      "CIA": {"H": 0.56, "L": 0.22, "N": 0.0}, "PR": {"U": {"N": 0.85, "L": 0.62, "H": 0.27}, "C": {"N": 0.85, "L": 0.68, "H": 0.5}}}
BANDS = {"critical": (9.0, 10.0), "high": (7.0, 8.9), "medium-high": (6.0, 7.9), "medium": (4.0, 6.9)}


def _roundup(value: float) -> float:
    i = round(value * 100000)
    return i / 100000.0 if i % 10000 == 0 else (math.floor(i / 10000) + 1) / 10.0


def cvss31(vector: str) -> float:
    m = dict(part.split(":") for part in vector.split("/")[1:])
    iss = 1 - (1 - _W["CIA"][m["C"]]) * (1 - _W["CIA"][m["I"]]) * (1 - _W["CIA"][m["A"]])
    changed = m["S"] == "C"
    impact = 7.52 * (iss - 0.029) - 3.25 * (iss - 0.02) ** 15 if changed else 6.42 * iss
    exploit = 8.22 * _W["AV"][m["AV"]] * _W["AC"][m["AC"]] * _W["PR"][m["S"]][m["PR"]] * _W["UI"][m["UI"]]
    if impact <= 0:
        return 0.0
    return _roundup(min(1.08 * (impact + exploit) if changed else impact + exploit, 10))


@pytest.mark.parametrize(("vector", "score"), [
    ("CVSS:3.1/AV:N/AC:L/PR:N/UI:R/S:U/C:H/I:H/A:H", 8.8),  # the real PYSEC-2024-227 vector, NVD: 8.8
    ("CVSS:3.1/AV:L/AC:L/PR:N/UI:R/S:U/C:H/I:H/A:H", 7.8),  # the real PYSEC-2023-301 vector, NVD: 7.8
    ("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:H", 7.5),  # the real PYSEC-2025-40 vector, NVD: 7.5
])
def test_cvss_calculator_agrees_with_nvd(vector, score):
    """The calculator below reproduces the scores NVD gives the real records' vectors."""
    assert cvss31(vector) == score


@pytest.mark.parametrize("class_id", sorted(own_classes()))
def test_class_vector_scores_in_its_severity_band(class_id):
    """Each class's CVSS vector scores within the band of the severity REFERENCE.md suggests for it."""
    cls = own_classes()[class_id]
    low, high = BANDS[cls.severity]
    assert low <= cvss31(cls.cvss) <= high, (cls.cvss, cvss31(cls.cvss))
