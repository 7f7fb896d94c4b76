"""The weight manifest as the verifier's checks ask it, fast for a manifest of tens of thousands of tensors."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from .lint_tables import DIGIT, FLOATS


class LintManifest:
    """The weight manifest as the checks ask it: names found over all names at once (one text, a name a line,
    searched by C-level string and regex scans), shapes validated only for the tensors a check reads, and elements
    by dtype counted over the distinct (dtype, shape) entries. A manifest of tens of thousands of tensors (one per
    expert) is never walked name by name in Python."""

    def __init__(self, manifest: Any) -> None:
        self.raw: Mapping[Any, Any] = manifest if isinstance(manifest, Mapping) else {}
        try:
            joined = "\n".join(self.raw)
            clean = joined.count("\n") == len(self.raw) - 1  # no name holds a newline
        except TypeError:  # a name that is not a string
            clean = False
        if not clean:
            joined = "\n".join(n for n in self.raw if isinstance(n, str) and "\n" not in n)
        self.text = "\n" + joined + "\n" if joined else ""
        self._counted: dict[tuple[str, tuple[int, ...]], int] | None = None
        self._found: dict[str, set[str]] = {}

    def shape(self, name: str, dtypes: Any = None) -> tuple[int, ...] | None:
        """The tensor's shape when its entry is a (dtype, sizes) pair of whole non-negative sizes (of ``dtypes``)."""
        entry = self.raw.get(name)
        if not isinstance(entry, (tuple, list)) or len(entry) != 2 or not isinstance(entry[1], (tuple, list)):
            return None
        if dtypes is not None and entry[0] not in dtypes:
            return None
        shape = tuple(entry[1])
        return shape if all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape) else None

    def containing(self, literal: str) -> set[str]:
        """Every name holding ``literal`` (found by substring search, each name once; kept for the next check)."""
        if literal in self._found:
            return self._found[literal]
        found, at, text = set(), 0, self.text
        self._found[literal] = found
        while (at := text.find(literal, at)) >= 0:
            start, end = text.rfind("\n", 0, at) + 1, text.find("\n", at)
            if end < 0:
                break
            found.add(text[start:end])
            at = end
        return found

    def top(self, pattern: re.Pattern[str], literals: tuple[str, ...]) -> list[str]:
        """Names outside numbered layers (no digit in them) that hold one of ``literals`` and ``pattern`` finds."""
        return sorted({n for lit in literals for n in self.containing(lit)
                       if not DIGIT.search(n) and pattern.search(n)})

    def ending(self, suffix: str) -> list[str]:
        """Every name ending with ``suffix``, sorted."""
        return sorted(n for n in self.containing(suffix + "\n") if n.endswith(suffix)) if self.text else []

    def matching(self, pattern: re.Pattern[str], literals: tuple[str, ...]) -> list[str]:
        """Every name holding one of ``literals`` that ``pattern`` finds, sorted."""
        return sorted({n for lit in literals for n in self.containing(lit) if pattern.search(n)})

    def counted(self) -> dict[tuple[str, tuple[int, ...]], int]:
        """How many tensors have each valid (dtype, shape)."""
        if self._counted is not None:
            return self._counted
        entries = self.raw.values()
        try:
            counts = Counter(entries)  # the common case: hashable (dtype, shape tuple) pairs, counted in C
        except TypeError:
            counts = Counter((e[0], tuple(e[1])) if isinstance(e, (tuple, list)) and len(e) == 2
                             and isinstance(e[1], (tuple, list)) else None for e in entries)
        out: dict[tuple[str, tuple[int, ...]], int] = {}
        for entry, n in counts.items():
            if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str) and isinstance(
                    entry[1], tuple) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in entry[1]):
                out[entry] = out.get(entry, 0) + n
        self._counted = out
        return out

    def packed(self) -> bool:
        """Quantized or packed storage: 2-D weights of an integer or 8-bit float dtype (not 1 x n buffers such as
        position_ids); bitsandbytes' 4-bit checkpoints are told by the config's quantization_config."""
        return any(dtype not in FLOATS and len(shape) == 2 and min(shape) > 1 for dtype, shape in self.counted())
