"""Logs are one JSON object per line, hubwatch's events and every library's records alike."""

from __future__ import annotations

import io
import json
import logging
import threading

import pytest
import structlog

from tracker.cli.logs import configure_logging
from tracker.config import LogSettings


@pytest.fixture(autouse=True)
def _restore_logging():
    """configure_logging sets process-wide state: put it back for the tests that follow."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers, root.level = handlers, level
    structlog.reset_defaults()


def _lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_library_records_are_json_lines_too():
    """A library's warning (APScheduler's misfire line) is a JSON object with its logger, like ours."""
    stream = io.StringIO()
    configure_logging(LogSettings(level="info", format="json"), stream=stream)
    structlog.get_logger("tracker.pipeline.ingest").info("repo_polled", repo_id="org/model", duration_ms=3)
    logging.getLogger("apscheduler.executors.default").warning("Run time of job %r was missed by %s", "poll", "0:00:02")
    logging.getLogger("apscheduler.scheduler").info("below the libraries' level: dropped")
    ours, theirs = _lines(stream)
    assert ours["event"] == "repo_polled" and ours["repo_id"] == "org/model" and ours["level"] == "info"
    assert theirs["event"] == "Run time of job 'poll' was missed by 0:00:02"
    assert theirs["logger"] == "apscheduler.executors.default" and theirs["level"] == "warning"
    assert "timestamp" in theirs


def test_exceptions_stay_inside_the_line():
    """A library's traceback is a field of its JSON object, not lines of its own."""
    stream = io.StringIO()
    configure_logging(LogSettings(level="info", format="json"), stream=stream)
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("uvicorn.error").exception("Exception in ASGI application")
    (record,) = _lines(stream)
    assert "ValueError: boom" in record["exception"]


def test_threads_never_share_a_line():
    """Records written at once from many threads, ours and a library's, come out one per line."""
    stream = io.StringIO()
    configure_logging(LogSettings(level="info", format="json"), stream=stream)

    def write(i: int) -> None:
        for j in range(200):
            structlog.get_logger("feeds.webhooks.dispatcher").info("webhook_delivered", n=j, thread=i)
            logging.getLogger("httpx").warning("library %d %d", i, j)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(_lines(stream)) == 4 * 200 * 2
