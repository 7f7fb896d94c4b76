"""Followed authors at the cost of one listing: each listing round, per-author passes or one pass over every
model sorted by last modification (authors filtered locally), whichever cost fewer Hub pages last time.

The pass over every model covers an author only when the author's own coverage reaches the mark that pass
reads back to: the author was listed (on its own, or through the pass over every model) no earlier than that
pass's last run (`AuthorCost.listed_at >= HubCost.passed_at`, both our clock, only ever compared with each
other). An author that is not yet covered so (just followed, or the pass over every model was cut, or has
not run for a while) gets its own pass in the same round, after the pass over every model, which makes it
covered from the next round on. Nothing here does I/O: the listing job (listing.py) reads the costs from the
listing state and runs what is chosen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

QUIET_SHARE = 24  # an author quiet for a day is listed on its own every hour (when passes are per author)...
QUIET_MAX_S = 3600  # ...and never less often than hourly, so a quiet author's move waits an hour at most


@dataclass(frozen=True)
class AuthorCost:
    """One followed author: the Hub pages its own pass read last time (0: unknown, counted as 1), when it
    was last listed (our clock; None: never), and whether its own pass is due this round."""

    author: str
    pages: int
    listed_at: datetime | None
    due: bool = True


@dataclass(frozen=True)
class HubCost:
    """The pass over every model: the pages it read last time (0: unknown), when it last ran (our clock), and
    whether it can go on from its mark (False: its mark is too old to read back to, so it starts afresh, one
    page deep, and covers no author this round)."""

    pages: int
    passed_at: datetime | None
    resumable: bool = True


@dataclass(frozen=True)
class PassChoice:
    """This round's passes: `hub` (the pass over every model, `fresh`: from no mark), the authors read from
    it (`via_hub`) and those listed on their own (`own`); `cost` the pages it expects, `reason` for the log."""

    hub: bool
    fresh: bool
    via_hub: tuple[str, ...]
    own: tuple[str, ...]
    cost: int
    reason: str


def pages_of(pages: int) -> int:
    """A pass's expected cost: what it read last time, at least one page."""
    return max(1, pages)


def covered_by_hub(author: AuthorCost, hub: HubCost) -> bool:
    """Whether the pass over every model, read back to its mark, sees every move of `author` since its
    last listing (its coverage reaches that pass's last run)."""
    return hub.resumable and hub.passed_at is not None and author.listed_at is not None and author.listed_at >= hub.passed_at


def choose_passes(authors: Sequence[AuthorCost], hub: HubCost, hub_needed: bool) -> PassChoice:
    """The pass over every model (plus an own pass for each author it does not cover yet) or a round of
    per-author passes, the cheaper by last time's pages (the pass over every model on a tie: it also sees new
    models, and every move within an interval). Per-author passes run for the authors `due` only (a quiet
    author less often, see `quiet_cadence_s`). With `hub_needed` (it lists the individually watched repos
    anyway) the pass over every model always runs and covers every author it can at no extra cost."""
    covered = tuple(a.author for a in authors if covered_by_hub(a, hub))
    gaps = tuple(a.author for a in authors if a.author not in covered)
    gap_cost = sum(pages_of(a.pages) for a in authors if a.author in gaps)  # once: then they are covered
    hub_cost = pages_of(hub.pages) if hub.resumable else 1
    due = tuple(a.author for a in authors if a.due)
    own_cost = sum(pages_of(a.pages) for a in authors)  # a round of every author's own pass
    if hub_needed:
        return PassChoice(True, not hub.resumable, covered, gaps, hub_cost + gap_cost, "every model is listed anyway")
    if not authors:
        return PassChoice(False, False, (), (), 0, "nothing to list")
    # Rounds to come decide, not this one: the authors' own passes that let a pass over every model cover
    # them are paid once (else a per-author round would always look cheaper than switching, and stay).
    if hub_cost <= own_cost:
        return PassChoice(True, not hub.resumable, covered, gaps, hub_cost + gap_cost,
                          f"one pass over every model ({hub_cost} pages) against {len(authors)} author passes ({own_cost})")
    return PassChoice(False, False, (), due, sum(pages_of(a.pages) for a in authors if a.due),
                      f"{len(authors)} author passes ({own_cost} pages) against one over every model ({hub_cost});"
                      f" {len(due)} due")


def quiet_cadence_s(interval_s: int, last_moved_at: datetime | None, now: datetime) -> int:
    """How often an author's own pass is due: every interval while its models move, less often the longer
    they have not (a 24th of the quiet time, at most hourly). `last_moved_at`: its newest model's lastModified
    (the Hub's time: a skewed clock only makes the pass more or less frequent, never misses a move, since the
    pass reads back to its mark whenever it runs)."""
    if last_moved_at is None:
        return interval_s
    quiet_s = max(0.0, (now - last_moved_at).total_seconds())
    return int(max(interval_s, min(quiet_s / QUIET_SHARE, max(interval_s, QUIET_MAX_S))))


__all__ = ["AuthorCost", "HubCost", "PassChoice", "choose_passes", "covered_by_hub", "pages_of", "quiet_cadence_s"]
