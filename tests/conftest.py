"""Shared fixtures: the Hub replay server on loopback, an App wired to it, the CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

# huggingface_hub reads its paths once, at import: isolate them before anything imports it.
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="hubwatch-tests-hf-")
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ.pop("HF_TOKEN", None)
os.environ.pop("HF_ENDPOINT", None)

import pytest

from tracker.app import App
from tracker.config import settings_from_mapping

if TYPE_CHECKING:
    from tracker.standins.replay.control import ReplayServer

FIXTURES = Path(__file__).parent / "fixtures"
TEST_HISTORIES = FIXTURES / "histories"


@pytest.fixture(autouse=True)
def _no_ambient_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test picks up a config file or token from the machine it runs on."""
    monkeypatch.delenv("HUBWATCH_CONFIG", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)


@pytest.fixture
def replay() -> Iterator[ReplayServer]:
    from tracker.standins.replay.control import BUNDLED_ROOT, ReplayServer

    with ReplayServer(roots=[BUNDLED_ROOT, TEST_HISTORIES]) as server:
        yield server


def _url(db: Path | str) -> str:
    """A database URL as is, or a path made into a SQLite URL."""
    return db if isinstance(db, str) and "://" in db else f"sqlite:///{db}"


POSTGRES_ENV = "HUBWATCH_TEST_POSTGRES"


def postgres_admin_url() -> str | None:
    """The PostgreSQL server the tests run on (an admin URL), or None for SQLite files."""
    return os.environ.get(POSTGRES_ENV) or None


def pytest_configure(config: pytest.Config) -> None:
    """A PostgreSQL run whose server does not answer stops at once, with one clear message (never a skip);
    so does the PostgreSQL pass (`-m postgres`) without a server, which would test SQLite again."""
    admin_url = postgres_admin_url()
    if not admin_url:
        if (config.getoption("markexpr", "") or "").strip() == "postgres":
            raise pytest.UsageError(f"-m postgres is the PostgreSQL pass: set {POSTGRES_ENV} to a server's admin URL")
        return
    import sqlalchemy as sa

    try:  # a missing driver (pip install -e '.[test,postgres]') says so here too
        engine = sa.create_engine(admin_url)
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
        engine.dispose()
    except Exception as err:
        raise pytest.UsageError(f"{POSTGRES_ENV} is set but its server does not answer: {err}") from err


# The fixtures that give a test its database: on PostgreSQL, tests using none of them are not part of that pass.
DATABASE_FIXTURES = {"database_url", "history"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In the PostgreSQL pass (`-m postgres` with HUBWATCH_TEST_POSTGRES set), a test of a `postgres` module
    that takes no database is left out: it runs on SQLite in the plain pass and would test nothing new."""
    if not postgres_admin_url() or "postgres" not in (config.getoption("markexpr") or ""):
        return
    keep, drop = [], []
    for item in items:
        no_database = not DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
        (drop if item.get_closest_marker("postgres") and no_database else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@contextmanager
def fresh_database(path: Path, template: str | None = None) -> Iterator[str]:
    """The URL of a new database: the SQLite file `path`, or on PostgreSQL a new database (a copy of
    `template`, a database no one is connected to, when given) dropped on exit."""
    admin_url = postgres_admin_url()
    if not admin_url:
        yield _url(path)
        return
    import uuid

    import sqlalchemy as sa

    name = f"hw_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
    try:
        yield sa.engine.make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture
def database_url(tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database: a SQLite file, or, when HUBWATCH_TEST_POSTGRES names a server (an
    admin URL such as postgresql+psycopg://hubwatch@127.0.0.1:5432/postgres), a new PostgreSQL
    database dropped after the test. Tests of modules marked `postgres` that take it run on both."""
    with fresh_database(tmp_path / "hubwatch.db") as url:
        yield url


_OSV: list = []


def osv_endpoint() -> str:
    """The OSV fake every test's hubwatch talks to (one for the session, real records, loopback)."""
    if not _OSV:
        import atexit

        from tracker.standins.osv import OsvFake

        _OSV.append(OsvFake().start())
        atexit.register(_OSV[0].stop)
    return _OSV[0].endpoint


@pytest.fixture(autouse=True)
def _osv_fake(monkeypatch: pytest.MonkeyPatch) -> None:
    """Subprocesses (the CLI) use the OSV fake too, never the public OSV."""
    monkeypatch.setenv("HUBWATCH_OSV_API_URL", osv_endpoint())


def settings_for(endpoint: str, db_path: Path | str, **sections: dict) -> object:
    raw = {
        "hub": {"endpoint": endpoint},
        "storage": {"url": _url(db_path)},
        "poll": {"jitter": "0"},
        "osv": {"api_url": osv_endpoint()},
    }
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    return settings_from_mapping(raw, env={}, source="test")


@pytest.fixture
def app(replay, database_url: str) -> Iterator[App]:
    app = App(settings_for(replay.endpoint, database_url))  # type: ignore[arg-type]
    yield app
    if "store" in app.__dict__:
        app.store.engine.dispose()


def write_config(path: Path, endpoint: str, db_path: Path | str, extra: str = "") -> Path:
    path.write_text(
        f'[hub]\nendpoint = "{endpoint}"\n\n[storage]\nurl = "{_url(db_path)}"\n\n[poll]\njitter = "0"\n{extra}',
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


def cli_json(*args: str, config: Path, env: dict[str, str] | None = None):
    result = run_cli(*args, "--json", config=config, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)
