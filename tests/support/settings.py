"""Settings for an App under test: the replay server's endpoint, a database, no jitter, the OSV fake."""

from __future__ import annotations

from pathlib import Path

from tests.support.databases import database_url_for, premigrated
from tests.support.osv import osv_endpoint
from tracker.config import settings_from_mapping


def settings_for(endpoint: str, db_path: Path | str, **sections: dict) -> object:
    """Settings as a config file would give them, with `sections` merged over the test defaults."""
    raw = {
        "hub": {"endpoint": endpoint},
        "storage": {"url": premigrated(database_url_for(db_path))},  # a new SQLite file starts at the newest schema
        "poll": {"jitter": "0"},
        "osv": {"api_url": osv_endpoint()},
    }
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    return settings_from_mapping(raw, env={}, source="test")
