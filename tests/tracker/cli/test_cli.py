"""`hubwatch` end to end against the replay server: outputs and exit codes (the daemon and the logging set-up
in a subprocess, the rest in-process: tests/support/cli.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import cli_json, run_cli, write_config
from tests.support.waiting import read_stderr_until

BROKEN = "hubwatch-tests/broken-model"


@pytest.fixture
def config(replay, tmp_path: Path, database_url: str) -> Path:
    return write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url)


def test_watch_poll_history_show_diff(replay, config: Path) -> None:
    """A user's round trip: watch, poll twice as upstream moves, then read history, a revision and a diff."""
    replay.set_head(BROKEN, 1)
    added = run_cli("watch", "add", BROKEN, "--interval", "10m", config=config)
    assert added.returncode == 0, added.stderr
    assert "watching hubwatch-tests/broken-model@main every 600s" in added.stdout
    [watch] = cli_json("watch", "list", config=config)
    assert watch["repo_id"] == BROKEN and watch["last_sha"] is None

    first = run_cli("poll", config=config)
    assert first.returncode == 0, first.stderr
    assert "1 new revision" in first.stdout and "baseline" in first.stdout
    replay.set_head(BROKEN, 2)
    [outcome] = cli_json("poll", config=config)
    assert outcome["status"] == "ingested"
    assert outcome["revisions"][0]["sha"] == replay.head_sha(BROKEN)

    history = cli_json("history", BROKEN, config=config)
    assert [r["sha"] for r in history] == [c.sha for c in reversed(replay.commits(BROKEN)[:2])]
    assert any("not valid JSON" in c["summary"] for c in history[0]["changes"])

    shown = cli_json("show", BROKEN, history[0]["sha"][:8], config=config)
    assert {f["path"] for f in shown["files"]} >= {"config.json", "model.safetensors", "README.md"}

    diffed = cli_json("diff", BROKEN, history[1]["sha"], history[0]["sha"], config=config)
    assert diffed["from"] == history[1]["sha"] and diffed["changes"]

    text = run_cli("history", BROKEN, config=config)
    assert text.returncode == 0 and history[0]["sha"][:12] in text.stdout


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["watch", "add", "hubwatch-tests/no-such-model"], 3, "does not exist"),
        (["watch", "add", "not a repo"], 2, "not a Hub repo id"),
        (["history", "hubwatch-tests/never-watched"], 3, "not watched"),
        (["show", BROKEN, "deadbeef"], 3, "no stored revision"),
        (["show", BROKEN, "xyz"], 3, "not a commit sha"),
        (["watch", "remove", "hubwatch-tests/never-watched"], 3, "not watched"),
        (["poll", "hubwatch-tests/never-watched"], 3, "not watched"),
        (["watch", "add", BROKEN, "--interval", "soon"], 2, "interval"),
    ],
)
def test_errors_have_clear_messages_and_exit_codes(config: Path, args: list[str], code: int, message: str) -> None:
    """Unknown repos, revisions and watches, and bad arguments, fail with a stated reason and a fixed code."""
    result = run_cli(*args, config=config)
    assert result.returncode == code, (result.stdout, result.stderr)
    assert message in result.stderr


def test_failed_repo_makes_poll_exit_non_zero(replay, config: Path) -> None:
    """`hubwatch poll` exits non-zero when a repo failed, after polling the others: 3 when the failure is the repo's
    state (here gated without access, as `watch add` exits for a repo in such a state; a Hub fault is 1)."""
    replay.set_head(BROKEN, 1)
    assert run_cli("watch", "add", BROKEN, config=config).returncode == 0
    assert run_cli("watch", "add", "hubwatch-tests/gated-model", "--no-check", config=config).returncode == 0
    result = run_cli("poll", config=config)
    assert result.returncode == 3
    assert "gated: 1 file(s) not read (the Hub refuses them to this token): config.json" in result.stdout
    assert "1 new revision" in result.stdout


