"""The verifier in the pipeline (a finding that appears or is resolved is a change and an event) and behind
`hubwatch verify` (its output and exit codes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli, write_config
from tracker.cli.app import App

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def _sha(replay, repo_id: str, dirname: str) -> str:
    return next(c.sha for c in replay.commits(repo_id) if c.dirname == dirname)


def _lint_changes(app: App, repo_id: str, sha: str) -> list:
    revision = app.store.history.find_revision(repo_id, sha)
    return [c for c in app.store.history.changes_by_revision([revision.id])[revision.id] if c.kind == "lint"]


def test_a_finding_that_appears_then_goes_is_two_events(app: App, replay) -> None:
    """MiniLM's tokens pushed without resizing the embeddings raise lint.appeared (critical); the force-push that
    drops them raises lint.resolved against what was seen; revisions whose inputs did not move carry nothing."""
    replay.set_head(MINILM, 4)
    app.store.watches.add_watch(MINILM, "main", 900)
    app.poller.poll()
    replay.set_head(MINILM, 5)
    app.poller.poll()
    replay.set_head(MINILM, 7)
    app.poller.poll()
    broken, fixed = _sha(replay, MINILM, "0005-add-query-and-doc-special-tokens"), _sha(replay, MINILM, "0006-add-exported-onnx-model")
    [appeared] = _lint_changes(app, MINILM, broken)
    assert appeared.severity == "critical" and appeared.summary.startswith("verify: +vocab-size-tokenizer")
    assert appeared.detail["appeared"][0]["evidence"]["largest_token"] == "[DOC]"
    [resolved] = _lint_changes(app, MINILM, fixed)
    assert resolved.severity == "notice" and resolved.detail["resolved"][0]["id"] == "vocab-size-tokenizer"
    assert _lint_changes(app, MINILM, _sha(replay, MINILM, "0007-delete-pytorch-model-bin")) == []
    events = [(e.kind, e.sha, e.severity) for e in app.store.history.list_events(MINILM) if e.kind.startswith("lint.")]
    assert sorted(events) == sorted([("lint.appeared", broken, "critical"), ("lint.resolved", fixed, "notice")])


@pytest.fixture
def polled(replay, tmp_path: Path, database_url: str) -> Path:
    """A config whose database holds MiniLM up to the broken commit, and Llama 3.1's whole history."""
    config = write_config(tmp_path / "h.toml", replay.endpoint, database_url)
    replay.set_head(MINILM, 4)
    assert run_cli("watch", "add", MINILM, config=config).returncode == 0
    assert run_cli("watch", "add", LLAMA, config=config).returncode == 0
    assert run_cli("poll", config=config).returncode == 0
    replay.set_head(MINILM, 5)
    assert run_cli("poll", config=config).returncode == 0
    return config


def test_verify_prints_findings_and_exits_by_severity(polled: Path, replay) -> None:
    """`hubwatch verify` names each finding with its evidence and fix; exit 1 at --fail-on, else 0."""
    result = run_cli("verify", MINILM, config=polled)
    assert result.returncode == 1, result.stderr
    assert "CRIT vocab-size-tokenizer: the tokenizer produces ids up to 30,523 ('[DOC]')" in result.stdout
    assert "fix: Resize the token embeddings" in result.stdout
    older = _sha(replay, MINILM, "0004-update-tokenizer-files")
    clean = run_cli("verify", MINILM, "--revision", older[:12], config=polled)
    assert clean.returncode == 0 and "no findings" in clean.stdout


def test_verify_json_and_fail_on(polled: Path) -> None:
    """--json gives the findings as data; Llama 3.1's rope finding is critical, so only --fail-on above it passes."""
    result = run_cli("verify", LLAMA, "--json", config=polled)
    data = json.loads(result.stdout)
    assert result.returncode == 1 and data["worst"] == "critical" and data["fail_on"] == "warning"
    [finding] = data["findings"]
    assert finding["id"] == "rope-scaling-version" and finding["evidence"]["transformers_version"] == "4.42.3"
    assert set(finding) == {"id", "severity", "message", "evidence", "fix"}
    assert run_cli("verify", LLAMA, "--fail-on", "critical", config=polled).returncode == 1
    shown = json.loads(run_cli("show", LLAMA, data["sha"][:12], "--json", config=polled).stdout)
    assert shown["lints"] == data["findings"]  # show --json carries the same findings


@pytest.mark.parametrize(("args", "code", "message"), [
    (["verify", "hubwatch-tests/never-polled"], 3, "no stored revision"),
    (["verify", "not a repo"], 2, ""),
    (["verify", MINILM, "--fail-on", "loud"], 2, "loud"),
])
def test_verify_errors(tmp_path: Path, replay, args: list[str], code: int, message: str) -> None:
    """A repo neither stored nor on the Hub is exit 3, a malformed one or a bad severity exit 2, each with a clear
    message."""
    config = write_config(tmp_path / "h.toml", replay.endpoint, tmp_path / "h.db")
    result = run_cli(*args, config=config)
    assert result.returncode == code and message in result.stderr, result.stderr


def test_findings_print_upstream_text_without_control_characters() -> None:
    """A token text carrying an escape sequence is printed escaped, not sent to the terminal."""
    from estimator.lints import LintInputs, TokenizerFacts, lint
    from tracker.cli.verify import render_findings

    config = {"model_type": "bert", "vocab_size": 10, "hidden_size": 8, "num_attention_heads": 2}
    findings = lint(LintInputs(config, tokenizer=TokenizerFacts(size=12, largest=("\x1b[31mred", 11))))
    text = render_findings(findings)
    assert "\x1b" not in text and "\\x1b[31mred" in text


def test_a_revision_without_config_has_nothing_to_verify() -> None:
    """No config.json: the text says there is nothing to verify (and `verify` exits 0: no finding reached)."""
    from tracker.cli.verify import render_findings

    assert render_findings(None) == "no config.json in this revision: nothing to verify"
    assert render_findings([]) == "no findings: the config, weights and tokenizer agree"

