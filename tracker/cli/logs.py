"""structlog, configured once at start-up: JSON lines when not on a TTY, the console renderer on one.

hubwatch's own events and every library's standard-library records (APScheduler, uvicorn, httpx...)
leave through one handler and one formatter, so each record is one line and, off a TTY, one JSON object:
a JSON-lines reader never meets a plain warning or two records glued on one line.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog

from tracker.config import LogSettings

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
# Our loggers (structlog names them after the module); every other logger is a library's.
_OWN = ("tracker", "feeds", "storage", "estimator")


def configure_logging(settings: LogSettings, stream: TextIO | None = None) -> None:
    """Route hubwatch's logs and the libraries' to `stream` (stderr: stdout belongs to command output)."""
    stream = stream or sys.stderr
    level = _LEVELS[settings.level.lower()]
    use_console = settings.format == "console" or (settings.format == "auto" and stream.isatty())
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer() if use_console else structlog.processors.JSONRenderer()
    )
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        # A library's record: its logger's name and its message as the event, stamped like ours.
        foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            renderer,
        ],
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers = [handler]
    # Libraries' chatter at warning and above; ours at the configured level.
    root.setLevel(max(level, logging.WARNING))
    for name in _OWN:
        logging.getLogger(name).setLevel(level)
