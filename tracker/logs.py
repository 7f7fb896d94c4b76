"""structlog, configured once at start-up: JSON lines when not on a TTY, the console renderer on one."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog

from tracker.config import LogSettings

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure_logging(settings: LogSettings, stream: TextIO | None = None) -> None:
    """Route hubwatch's logs to `stream` (stderr: stdout belongs to command output)."""
    stream = stream or sys.stderr
    level = _LEVELS[settings.level.lower()]
    use_console = settings.format == "console" or (settings.format == "auto" and stream.isatty())
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer() if use_console else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    # Libraries log through the standard library; keep their chatter at warning and above.
    logging.basicConfig(level=max(level, logging.WARNING), stream=stream, format="%(levelname)s %(name)s: %(message)s")
