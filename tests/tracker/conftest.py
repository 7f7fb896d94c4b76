"""Fixtures the tracker's end-to-end tests share (the doubles themselves live in tests/support)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.webhooks import Receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A recording webhook receiver on loopback."""
    hook = Receiver().start()
    yield hook
    hook.stop()