def test_poll_of_a_gated_repo_without_access_exits_3_and_names_the_unread_files(config: Path) -> None:
    """A gated repo without access is followed through what stays readable: its baseline is stored from the file
    list, `poll` exits 3 (a repo state, as `watch add` says it) and its text and JSON name the files not read."""
    assert run_cli("watch", "add", "hubwatch-tests/gated-model", "--no-check", config=config).returncode == 0
    as_json = run_cli("poll", "--json", config=config)
    assert as_json.returncode == 3, as_json.stderr
    [outcome] = json.loads(as_json.stdout)
    assert (outcome["status"], outcome["repo_state"], outcome["unread_files"]) == ("ingested", "gated", ["config.json"])
    assert "gated (manual): 1 file(s) not read: config.json" in outcome["revisions"][0]["changes"][0]["summary"]
    again = run_cli("poll", config=config)  # nothing new: still gated, still 3
    assert again.returncode == 3 and "repo still gated; no new commit" in again.stdout


def test_bad_config_file_exits_4(tmp_path: Path) -> None:
    """A config file that is not TOML is refused with exit code 4 and its path."""
    bad = tmp_path / "bad.toml"
    bad.write_text("[hub\n", encoding="utf-8")
    result = run_cli("watch", "list", config=bad)
    assert result.returncode == 4
    assert "not valid TOML" in result.stderr and str(bad) in result.stderr


def test_logs_go_to_stderr_as_json_lines_without_secrets(replay, config: Path) -> None:
    """Off a terminal, logs are JSON lines on stderr with one summary per repo; the token never appears."""
    replay.set_head(BROKEN, 1)
    run_cli("watch", "add", BROKEN, config=config)
    result = run_cli("poll", config=config, env={"HF_TOKEN": "hf_supersecret"}, process=True)
    events = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    polled = [e for e in events if e["event"] == "repo_polled"]
    assert len(polled) == 1 and polled[0]["repo_id"] == BROKEN and "duration_ms" in polled[0]
    assert "hf_supersecret" not in result.stderr + result.stdout


def test_run_polls_on_schedule_and_stops_cleanly_on_sigterm(replay, config: Path) -> None:
    """`hubwatch run` polls its watches at once, then SIGTERM stops it with exit code 0."""
    replay.set_head(BROKEN, 1)
    run_cli("watch", "add", BROKEN, "--interval", "1h", config=config)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracker", "--config", str(config), "run"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "HUBWATCH_SERVER_PORT": "0"},
    )
    try:
        read_stderr_until(proc, '"repo_polled"', timeout_s=60)
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=30)[1].decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    assert "scheduler_stopped" in rest
    [watch] = cli_json("watch", "list", config=config)
    assert watch["last_sha"] == replay.head_sha(BROKEN)


def test_demo_replays_the_bundled_histories(tmp_path: Path) -> None:
    """`hubwatch demo` replays every bundled repo commit by commit and explains what changed, then shows a repo
    deleted and restored and another renamed."""
    result = run_cli("demo", "--data-dir", str(tmp_path / "demo"), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "step 1" in out and "done:" in out
    for kind in ("config", "tokenizer", "chat_template", "weights", "custom_code", "files"):
        assert f"{kind} " in out.split("done:")[1], kind
    # a dataset too, under its key: its shards rewritten, a split's rows removed, its licence changed
    assert "datasets/hubwatch-demo/evolving-qa@main: 1 new revision(s)" in out
    assert "data/test-00000-of-00001.parquet changed" in out and "licence changed: apache-2.0 -> mit" in out
    assert 'license "apache-2.0" -> "mit"' not in out  # said once, by the dataset's change, not again by its card
    # then what the Hub does to repos themselves: a deletion, its restore, and a rename, each told by its poll
    minilm, phi = "sentence-transformers/all-MiniLM-L6-v2@main", "microsoft/phi-2@main"
    lifecycle = out.split("--- the Hub deletes sentence-transformers/all-MiniLM-L6-v2\n")[1].split("done:")[0]
    assert f"{minilm}: FAILED: repo now gone: " in lifecycle and "  what to do: if it was made private" in lifecycle
    assert "--- the Hub restores sentence-transformers/all-MiniLM-L6-v2" in lifecycle
    assert f"{minilm}: repo restored: answers again after being gone" in lifecycle
    assert "--- the owner renames microsoft/phi-2 to microsoft/phi-2-renamed" in lifecycle
    assert f"{phi}: repo now moved to microsoft/phi-2-renamed: followed through the Hub's redirect" in lifecycle
    assert f"{phi}: history moved to microsoft/phi-2-renamed: watched under the new name" in lifecycle
    history = run_cli("--config", str(tmp_path / "demo" / "hubwatch.toml"), "watch", "list")
    assert history.returncode == 0
