"""tests/support/cli.py's in-process `hubwatch`: what a subprocess would show, and nothing left behind."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import structlog

from tests.support.cli import run_cli, write_config
from tests.support.waiting import wait_until


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


def test_the_daemons_dispatcher_stops_at_once_when_idle(tmp_path: Path, monkeypatch) -> None:
    """`hubwatch run`'s stop does not wait for the idle dispatcher's next look at its stop event: stopping wakes it.
    Here that look would be a minute away; the join's own limit is 7 s; the thread must be gone when stop returns."""
    import threading

    from feeds.webhooks import dispatcher as dispatching
    from tests.support.settings import settings_for
    from tracker.cli.app import App
    from tracker.cli.wiring import start_dispatcher

    monkeypatch.setattr(dispatching, "STOP_CHECK_S", 60.0)
    app = App(settings_for("http://127.0.0.1:9", tmp_path / "hubwatch.db",  # type: ignore[arg-type]
                           delivery={"poll_interval_s": 60.0, "timeout_s": 1.0, "connect_timeout_s": 1.0}))
    stop = start_dispatcher(app)
    threads = [t for t in threading.enumerate() if t.name == "webhook-dispatcher"]
    assert len(threads) == 1
    assert wait_until(lambda: dispatcher_idle(threads[0]))
    stop()
    assert not threads[0].is_alive()


def dispatcher_idle(thread) -> bool:
    """The dispatcher thread is waiting in its idle loop (its frame is in `_idle`)."""
    import sys

    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        if frame.f_code.co_name == "_idle":
            return True
        frame = frame.f_back
    return False
