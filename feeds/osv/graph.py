"""Where a commit stands in a repo's stored history, and whether an OSV GIT range affects it.

The history stores each revision with the revision it was diffed against (`parent_sha`), every intermediate
commit ingested: per repo that is a forest (one tree per baseline, branches fork from the commit they left).
An Euler tour numbers it once, after which "is A an ancestor of B" is two comparisons, so a batch of a thousand
commits against a long history costs one walk, not a thousand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class CommitGraph:
    """One repo's stored commits: `is_ancestor(a, b)` (a commit is its own ancestor) in constant time."""

    def __init__(self, parents: Mapping[str, str | None]) -> None:
        children: dict[str, list[str]] = {}
        roots = []
        for sha, parent in parents.items():
            if parent is None or parent not in parents or parent == sha:
                roots.append(sha)
            else:
                children.setdefault(parent, []).append(sha)
        self.enter: dict[str, int] = {}
        self.leave: dict[str, int] = {}
        clock = 0
        for root in sorted(roots):
            stack: list[tuple[str, bool]] = [(root, False)]
            while stack:
                sha, done = stack.pop()
                if done:
                    self.leave[sha] = clock
                    clock += 1
                    continue
                if sha in self.enter:  # a cycle in hand-edited data: each commit numbered once
                    continue
                self.enter[sha] = clock
                clock += 1
                stack.append((sha, True))
                stack.extend((child, False) for child in sorted(children.get(sha, ()), reverse=True))

    def __contains__(self, sha: object) -> bool:
        return sha in self.leave

    def is_ancestor(self, a: str, b: str) -> bool:
        """Whether `a` is `b` or one of the commits `b` descends from (False when either is not stored)."""
        if a not in self.leave or b not in self.leave:
            return False
        return self.enter[a] <= self.enter[b] and self.leave[b] <= self.leave[a]


def range_affects(events: Sequence[Mapping[str, Any]], graph: CommitGraph, sha: str) -> bool:
    """The OSV rule for a GIT range: `sha` descends from an `introduced` commit ("0": the beginning), does not
    descend from a `fixed` one, is no later than a `last_affected` one it descends from, and, when the range has
    `limit`s, is an ancestor of one of them."""
    if sha not in graph:
        return False
    introduced = [str(e["introduced"]) for e in events if "introduced" in e]
    if not any(i == "0" or graph.is_ancestor(i, sha) for i in introduced):
        return False
    if any(graph.is_ancestor(str(e["fixed"]), sha) for e in events if "fixed" in e):
        return False
    last = [str(e["last_affected"]) for e in events if "last_affected" in e]
    if any(graph.is_ancestor(x, sha) and x != sha for x in last):
        return False
    limits = [str(e["limit"]) for e in events if "limit" in e]
    return not limits or any(graph.is_ancestor(sha, x) and x != sha for x in limits)
