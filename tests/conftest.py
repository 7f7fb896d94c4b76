"""Shared fixtures: the Hub replay server on loopback, an App wired to it, the CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tracker.app import App
from tracker.config import settings_from_mapping

FIXTURES = Path(__file__).parent / "fixtures"
TEST_HISTORIES = FIXTURES / "histories"


@pytest.fixture(autouse=True)
def _isolated_hf_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the real Hugging Face cache or token."""
    home = tmp_path_factory.mktemp("hf_home")
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUBWATCH_CONFIG", raising=False)


@pytest.fixture
def replay() -> Iterator["ReplayServer"]:  # noqa: F821
    from tracker.replay.server import BUNDLED_ROOT, ReplayServer

    with ReplayServer(roots=[BUNDLED_ROOT, TEST_HISTORIES]) as server:
        yield server


def settings_for(endpoint: str, db_path: Path, **sections: dict) -> object:
    raw = {"hub": {"endpoint": endpoint}, "storage": {"url": f"sqlite:///{db_path}"}, "poll": {"jitter": "0"}}
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    return settings_from_mapping(raw, env={}, source="test")


@pytest.fixture
def app(replay, tmp_path: Path) -> App:  # noqa: ANN001
    return App(settings_for(replay.endpoint, tmp_path / "hubwatch.db"))  # type: ignore[arg-type]


def write_config(path: Path, endpoint: str, db_path: Path, extra: str = "") -> Path:
    path.write_text(
        f'[hub]\nendpoint = "{endpoint}"\n\n[storage]\nurl = "sqlite:///{db_path}"\n\n[poll]\njitter = "0"\n{extra}',
        encoding="utf-8",
    )
    return path


def run_cli(*args: str, config: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120):
    """Run `hubwatch ARGS` in a subprocess, as a user or a script would."""
    full_env = {**os.environ, **(env or {})}
    cmd = [sys.executable, "-m", "tracker"]
    if config is not None:
        cmd += ["--config", str(config)]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, env=full_env, timeout=timeout)


def cli_json(*args: str, config: Path, env: dict[str, str] | None = None):  # noqa: ANN201
    result = run_cli(*args, "--json", config=config, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)
