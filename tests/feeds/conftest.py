"""The HTTP server over the history ingested once a session (the `history` fixture, tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.support.served import API_TOKEN, History, Served, serve


@pytest.fixture(scope="module")
def served(history: History) -> Iterator[Served]:
    """A server over the shared history (read it only), writes allowed with API_TOKEN."""
    with serve(history.store(), api_token=API_TOKEN) as server:
        yield server


@pytest.fixture
def client(served: Served) -> Iterator[httpx.Client]:
    with served.client() as c:
        yield c
