"""Shared fixtures and hooks: the Hub replay server on loopback, a database per test (SQLite or PostgreSQL), an App
wired to them, the ingested history the feeds serve. The helpers they are built from live in tests/support."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

# huggingface_hub reads its paths once, at import: isolate them before anything imports it.
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="hubwatch-tests-hf-")
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ.pop("HF_TOKEN", None)
os.environ.pop("HF_ENDPOINT", None)

import pytest

from tests.support.databases import POSTGRES_ENV, fresh_database, postgres_admin_url, premigrated
from tests.support.osv import osv_endpoint
from tests.support.replay import replay_server
from tests.support.served import History, ingested_history
from tests.support.settings import settings_for
from tracker.cli.app import App

if TYPE_CHECKING:
    from tracker.standins.replay.control import ReplayServer


@pytest.fixture(autouse=True)
def _no_ambient_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test picks up a config file or token from the machine it runs on."""
    monkeypatch.delenv("HUBWATCH_CONFIG", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)


@pytest.fixture(scope="session")
def _torch_stack() -> None:
    """torch, transformers' modelling base and peft, imported once a worker (3-4 s on the CI machine): a
    setup of the first ground-truth test a worker runs, not a part of whichever test happened to come first
    (a model's first step there was three times its next)."""
    import peft  # noqa: F401
    import torch._subclasses.fake_tensor  # noqa: F401
    import transformers.activations
    import transformers.generation
    import transformers.modeling_utils  # noqa: F401


@pytest.fixture(autouse=True)
def _groundtruth_stack(request: pytest.FixtureRequest) -> None:
    """Each `groundtruth` test has the torch stack loaded (`_torch_stack`); the others never load it."""
    if request.node.get_closest_marker("groundtruth"):
        request.getfixturevalue("_torch_stack")


@pytest.fixture
def replay() -> Iterator[ReplayServer]:
    with replay_server() as server:
        yield server


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pyproject's default): half again as many workers as the cores this process may use. About a third
    of a worker's time goes waiting on the servers and `hubwatch` subprocesses its tests start, so a third worker
    on two cores keeps them busy (the default suite on the 2-core CI machine: 472 s with two, 355 s with three)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores + cores // 2)


def pytest_configure(config: pytest.Config) -> None:
    """A PostgreSQL run whose server does not answer stops at once, with one clear message (never a skip);
    so does the PostgreSQL pass (`-m postgres`) without a server, which would test SQLite again, and the
    ground-truth pass (`-m groundtruth`) without torch, transformers and peft."""
    if _names_groundtruth(config):
        import importlib.util

        missing = [m for m in ("torch", "transformers", "peft") if importlib.util.find_spec(m) is None]
        if missing:
            raise pytest.UsageError(f"-m groundtruth recomputes live with {', '.join(missing)}: pip install -e '.[groundtruth]'")
    admin_url = postgres_admin_url()
    if not admin_url:
        if _selects(config, "postgres"):
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
DATABASE_FIXTURES = {"database_url", "empty_database_url", "module_database_url", "history"}


def _names_groundtruth(config: pytest.Config) -> bool:
    return "groundtruth" in (config.getoption("markexpr", "") or "")


def _selects(config: pytest.Config, marker: str) -> bool:
    """-m names `marker` other than as `not marker` (`-m postgres`, `-m "groundtruth or postgres"`)."""
    words = (config.getoption("markexpr", "") or "").replace("(", " ").replace(")", " ").split()
    return any(word == marker and (i == 0 or words[i - 1] != "not") for i, word in enumerate(words))


# The passes CI runs in one session (`-m "groundtruth or postgres"`), each counted on its own line at the end.
PASSES = {"groundtruth": "ground truth", "postgres": "PostgreSQL pass"}


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """With -m naming more than one pass, one line per pass with its own count of tests, by outcome."""
    named = [marker for marker in PASSES if _selects(config, marker)]
    if len(named) < 2:
        return
    for marker in named:
        counts: dict[str, int] = {}
        for outcome in ("passed", "failed", "error", "skipped", "xfailed", "xpassed"):
            reports = {r.nodeid for r in terminalreporter.stats.get(outcome, ()) if marker in getattr(r, "keywords", {})}
            if reports:
                counts[outcome] = len(reports)
        summary = ", ".join(f"{n} {outcome}" for outcome, n in counts.items()) or "no tests"
        terminalreporter.write_line(f"tests run ({PASSES[marker]}): {summary}")


