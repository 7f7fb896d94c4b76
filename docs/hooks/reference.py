"""MkDocs hook: the reference pages' generated parts (configuration, HTTP API, webhook payloads, events, the
performance table), rendered from the code at build time; see docs/hooks/refdocs. Registered in mkdocs.yml as
`hooks: [docs/hooks/reference.py]`. The CLI reference is mkdocs-click's (docs/reference/cli.md).

The repo root goes first on sys.path so the site documents the checkout it is built from, whichever
hubwatch the environment has installed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from refdocs import UnknownMarker, expand  # noqa: E402 - imports the product from the root put on sys.path above


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """The page with each `<!-- generated: NAME -->` marker replaced by its generated Markdown."""
    try:
        return expand(markdown)
    except UnknownMarker as err:
        raise PluginError(f"{page.file.src_uri}: {err.args[0]}") from err


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs-click 0.9 prints click 8.3's `Sentinel.UNSET` as the default of an option without one; say `None`,
    as it does with older click (https://github.com/mkdocs/mkdocs-click/pull/95)."""
    return html.replace("<code>Sentinel.UNSET</code>", "<code>None</code>")
