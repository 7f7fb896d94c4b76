"""The Hub replay server the tests poll: the bundled histories and the tests' own (tests/fixtures/histories)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracker.standins.replay.control import ReplayServer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TEST_HISTORIES = FIXTURES / "histories"


@contextmanager
def replay_server() -> Iterator[ReplayServer]:
    """A replay server on a free loopback port over the bundled and the tests' histories."""
    from tracker.standins.replay.control import BUNDLED_ROOT, ReplayServer

    with ReplayServer(roots=[BUNDLED_ROOT, TEST_HISTORIES]) as server:
        yield server
