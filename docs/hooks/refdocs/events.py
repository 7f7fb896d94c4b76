"""The events reference: every severity, change kind and event kind of storage.kinds with its description."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from refdocs.markdown import cell, code, table
from storage.kinds import (
    CHANGE_KIND_DESCRIPTIONS,
    CHANGE_KINDS,
    EVENT_KIND_DESCRIPTIONS,
    EVENT_KINDS,
    SEVERITIES,
    SEVERITY_DESCRIPTIONS,
)

# (heading, anchor, first column, the names in their order, their descriptions)
GROUPS: tuple[tuple[str, str, str, Sequence[str], Mapping[str, str]], ...] = (
    ("Event kinds", "event-kinds", "Event kind", EVENT_KINDS, EVENT_KIND_DESCRIPTIONS),
    ("Change kinds", "change-kinds", "Change kind", CHANGE_KINDS, CHANGE_KIND_DESCRIPTIONS),
    ("Severities", "severities", "Severity", SEVERITIES, SEVERITY_DESCRIPTIONS),
)


def render() -> str:
    """One table per vocabulary, in the order storage.kinds lists it (severities from the quietest)."""
    out: list[str] = []
    for heading, anchor, column, names, descriptions in GROUPS:
        rows = [(code(name), cell(descriptions.get(name, ""))) for name in names]
        out += [f"## {heading} {{ #{anchor} }}", "", table((column, "Meaning"), rows), ""]
    return "\n".join(out)
