"""How a bad setting is reported. Validators raise a `problem` whose text names the setting (and the
[[watch]] or [[webhooks]] entry); loading turns the one to report into a ConfigError."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from tracker.config.durations import parse_interval
from tracker.errors import ConfigError

_RULE = "hubwatch_setting"  # a value out of range, or against a rule
_TYPE = "hubwatch_setting_type"  # a value of the wrong type


def problem(text: str, sourced: bool = True) -> PydanticCustomError:
    """A bad setting described by `text`. `sourced`: the message starts with the config file's name."""
    return PydanticCustomError(_RULE, "{text}", {"text": text, "sourced": sourced})


def wrong_type(key: str, value: object, expected: str) -> PydanticCustomError:
    """`key` holds a value that is not (and cannot be read as) `expected`."""
    return PydanticCustomError(_TYPE, "{text}", {"text": f"{key}: expected {expected}, got {value!r}", "sourced": False})


def seconds(value: object, key: str) -> int:
    """The seconds of the duration setting `key`, or a problem worded as parse_interval words it."""
    try:
        return parse_interval(value, key)
    except ConfigError as err:
        raise problem(str(err), sourced=False) from None


def config_error(err: ValidationError, source: str) -> ConfigError:
    """The ConfigError for the first of `err`'s problems, as a person reads it."""
    first = min(err.errors(), key=_reported_first)
    ctx: dict[str, Any] = first.get("ctx") or {}
    if "text" in ctx:
        text, sourced = ctx["text"], ctx["sourced"]
    else:  # one of pydantic's own (a type no validator here reads): named by where it is
        text, sourced = f"{_where(first['loc'])}: {first['msg']}", True
    return ConfigError(f"{source}: {text}" if sourced else text)


def _reported_first(error: Any) -> int:
    """Several mistakes at once: the kind always reported first goes first. A value of the wrong type, then
    a bad [[watch]] or [[webhooks]] entry, then a value out of range (min() keeps file order within each)."""
    if error["type"] != _RULE:
        return 0
    return 1 if error["loc"][:1] in {("watch",), ("webhooks",)} else 2


def _where(loc: tuple[int | str, ...]) -> str:
    """("poll", "lease") -> "[poll] lease"; ("webhooks", 0, "url") -> "[[webhooks]] #1 url"."""
    if len(loc) >= 2 and isinstance(loc[1], int):
        return " ".join([f"[[{loc[0]}]] #{loc[1] + 1}", *map(str, loc[2:])])
    return " ".join([f"[{loc[0]}]", *map(str, loc[1:])]) if loc else "settings"
