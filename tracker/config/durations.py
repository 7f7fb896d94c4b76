"""Durations as settings write them: `30s`, `15m`, `1h`, `1d` or a number of seconds."""

from __future__ import annotations

import re

from tracker.errors import ConfigError

_INTERVAL_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_interval(value: object, key: str = "interval") -> int:
    """Seconds in `15m`, `1h`, `30s`, `1d` or a bare number of seconds; at least 1."""
    if isinstance(value, bool):
        raise ConfigError(f"{key}: expected a duration like '15m', got {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _INTERVAL_RE.match(str(value))
        if not match:
            raise ConfigError(f"{key}: expected a duration like '30s', '15m', '1h' or '1d', got {value!r}")
        seconds = float(match.group(1)) * _UNIT_S[match.group(2)]
    if seconds < 1:
        raise ConfigError(f"{key}: must be at least 1 second, got {value!r}")
    return int(seconds)
