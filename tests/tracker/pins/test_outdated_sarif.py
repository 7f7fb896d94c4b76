"""`hubwatch outdated --format sarif`: SARIF 2.1.0 code-scanning results on the pins' lines, validated against the
standard's own schema (tests/fixtures/schemas/sarif-schema-2.1.0.json, OASIS sarif-spec, errata01)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.support.cli import run_cli, write_config
from tracker.pins.cache import Pin
from tracker.pins.outdated import ModelReport, SinceChange
from tracker.pins.sarif import RULES, PinSite, render_sarif, sha_columns, sha_site

EVERY = "hubwatch-tests/every-kind"
SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "fixtures" / "schemas" / "sarif-schema-2.1.0.json").read_text())


def valid(log: dict) -> dict:
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    return log


@pytest.fixture
def config(replay, tmp_path: Path, database_url: str) -> Path:
    return write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url)


def test_scan_results_stand_on_the_pins_lines_with_their_fix(replay, config: Path, tmp_path: Path) -> None:
    """Two sites pin an old commit (Python, shell), one the head: each old site is an HW001 result on its line with
    the sha's columns and the fix to the head; the security change since the pin is HW002 on the same lines; the
    pin at the head has no result; the short sha is a notification."""
    replay.set_head(EVERY, 7)
    commits = replay.commits(EVERY)
    old, head = commits[0].sha, commits[6].sha
    root = tmp_path / "src"
    (root / "app").mkdir(parents=True)
    (root / "app" / "model.py").write_text(
        f'from transformers import AutoModel\nmodel = AutoModel.from_pretrained("{EVERY}", revision="{old}")\n')
    (root / "serve.sh").write_text(f"#!/bin/sh\nexec vllm serve {EVERY} --revision {old} --port 8000\n")
    (root / "pinned.py").write_text(f'AutoModel.from_pretrained("{EVERY}", revision="{head}")\n')
    (root / "short.py").write_text(f'snapshot_download("{EVERY}", revision="{old[:7]}")\n')
    result = run_cli("outdated", "--scan", str(root), "--format", "sarif", config=config)
    assert result.returncode == 1  # the short sha cannot be checked, as with every other format
    log = valid(json.loads(result.stdout))
    [run] = log["runs"]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == [r.id for r in RULES]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == root.resolve().as_uri() + "/"
    behind = [r for r in run["results"] if r["ruleId"] == "HW001"]
    sites = {(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
              r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in behind}
    assert sites == {("app/model.py", 2), ("serve.sh", 2)}
    for r in behind:
        region = r["locations"][0]["physicalLocation"]["region"]
        uri = r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        line = (root / uri).read_text().splitlines()[region["startLine"] - 1]
        assert line[region["startColumn"] - 1:region["endColumn"] - 1] == old
        [fix] = r["fixes"]
        [replacement] = fix["artifactChanges"][0]["replacements"]
        assert replacement["deletedRegion"] == region and replacement["insertedContent"]["text"] == head
        assert "6 commit(s) behind main" in r["message"]["text"] and r["properties"]["pinned_sha"] == old
    assert {r["ruleId"] for r in run["results"]} >= {"HW001", "HW002"}  # custom code added since: a security change
    assert all(r["properties"]["pinned_sha"] == old for r in run["results"])  # nothing about the pin at the head
    [note] = run["invocations"][0]["toolExecutionNotifications"]
    assert note["message"]["text"].startswith("short.py:1: ") and run["invocations"][0]["executionSuccessful"] is False


def test_fingerprints_hold_while_the_pin_stays_and_change_when_it_moves(replay, config: Path, tmp_path: Path) -> None:
    """An edit above the pin moves its line, not its fingerprint (the alert stays one); `--write` moves the pin to
    the head and the next run has no result left (the alert closes)."""
    replay.set_head(EVERY, 4)
    old = replay.commits(EVERY)[0].sha
    root = tmp_path / "src"
    root.mkdir()
    model = root / "model.py"
    model.write_text(f'AutoModel.from_pretrained("{EVERY}", revision="{old}")\n')

    def prints() -> dict[tuple[str, int], str]:
        log = valid(json.loads(run_cli("outdated", "--scan", str(root), "--format", "sarif", config=config).stdout))
        return {(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]):
                r["partialFingerprints"]["hubwatchPin/v1"] for r in log["runs"][0]["results"]}

    first = prints()
    assert ("HW001", 1) in first
    model.write_text("# the model we serve\n" + model.read_text())
    second = prints()
    assert ("HW001", 2) in second and second[("HW001", 2)] == first[("HW001", 1)]
    assert run_cli("outdated", "--scan", str(root), "--write", config=config).returncode in (0, 1)
    assert prints() == {}


def test_lock_entries_are_located_on_their_revision_line(replay, config: Path, tmp_path: Path, monkeypatch) -> None:
    """A lock file's pin stands on its `revision = "..."` line, relative to the working directory."""
    replay.set_head(EVERY, 3)
    old = replay.commits(EVERY)[0].sha
    lock = tmp_path / "hubwatch.lock"
    lock.write_text(f'version = 1\n\n[[model]]\nrepo = "{EVERY}"\nbranch = "main"\nrevision = "{old}"\n')
    monkeypatch.chdir(tmp_path)
    log = valid(json.loads(run_cli("outdated", "--lock", "hubwatch.lock", "--format", "sarif", config=config).stdout))
    [behind] = [r for r in log["runs"][0]["results"] if r["ruleId"] == "HW001"]
    location = behind["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "hubwatch.lock" and location["region"]["startLine"] == 6
    assert location["region"]["startColumn"] == len('revision = "') + 1


def _report(status: str, changes=(), head: str | None = "b" * 40, message: str | None = None) -> ModelReport:
    return ModelReport(Pin("org/model", "main", "a" * 40, "model 1 (org/model)"), status, head, 2, list(changes), message)


def test_each_finding_kind_has_its_rule_and_level() -> None:
    """Behind (at its worst change's level), unsafe, affected, unavailable and rewritten each their own rule; a pin
    with no file (the HF cache) is a logical location; the log validates."""
    changes = [SinceChange("c" * 40, "config", "config.json", "rope_theta changed", "notice"),
               SinceChange("c" * 40, "weights", "model.bin", "pickle imports os.system", "critical", security=True),
               SinceChange("c" * 40, "advisories", "GHSA-x", "GHSA-x: transformers RCE", "warning")]
    site = {("org/model", "a" * 40): [PinSite("m.py", 3, 5, 45, "m.py:3")]}
    log = valid(render_sarif([_report("behind", changes)], site, [], "1.0"))
    results = {r["ruleId"]: r for r in log["runs"][0]["results"]}
    assert {k: r["level"] for k, r in results.items()} == {"HW001": "note", "HW002": "error", "HW003": "warning"}
    assert "pickle imports os.system" in results["HW002"]["message"]["text"]
    gone = valid(render_sarif([_report("gone", head=None, message="deleted, or made private")], {}, [], "1.0"))
    [result] = gone["runs"][0]["results"]
    assert result["ruleId"] == "HW004" and result["level"] == "error" and "deleted, or made private" in result["message"]["text"]
    assert result["locations"] == [{"logicalLocations": [{"name": "model 1 (org/model)", "kind": "module"}]}]
    moved = _report("behind", changes[:1])
    moved.status, moved.moved_to = "moved", "org/renamed"
    results = {r["ruleId"]: r for r in valid(render_sarif([moved], site, [], "1.0"))["runs"][0]["results"]}
    assert set(results) == {"HW001", "HW004"} and results["HW004"]["level"] == "warning"  # compared under the new name
    assert "update the pin's repo id to org/renamed" in results["HW004"]["message"]["text"]
    [rewritten] = valid(render_sarif([_report("rewritten", message="force-pushed")], {}, [], "1.0"))["runs"][0]["results"]
    assert rewritten["ruleId"] == "HW005"
    assert valid(render_sarif([_report("up_to_date", head="a" * 40)], site, [], "1.0"))["runs"][0]["results"] == []


def test_sha_positions() -> None:
    sha = "d" * 40
    assert sha_columns(f'x = 1\nrevision="{sha}"\n', 2, sha) == (11, 51)
    assert sha_columns("x = 1\n", 5, sha) is None and sha_columns("x = 1\n", 1, sha) is None
    assert sha_site("l.lock", f'a\nrevision = "{sha}"\n', sha, "e") == PinSite("l.lock", 2, 13, 53, "e")
    assert sha_site("l.lock", "nothing\n", sha, "e") == PinSite("l.lock", 1, entry="e")


def test_a_pin_in_a_kubernetes_manifest_stands_on_its_sha(replay, config: Path, tmp_path: Path) -> None:
    """vLLM's args with the revision in the container's env ($(REV)): the result stands on the line that holds the
    sha, with its columns and the fix."""
    replay.set_head(EVERY, 4)
    old = replay.commits(EVERY)[0].sha
    root = tmp_path / "deploy"
    root.mkdir()
    (root / "vllm.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n        - name: vllm\n"
        f"          args: [--model, {EVERY}, --revision, $(REV)]\n          env:\n            - name: REV\n"
        f"              value: {old}\n")
    log = valid(json.loads(run_cli("outdated", "--scan", str(root), "--format", "sarif", config=config).stdout))
    [behind] = [r for r in log["runs"][0]["results"] if r["ruleId"] == "HW001"]
    location = behind["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "vllm.yaml"
    line = (root / "vllm.yaml").read_text().splitlines()[location["region"]["startLine"] - 1]
    assert line[location["region"]["startColumn"] - 1:location["region"]["endColumn"] - 1] == old
    assert behind["fixes"][0]["artifactChanges"][0]["replacements"][0]["insertedContent"]["text"] == replay.head_sha(EVERY)


def test_a_derivative_pin_names_its_osv_records_on_hw006() -> None:
    """A pin of a followed derivative behind its base: HW006 names hubwatch's OSV records for it (message and
    `properties.osv_ids`); the log validates; a pin behind with no record says so without ids."""
    from tracker.pins.base_lineage import BaseComparison

    site = {("org/model", "a" * 40): [PinSite("m.py", 3, 5, 45, "m.py:3")]}
    report = _report("up_to_date", head="a" * 40)
    parts = {"chat_template": {"status": "behind", "behind": 1}}
    report.lineage = BaseComparison("org/base", "derivative of org/base (quantized)", "behind", parts,
                                    records=["x_HUBWATCH-aaaa-bbbb-cccc", "x_HUBWATCH-dddd-eeee-ffff"])
    [hw006] = valid(render_sarif([report], site, [], "1.0"))["runs"][0]["results"]
    assert hw006["ruleId"] == "HW006" and hw006["properties"]["osv_ids"] == report.lineage.records
    assert "x_HUBWATCH-aaaa-bbbb-cccc, x_HUBWATCH-dddd-eeee-ffff" in hw006["message"]["text"]
    report.lineage.records = []
    [plain] = valid(render_sarif([report], site, [], "1.0"))["runs"][0]["results"]
    assert "osv_ids" not in plain["properties"] and "OSV" not in plain["message"]["text"]
