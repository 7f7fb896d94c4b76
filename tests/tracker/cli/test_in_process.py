"""tests/support/cli.py's in-process `hubwatch`: what a subprocess would show, and nothing left behind."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import structlog

from tests.support.cli import run_cli, write_config


@pytest.fixture
def offline_config(tmp_path: Path) -> Path:
    """A config whose Hub is nowhere: with no watch, `poll` never asks it."""
    return write_config(tmp_path / "hubwatch.toml", "http://127.0.0.1:9", tmp_path / "hubwatch.db")


def test_an_in_process_call_logs_to_its_stderr_and_leaves_logging_as_it_found_it(offline_config: Path) -> None:
    """`poll` configures structlog for its run: its JSON summary is on the call's stderr, not stdout, and the
    root logger's handlers and structlog's configuration are the test's own again afterwards."""
    before = (logging.getLogger().handlers[:], logging.getLogger().level, structlog.get_config())
    result = run_cli("poll", config=offline_config)
    assert result.returncode == 0, result.stderr
    assert "no repos watched" in result.stdout and "poll_finished" not in result.stdout
    assert json.loads(result.stderr.splitlines()[-1])["event"] == "poll_finished"
    assert (logging.getLogger().handlers, logging.getLogger().level, structlog.get_config()) == before


def test_a_variable_read_at_import_is_refused_in_process(offline_config: Path) -> None:
    """HF_HUB_CACHE in `env` cannot reach an already imported huggingface_hub: the call says to use a process."""
    with pytest.raises(AssertionError, match="process=True"):
        run_cli("outdated", config=offline_config, env={"HF_HUB_CACHE": "/nowhere"})


def test_an_error_exits_and_reads_the_same_in_process_and_in_a_subprocess(offline_config: Path) -> None:
    """A usage error: the same exit code (2), stdout and stderr from the in-process call as from `python -m tracker`."""
    args = ("watch", "add", "not-a-repo-id")
    here, there = run_cli(*args, config=offline_config), run_cli(*args, config=offline_config, process=True)
    assert (here.returncode, here.stdout, here.stderr) == (there.returncode, there.stdout, there.stderr)
    assert here.returncode == 2 and "not-a-repo-id" in here.stderr
