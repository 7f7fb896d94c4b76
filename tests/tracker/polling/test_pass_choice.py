"""Choosing each listing round between per-author passes and one pass over every model (tracker/polling/pass_choice.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.support.clock import T0
from tracker.polling.pass_choice import AuthorCost, HubCost, choose_passes, covered_by_hub, quiet_cadence_s

BEFORE, AT, AFTER = T0 - timedelta(minutes=1), T0, T0 + timedelta(minutes=1)


def authors(n: int, listed_at=AFTER, pages: int = 1, due: bool = True) -> list[AuthorCost]:
    return [AuthorCost(f"org{i}", pages, listed_at, due) for i in range(n)]


@pytest.mark.parametrize(
    ("listed_at", "hub", "covered"),
    [
        (AFTER, HubCost(1, AT), True),
        (AT, HubCost(1, AT), True),  # listed through the last pass over every model itself
        (BEFORE, HubCost(1, AT), False),  # its coverage ends before the mark the next pass reads back to
        (None, HubCost(1, AT), False),  # never listed
        (AFTER, HubCost(1, None), False),  # the pass over every model never ran: no mark to read back to
        (AFTER, HubCost(1, AT, resumable=False), False),  # it starts afresh, one page deep
    ],
)
def test_an_author_is_covered_only_when_its_listing_reaches_the_mark(listed_at, hub: HubCost, covered: bool) -> None:
    """The pass over every model covers an author listed no earlier than that pass's last run, and only from its mark."""
    assert covered_by_hub(AuthorCost("org", 1, listed_at), hub) is covered


@pytest.mark.parametrize(
    ("n", "author_pages", "hub", "hub_needed", "expected"),
    [
        (20, 1, HubCost(1, AT), False, (True, 20, 0, 1)),  # 20 orgs, one page each, against one page: every model
        (200, 1, HubCost(1, AT), False, (True, 200, 0, 1)),
        (2, 1, HubCost(5, AT), False, (False, 0, 2, 2)),  # a busy Hub (5 pages) against two small orgs: their own
        (5, 1, HubCost(5, AT), False, (True, 5, 0, 5)),  # a tie goes to every model
        (3, 1, HubCost(9, AT), True, (True, 3, 0, 9)),  # listed anyway for the other watches: authors ride along
        (0, 1, HubCost(1, AT), False, (False, 0, 0, 0)),
    ],
)
def test_the_cheaper_round_is_chosen(n: int, author_pages: int, hub: HubCost, hub_needed: bool, expected: tuple) -> None:
    """A round costs what its passes read last time; the cheaper wins: (every model?, authors via it, own passes, cost)."""
    choice = choose_passes(authors(n, pages=author_pages), hub, hub_needed)
    assert (choice.hub, len(choice.via_hub), len(choice.own), choice.cost) == expected


def test_authors_not_covered_yet_get_their_own_pass_beside_the_pass_over_every_model() -> None:
    """Just followed (or listed before the pass's mark), an author is listed on its own in the same round."""
    followed = [*authors(18), AuthorCost("new", 1, None), AuthorCost("old", 2, BEFORE)]
    choice = choose_passes(followed, HubCost(1, AT), hub_needed=False)
    assert choice.hub and set(choice.own) == {"new", "old"} and len(choice.via_hub) == 18 and choice.cost == 4


def test_a_pass_over_every_model_gone_idle_starts_afresh_and_covers_nobody() -> None:
    """Idle too long, the pass over every model is read one page deep and every author listed on its own once."""
    choice = choose_passes(authors(20), HubCost(1, AT, resumable=False), hub_needed=False)
    assert choice.hub and choice.fresh and choice.via_hub == () and len(choice.own) == 20 and choice.cost == 21


def test_per_author_rounds_list_only_the_authors_due() -> None:
    """When per-author passes are cheaper, a quiet author not due this round is left for a later one."""
    followed = [AuthorCost("busy", 1, AFTER, due=True), AuthorCost("quiet", 1, AFTER, due=False)]
    choice = choose_passes(followed, HubCost(7, AT), hub_needed=False)
    assert not choice.hub and choice.own == ("busy",) and choice.cost == 1


@pytest.mark.parametrize(
    ("quiet", "interval_s", "cadence_s"),
    [
        (None, 60, 60),  # never listed: every interval
        (timedelta(minutes=10), 60, 60),  # moving: every interval
        (timedelta(hours=6), 60, 900),  # quiet six hours: every quarter hour
        (timedelta(days=30), 60, 3600),  # quiet a month: hourly at most
        (timedelta(days=30), 7200, 7200),  # never more often than the interval... nor less
        (-timedelta(hours=1), 60, 60),  # a lastModified ahead of our clock: every interval
    ],
)
def test_quiet_authors_are_listed_less_often(quiet, interval_s: int, cadence_s: int) -> None:
    """An author's own pass is due every interval while it moves, then a 24th of its quiet time, hourly at most."""
    assert quiet_cadence_s(interval_s, None if quiet is None else T0 - quiet, T0) == cadence_s
