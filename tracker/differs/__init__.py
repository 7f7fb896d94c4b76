"""The differs, one per kind of DESIGN.md's table, run together over two snapshots.

Each differ module exposes `diff(old: Snapshot | None, new: Snapshot) -> list[Change]`. A differ that
fails on input nobody foresaw does not lose the revision: its failure becomes a Change of its kind.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import structlog

from tracker.differs import chat_template, code, config, files, gguf, stop_tokens, tokenizer, tokenizer_behaviour, weights
from tracker.differs.render import DEFAULT_LIMITS, RenderLimits
from tracker.revision.changes import Change, ChangeKind, Severity
from tracker.revision.snapshot import Snapshot

Differ = Callable[[Snapshot | None, Snapshot], list[Change]]

DIFFERS: tuple[tuple[ChangeKind, Differ], ...] = (
    (ChangeKind.CONFIG, config.diff),
    (ChangeKind.TOKENIZER, tokenizer.diff),
    (ChangeKind.TOKENIZER, tokenizer_behaviour.diff),  # the corpus tokenized before and after
    (ChangeKind.STOP_TOKENS, stop_tokens.diff),
    (ChangeKind.CHAT_TEMPLATE, chat_template.diff),
    (ChangeKind.WEIGHTS, weights.diff),
    (ChangeKind.WEIGHTS, gguf.diff),  # also tokenizer and chat template changes read from GGUF headers
    (ChangeKind.CUSTOM_CODE, code.diff),
    (ChangeKind.FILES, files.diff),
)

log = structlog.get_logger(__name__)


def diff_snapshots(old: Snapshot | None, new: Snapshot, *, render_limits: RenderLimits = DEFAULT_LIMITS) -> list[Change]:
    """Every change between two snapshots, in the order of the kinds above. `render_limits`: the limits each chat
    template render runs under (`[poll] chat_template_timeout_s` sets their time)."""
    changes: list[Change] = []
    for kind, listed in DIFFERS:
        differ = partial(chat_template.diff, limits=render_limits) if listed is chat_template.diff else listed
        try:
            changes.extend(differ(old, new))
        except Exception as err:
            log.exception("differ_failed", kind=kind.value, repo_id=new.repo_id, sha=new.sha)
            changes.append(
                Change(
                    kind=kind,
                    path="",
                    summary=f"{kind.value}: could not be compared ({type(err).__name__}: {err})",
                    severity=Severity.WARNING,
                    detail={"error": f"{type(err).__name__}: {err}"},
                )
            )
    return changes
