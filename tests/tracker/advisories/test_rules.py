"""rules.py: every rule of data/rules.json judges a real advisory, and the order of the rules matters."""

from __future__ import annotations

import json

import pytest

from tracker.advisories.records import AdvisoryIndex, merge_aliases
from tracker.advisories.rules import (
    REPO,
    RULES_FILE,
    RUNTIME,
    UNCLASSIFIED,
    default_rules,
    judge,
    load_rules,
)

# (rule id, real record, package, verdict): one row per rule of the table, each on a real advisory.
RULE_CASES = [
    ("redos", "PYSEC-2025-40", "transformers", RUNTIME),
    ("chat-template-path", "PYSEC-2026-3929", "transformers", REPO),
    ("config-key-code", "PYSEC-2026-2289", "transformers", REPO),
    ("loader-deserialization", "PYSEC-2024-227", "transformers", REPO),
    ("remote-code", None, "transformers", REPO),  # no real record reaches it first: see below
    ("torch-checkpoint-deserialization", "PYSEC-2026-2286", "torch", REPO),
    ("torch-pt2-deserialization", "PYSEC-2026-139", "torch", REPO),
    ("torch-api-misuse", "PYSEC-2022-43015", "torch", RUNTIME),
    ("denial-of-service", None, "torch", RUNTIME),
    ("memory-safety", None, "torch", RUNTIME),
    ("local-environment", "PYSEC-2023-299", "transformers", RUNTIME),
]


def _advisory(records, record_id):
    [advisory] = merge_aliases([records[record_id]])
    return advisory


def test_every_rule_has_a_case():
    """The table above covers every rule of the data file, in the file's order."""
    assert [c[0] for c in RULE_CASES] == [r.id for r in default_rules()]


@pytest.mark.parametrize(("rule_id", "record_id", "package", "verdict"), [c for c in RULE_CASES if c[1]],
                         ids=[c[0] for c in RULE_CASES if c[1]])
def test_rule_judges_its_real_advisory(records, rule_id, record_id, package, verdict):
    """Each rule is the first to match a real advisory of its kind, with the verdict it declares."""
    judgement = judge(_advisory(records, record_id), package)
    assert (judgement.rule, judgement.verdict) == (rule_id, verdict)


def test_remote_code_rule_on_the_rules_that_precede_it_removed(records):
    """With the config-key rule taken out, the LightGlue trust_remote_code advisory falls to remote-code."""
    rules = [r for r in default_rules() if r.id != "config-key-code"]
    assert judge(_advisory(records, "PYSEC-2026-2290"), "transformers", rules).rule == "remote-code"


@pytest.mark.parametrize(
    ("rule_id", "record_id"),
    [("denial-of-service", "PYSEC-2026-1970"), ("memory-safety", "PYSEC-2025-189")],
)
def test_generic_runtime_rules_without_the_torch_rule(records, rule_id, record_id):
    """Without torch-api-misuse, the ctc_loss DoS and the profiler memory corruption fall to the generic rules."""
    rules = [r for r in default_rules() if r.id != "torch-api-misuse"]
    judgement = judge(_advisory(records, record_id), "torch", rules)
    assert (judgement.rule, judgement.verdict) == (rule_id, RUNTIME)


def test_first_matching_rule_wins(records):
    """PYSEC-2026-2289 speaks of config.json *and* deserialization: config-key-code, listed first, decides."""
    advisory = _advisory(records, "PYSEC-2026-2289")
    deserialization = next(r for r in default_rules() if r.id == "loader-deserialization")
    assert deserialization.matches(advisory, "transformers")
    assert judge(advisory, "transformers").rule == "config-key-code"


def test_cwe_alone_matches(records):
    """GHSA-37q5-v5qm-c9v8 is judged by its CWE-502 even before its text is read."""
    rule = next(r for r in default_rules() if r.id == "loader-deserialization")
    advisory = _advisory(records, "GHSA-37q5-v5qm-c9v8")
    assert "CWE-502" in advisory.cwe_ids and rule.matches(advisory, "transformers")


def test_requirements_decide_relevance(records):
    """The torch checkpoint rule matters only to revisions holding pickle weights."""
    judgement = judge(_advisory(records, "PYSEC-2026-2286"), "torch")
    assert judgement.relevant({"pickle_weights", "config"})
    assert not judgement.relevant({"safetensors", "config"})


def test_unmatched_advisory_is_unclassified(records):
    """An advisory no rule matches is neither repo-triggerable nor runtime-only, and says so."""
    advisory = _advisory(records, "PYSEC-2023-299")
    rules = [r for r in default_rules() if r.id != "local-environment"]
    assert judge(advisory, "transformers", rules).verdict == UNCLASSIFIED


def test_every_bundled_advisory_is_judged(records):
    """No real advisory of the bundle ends unclassified with the shipped rules."""
    index = AdvisoryIndex.build(records.values())
    verdicts = {(a.key, p): judge(a, p).verdict for a in index.advisories for p in a.packages()}
    assert UNCLASSIFIED not in verdicts.values()


def test_rule_file_is_checked(tmp_path):
    """A rule with an unknown verdict, or two rules with one id, make the file unusable."""
    doc = json.loads(RULES_FILE.read_text())
    bad = tmp_path / "rules.json"
    bad.write_text(json.dumps({"rules": [{**doc["rules"][0], "verdict": "maybe"}]}))
    with pytest.raises(ValueError, match="verdict"):
        load_rules(bad)
    bad.write_text(json.dumps({"rules": [doc["rules"][0], doc["rules"][0]]}))
    with pytest.raises(ValueError, match="unique"):
        load_rules(bad)
