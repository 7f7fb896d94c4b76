"""The `advisories` commands, invoked as the root CLI will (click, with the app factory in ctx.obj)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from storage.front import Storage
from tracker.advisories.service import AdvisoryService
from tracker.cli import cli

from .test_service import REPO, SHAS, ingest, llama, service_for


@dataclass
class _App:
    store: Storage
    advisories: AdvisoryService


@pytest.fixture
def invoke(store, fake, sleeps, clock):
    service = service_for(store, fake, sleeps, clock)
    first = llama(SHAS[0])
    ingest(store, service, first)
    ingest(store, service, llama(SHAS[1], lfs={"original/consolidated.00.pth": "pth"}), parent=first)
    app = _App(store, service)

    def run(*args: str):
        return CliRunner().invoke(cli, ["advisories", *args], obj={"app_factory": lambda logs=True: app}, catch_exceptions=False)

    yield run
    service.close()


def test_repo_report_in_text(invoke):
    """`advisories REPO` prints the advice, the OSV matches and hubwatch's own advisories."""
    result = invoke(REPO)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"{REPO} @ {SHAS[1][:12]} (committed 2026-11-29, checked ")
    assert lines[1] == "  loader advice: to load this safely you need transformers >= 5.10.0 (torch >= 2.10.0)"
    assert lines[2].startswith("  package floors: for any model: transformers >= 5.10.0, no release fixes PYSEC-2025-211")
    assert "    transformers >= 5.10.0 for this model; >= 5.10.0 for the package overall, no release fixes PYSEC-2025-211" in lines
    assert any(line.strip().startswith("not counted: no fixed release   PYSEC-2025-211") and "about Perceiver models" in line
               for line in lines)
    # an affected version is listed either way; one about another model is marked, with the reason
    mobilevit = lines.index(next(line for line in lines if "PYSEC-2024-227 (CVE-2024-11392)" in line))
    assert lines[mobilevit].strip().startswith("-- PYSEC-2024-227 (CVE-2024-11392)  transformers 4.42.3  affected")
    assert lines[mobilevit + 1].strip() == (
        "not relevant to this model: about MobileViTV2 models; this revision has model_type llama"
    )
    assert any(line.strip().startswith(">= 4.36.0          GHSA-3863-2447-669p") for line in lines)  # it holds pickle files
    assert any("x_HUBWATCH-" in line and "pickle-format weights added or changed" in line for line in lines)


def test_repo_report_in_json(invoke):
    """--json prints the same report as JSON."""
    result = invoke(REPO, "--json")
    report = json.loads(result.output)
    assert report["sha"] == SHAS[1]
    assert report["advice"]["packages"][1]["floor"] == ">= 2.10.0"
    transformers = report["advice"]["packages"][0]
    assert (transformers["floor"], transformers["package_floor"], transformers["package_unfixed"]) == (
        ">= 5.10.0", ">= 5.10.0", ["PYSEC-2025-211"])
    not_counted = {b["key"]: b["relevance"] for b in transformers["not_counted"]}
    assert not_counted["GHSA-fgcw-684q-jj6r"] == "not relevant to this model: about LightGlue models; this revision has model_type llama"
    relevance = {m["advisory"]: m["relevant"] for m in report["osv_matches"]}
    assert relevance["PYSEC-2024-228"] is False and relevance["PYSEC-2026-2289"] is True
    assert report["own_advisories"][0]["database_specific"]["hubwatch"]["class"] == "pickle-added"


def test_older_revision(invoke):
    """--revision shows a stored revision other than the newest."""
    report = json.loads(invoke(REPO, "--revision", SHAS[0][:8], "--json").output)
    assert report["sha"] == SHAS[0] and report["advice"]["packages"][1]["floor"] is None


@pytest.mark.parametrize(("args", "code", "message"), [
    (("org/unknown",), 3, "error: no stored revision of org/unknown"),
    ((REPO, "--revision", "ffff"), 3, "error: no stored revision of meta-llama/Llama-3.1-8B-Instruct matches ffff"),
    (("not-a-repo",), 2, "is not a Hub repo id"),
])
def test_bad_arguments(invoke, args, code, message):
    """Unknown repos and revisions exit 3, a malformed repo id 2, each with a message."""
    result = invoke(*args)
    assert result.exit_code == code
    assert message in result.output


def test_export(invoke, tmp_path):
    """`advisories export DIR` writes the OSV database and says how many records."""
    result = invoke("export", str(tmp_path / "osv"))
    assert result.output.strip() == f"wrote 1 OSV record(s) to {tmp_path / 'osv'} (GIT/)"
    [path] = (tmp_path / "osv" / "GIT").glob("x_HUBWATCH-*.json")
    ours = json.loads(path.read_text())["database_specific"]["hubwatch"]
    assert ours["purl"] == f"pkg:huggingface/{ours['repo_id']}@{ours['introduced_sha']}"  # the model revision's purl


def test_recheck_command(invoke):
    """`advisories recheck` runs the daily re-check now and reports the request counts."""
    result = invoke("recheck")
    assert result.exit_code == 0
    assert result.output.strip().splitlines()[-1] == (  # (structlog's default writes its line to stdout too)
        "re-checked 1 repo(s), 1 revision(s): 3 queries in 1 querybatch request(s), 0 record(s) fetched, 0 advisory event(s)"
    )


def test_help_lists_the_commands(invoke):
    """`advisories --help` names REPO and the subcommands."""
    result = invoke("--help")
    assert "hubwatch advisories REPO" in result.output and "export" in result.output
