"""The generated parts of the documentation site, each rendered from the code that defines it.

A page asks for one with a marker line, `<!-- generated: NAME -->`; `expand` replaces each marker with what
RENDERERS[NAME] renders. The MkDocs hook (docs/hooks/reference.py) calls it for every page.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from refdocs import cli, configuration, events, http_api, lints, performance, webhooks

RENDERERS: dict[str, Callable[[], str]] = {
    "cli-commands": cli.render,
    "configuration": configuration.render,
    "events": events.render,
    "http-api": http_api.render,
    "lints": lints.render,
    "performance": performance.render,
    "webhook-payloads": webhooks.render,
}
MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->[ \t]*$", re.MULTILINE)


class UnknownMarker(KeyError):
    """A page asks for a generated part that no renderer makes."""


def markers(markdown: str) -> list[str]:
    """The names of the generated parts a page asks for, in order."""
    return MARKER.findall(markdown)


def expand(markdown: str) -> str:
    """`markdown` with every marker replaced by its generated part; UnknownMarker for a name not in RENDERERS."""
    unknown = [name for name in markers(markdown) if name not in RENDERERS]
    if unknown:
        raise UnknownMarker(f"no generated part named {unknown[0]!r} (known: {', '.join(RENDERERS)})")
    return MARKER.sub(lambda m: RENDERERS[m.group(1)]().rstrip() + "\n", markdown)