def _passes_only(config: pytest.Config) -> bool:
    """-m selects only tests marked with a pass's marker: "groundtruth", "postgres", or both joined by "or"."""
    words = (config.getoption("markexpr", "") or "").replace("(", " ").replace(")", " ").split()
    return bool(words) and set(words) <= {*PASSES, "or"} and any(word in PASSES for word in words)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """In the passes only (`-m "groundtruth or postgres"`, CI's last session), a test module whose source names
    neither marker is not imported: none of its tests could be selected, since a test gets a pass's marker only
    from its own module (`pytestmark`, a decorator, a parameter's marks; no conftest adds one). Each xdist worker
    collects the whole tree, so this spares every worker importing ~130 of ~200 modules (about 5 CPU-s a worker)."""
    if collection_path.suffix != ".py" or not collection_path.name.startswith("test_") or not _passes_only(config):
        return None
    source = collection_path.read_text(encoding="utf-8", errors="replace")
    return None if any(marker in source for marker in PASSES) else True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The `groundtruth` tests (live recomputation with torch) are deselected, and reported so, unless -m names
    the marker. In the PostgreSQL pass (`-m postgres` with HUBWATCH_TEST_POSTGRES set), a test of a `postgres`
    module that takes no database is left out: it runs on SQLite in the plain pass and would test nothing new."""
    if not _names_groundtruth(config):
        live = [item for item in items if item.get_closest_marker("groundtruth")]
        if live:
            config.hook.pytest_deselected(items=live)
            items[:] = [item for item in items if not item.get_closest_marker("groundtruth")]
    if not postgres_admin_url() or "postgres" not in (config.getoption("markexpr") or ""):
        return
    keep, drop = [], []
    for item in items:
        no_database = not DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
        (drop if item.get_closest_marker("postgres") and no_database else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture
def database_url(tmp_path: Path) -> Iterator[str]:
    """A fresh database with no rows: a SQLite file not yet created, or, when HUBWATCH_TEST_POSTGRES names a
    server (an admin URL such as postgresql+psycopg://hubwatch@127.0.0.1:5432/postgres), a PostgreSQL database
    at the newest schema, emptied for the next test after this one (tests/support/databases.py). Tests of
    modules marked `postgres` that take it run on both."""
    with fresh_database(tmp_path / "hubwatch.db") as url:
        yield url


@pytest.fixture
def empty_database_url(tmp_path: Path) -> Iterator[str]:
    """A database with no schema at all (a SQLite file not yet created, or a new PostgreSQL database dropped after
    the test), for a test that migrates from nothing, or to a revision older than the newest."""
    with fresh_database(tmp_path / "hubwatch.db", empty=True) as url:
        yield url


@pytest.fixture(scope="module")
def module_database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh, empty database shared by a module's tests, for a costly state built once and then only read (a
    SQLite file, or a PostgreSQL database as `database_url` gives one)."""
    with fresh_database(tmp_path_factory.mktemp("module-db") / "hubwatch.db") as url:
        yield url


@pytest.fixture(scope="session", autouse=True)
def _osv_fake() -> Iterator[None]:
    """Every `hubwatch` (in-process or a subprocess) uses the OSV fake, never the public OSV: set for the whole
    session, so that module- and session-scoped fixtures, which run before any function-scoped one, poll against
    it too (without it, each poll of such a fixture retried the unreachable public OSV for 14 s)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HUBWATCH_OSV_API_URL", osv_endpoint())
        yield


@pytest.fixture
def app(replay, database_url: str) -> Iterator[App]:
    app = App(settings_for(replay.endpoint, premigrated(database_url)))  # type: ignore[arg-type]
    yield app
    if "store" in app.__dict__:
        app.store.engine.dispose()


@pytest.fixture(scope="session")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    """The hostile fixture repo and Llama-3.1-8B-Instruct, every commit ingested once a session (read it
    only; `copy_to` gives a test a copy to write to): the feeds, the API and the browser tests serve it."""
    with ingested_history(tmp_path_factory.mktemp("feeds")) as history:
        yield history
