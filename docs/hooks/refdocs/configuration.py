"""The configuration reference: every [section] and key, and the [[watch]] and [[webhooks]] entries, read from
the settings models (tracker.config): type, default, environment variable and the Field's description."""

from __future__ import annotations

import json
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from refdocs.markdown import cell, code, table
from tracker.config import SECTIONS, WatchSpec, WebhookSpec

ENTRIES: tuple[type[BaseModel], ...] = (WatchSpec, WebhookSpec)
_TYPE_WORDS = {str: "string", int: "integer", float: "number", bool: "boolean"}


def env_variable(section: str, key: str) -> str:
    """The variable that overrides [section] key (tracker/config/loading.py: HUBWATCH_<SECTION>_<KEY>)."""
    return f"HUBWATCH_{section.upper()}_{key.upper()}"


def type_words(annotation: Any) -> str:
    """A setting's type as the config file writes it: string, integer, list of strings, ..."""
    if annotation in _TYPE_WORDS:
        return _TYPE_WORDS[annotation]
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is tuple:
        return "list of " + " or ".join(type_words(arg) + "s" for arg in typing.get_args(args[0]) or args[:1])
    if isinstance(annotation, types.UnionType):
        return " or ".join(type_words(arg) for arg in args)
    raise TypeError(f"no words for the setting type {annotation!r}")


def toml_value(value: Any) -> str:
    """A default as it is written in the config file."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def default_text(field: FieldInfo) -> str:
    return "*required*" if field.is_required() else code(toml_value(field.default))


def section_table(name: str, model: type[BaseModel]) -> str:
    rows = [(code(key), cell(type_words(f.annotation)), default_text(f), code(env_variable(name, key)), cell(f.description or ""))
            for key, f in model.model_fields.items()]
    return table(("Key", "Type", "Default", "Environment variable", "Meaning"), rows)


def entry_table(model: type[BaseModel]) -> str:
    rows = [(code(key), cell(type_words(f.annotation)), default_text(f), cell(f.description or ""))
            for key, f in model.model_fields.items()]
    return table(("Key", "Type", "Default", "Meaning"), rows)


def render() -> str:
    """Every section, then every array of tables."""
    out: list[str] = []
    for name, model in SECTIONS.items():
        out += [f"## `[{name}]` {{ #{name} }}", "", section_table(name, model), ""]
    for model in ENTRIES:
        array = model.array  # type: ignore[attr-defined]
        out += [f"## `[[{array}]]` {{ #{array} }}", "", entry_table(model), ""]
    return "\n".join(out)
