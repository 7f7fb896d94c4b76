"""Advisories through the real pipeline: `hubwatch poll`, then `hubwatch advisories` and its export."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import run_cli, write_config

PHI = "microsoft/phi-2"


def test_poll_then_advisories_and_export(replay, tmp_path: Path, database_url: str) -> None:
    """A polled custom-code repo has OSV matches, loader advice and its own OSV records, exported to disk."""
    config = write_config(tmp_path / "h.toml", replay.endpoint, database_url)
    replay.set_head(PHI, 1)
    assert run_cli("watch", "add", PHI, config=config).returncode == 0
    assert run_cli("poll", config=config).returncode == 0
    replay.set_head(PHI, len(replay.commits(PHI)))
    assert run_cli("poll", config=config).returncode == 0
    result = run_cli("advisories", PHI, "--json", config=config)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["sha"] == replay.head_sha(PHI)
    assert report["advice"]["sentence"].startswith("to load this safely you need transformers >= ")
    assert any(m["verdict"] == "repo" for m in report["osv_matches"])
    own = report["own_advisories"]
    assert own and all(o["id"].startswith("x_HUBWATCH-") for o in own)
    out = tmp_path / "osv"
    exported = run_cli("advisories", "export", str(out), config=config)
    assert exported.returncode == 0, exported.stderr
    files = sorted((out / "GIT").glob("x_HUBWATCH-*.json"))
    assert len(files) == len(own)
    record = json.loads(files[0].read_text())
    assert record["affected"][0]["ranges"][0]["type"] == "GIT"
