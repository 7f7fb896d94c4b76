"""Every `hubwatch` a test starts talks to the loopback stand-ins, never the public services: a module-scoped
fixture too, which runs before any function-scoped fixture of its tests (tests/conftest.py)."""

from __future__ import annotations

import os

import pytest

from tests.support.osv import osv_endpoint


@pytest.fixture(scope="module")
def osv_url_of_a_module_fixture() -> str | None:
    """What a module-scoped fixture that polls (tests/tracker/pins/test_outdated_gguf.py) would give `hubwatch`."""
    return os.environ.get("HUBWATCH_OSV_API_URL")


def test_a_module_fixture_polls_against_the_osv_fake(osv_url_of_a_module_fixture: str | None) -> None:
    """Without the session-wide setting, such a fixture's polls asked the public OSV, unreachable from the tests,
    and waited 14 s of retries each."""
    assert osv_url_of_a_module_fixture == osv_endpoint()
    assert osv_url_of_a_module_fixture.startswith("http://127.0.0.1:")


def test_a_test_polls_against_the_osv_fake() -> None:
    assert os.environ["HUBWATCH_OSV_API_URL"] == osv_endpoint()
