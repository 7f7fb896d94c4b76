"""Fixtures for the advisories tests: real files as snapshots, the real records, the OSV fake over real
HTTP, a migrated store, the official OSV schema, and a sleep that records instead of sleeping."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

from storage.db import create_db_engine, migrate
from storage.front import Storage
from tests.support.databases import premigrated
from tracker.advisories.osv import OsvClient
from tracker.standins.osv import OsvFake, bundled_records

from .kit import SCHEMA, Clock, Sleeps


@pytest.fixture(scope="session")
def records() -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in bundled_records()}


@pytest.fixture(scope="session")
def osv_schema() -> jsonschema_rs.Draft202012Validator:
    return jsonschema_rs.Draft202012Validator(json.loads(SCHEMA.read_text()), validate_formats=True)


@pytest.fixture
def fake() -> Iterator[OsvFake]:
    with OsvFake() as server:
        yield server


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def client(fake: OsvFake, sleeps: Sleeps) -> Iterator[OsvClient]:
    with OsvClient(fake.endpoint, timeout_s=5, max_attempts=3, backoff_s=1, max_backoff_s=30, max_pages=5, sleep=sleeps) as c:
        yield c


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> Storage:
    engine = create_db_engine(premigrated(f"sqlite:///{tmp_path / 'advisories.db'}"))
    migrate(engine)
    return Storage(engine, clock=clock)
