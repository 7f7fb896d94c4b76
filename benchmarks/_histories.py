"""A helper of the benchmarks, not a benchmark.

An App over a replay of synthetic histories (written by tests/support/synthetic_repos.py) for the benchmarks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tracker.cli.app import App
from tracker.cli.logs import configure_logging
from tracker.config import settings_from_mapping
from tracker.standins.osv import OsvFake
from tracker.standins.replay.control import ReplayServer


@contextmanager
def replayed_app(root: Path, db_path: Path) -> Iterator[tuple[App, ReplayServer]]:
    """An App wired to a replay of the histories under `root` and the OSV fake, logging warnings only."""
    with ReplayServer(roots=[root]) as server, OsvFake() as osv:
        settings = settings_from_mapping(
            {"hub": {"endpoint": server.endpoint}, "storage": {"url": f"sqlite:///{db_path}"},
             "osv": {"api_url": osv.endpoint}, "log": {"level": "warning"}},
            env={},
        )
        configure_logging(settings.log)
        yield App(settings), server
