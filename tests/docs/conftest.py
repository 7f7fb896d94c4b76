"""The generated documentation: the hook's package (docs/hooks/refdocs) importable as MkDocs imports it."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "docs" / "hooks"

if str(HOOKS) not in sys.path:
    sys.path.insert(0, str(HOOKS))
