"""Where a commit stands in a stored history and OSV's GIT range rule over it (feeds/osv/graph.py), on a history with a
branch: a commit is affected from its `introduced` commit on, until a `fixed` commit it descends from."""

from __future__ import annotations

import pytest

from feeds.osv.graph import CommitGraph, range_affects

#   a - b - c - d          main
#        \
#         x - y            a branch forked at b
#   p - q                  a second baseline (history stored from p on)
PARENTS = {"a": None, "b": "a", "c": "b", "d": "c", "x": "b", "y": "x", "p": "gone", "q": "p"}
GRAPH = CommitGraph(PARENTS)


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("a", "a", True), ("a", "d", True), ("b", "y", True), ("c", "y", False), ("x", "d", False),
    ("d", "a", False), ("p", "q", True), ("a", "q", False), ("a", "zz", False), ("zz", "zz", False),
])
def test_is_ancestor(a: str, b: str, expected: bool) -> None:
    """A commit is its own ancestor; branches share only what they forked from; unknown commits have none."""
    assert GRAPH.is_ancestor(a, b) is expected


@pytest.mark.parametrize(("events", "affected"), [
    ([{"introduced": "b"}], {"b", "c", "d", "x", "y"}),
    ([{"introduced": "b"}, {"fixed": "d"}], {"b", "c", "x", "y"}),
    ([{"introduced": "b"}, {"fixed": "x"}], {"b", "c", "d"}),
    ([{"introduced": "b"}, {"fixed": "c"}, {"fixed": "y"}], {"b", "x"}),
    ([{"introduced": "b"}, {"last_affected": "c"}], {"b", "c", "x", "y"}),
    ([{"introduced": "0"}, {"fixed": "c"}], {"a", "b", "x", "y", "p", "q"}),
    ([{"introduced": "a"}, {"limit": "c"}], {"a", "b"}),
    ([{"introduced": "q"}], {"q"}),
    ([{"introduced": "not-stored"}], set()),
])
def test_git_range(events: list[dict[str, str]], affected: set[str]) -> None:
    """The OSV rule, per stored commit: introduced at or before, not fixed at or before, not past last_affected, before a limit."""
    assert {sha for sha in PARENTS if range_affects(events, GRAPH, sha)} == affected


def test_a_cycle_in_hand_edited_data_does_not_hang() -> None:
    """A parent loop (never written by the ingest) numbers each commit once and answers."""
    graph = CommitGraph({"a": "b", "b": "a", "c": None})
    assert graph.is_ancestor("c", "c") and not graph.is_ancestor("a", "c")
