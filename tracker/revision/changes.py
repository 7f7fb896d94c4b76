"""What a differ reports: one `Change` per thing a person should know about."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from storage.kinds import SEVERITY_RANK


class Severity(str, enum.Enum):
    """How loudly a change should be announced, in increasing order."""

    INFO = "info"
    NOTICE = "notice"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return SEVERITY_RANK[self.value]

    def __ge__(self, other: object) -> bool:  # type: ignore[override]
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank >= other.rank

    def __gt__(self, other: object) -> bool:  # type: ignore[override]
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank > other.rank

    def __le__(self, other: object) -> bool:  # type: ignore[override]
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank <= other.rank

    def __lt__(self, other: object) -> bool:  # type: ignore[override]
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank < other.rank



class ChangeKind(str, enum.Enum):
    """The kinds of DESIGN.md's table, plus repo-level facts (history rewrites, gating)."""

    CONFIG = "config"
    TOKENIZER = "tokenizer"
    CHAT_TEMPLATE = "chat_template"
    WEIGHTS = "weights"
    CUSTOM_CODE = "custom_code"
    FILES = "files"
    REPO = "repo"
    ESTIMATE = "estimate"
    STOP_TOKENS = "stop_tokens"  # the set of token ids generation stops on, and the template's end of turn
    LINT = "lint"  # a structure verifier finding that appeared or was resolved (estimator/lints.py)
    DATASET = "dataset"  # a dataset's configs, splits, rows, columns, licence, gate, loading script


@dataclass(frozen=True)
class Change:
    """One reportable difference between two snapshots of a repo.

    `summary` is one line a person can read; `detail` is JSON-serialisable data for machines.
    """

    kind: ChangeKind
    path: str
    summary: str
    severity: Severity
    detail: dict[str, Any] = field(default_factory=dict)
    structural: bool = False
    security: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "path": self.path,
            "summary": self.summary,
            "severity": self.severity.value,
            "structural": self.structural,
            "security": self.security,
            "detail": self.detail,
        }


def max_severity(changes: list[Change], default: Severity = Severity.INFO) -> Severity:
    """The highest severity among `changes`, or `default` when there are none."""
    return max((c.severity for c in changes), key=lambda s: s.rank, default=default)
