"""A history ingested once by the real pipeline from the Hub replay, and the real HTTP server over a store."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from feeds.http.app import ServerOptions, ServerThread, create_app
from storage.db import create_db_engine
from storage.front import Storage
from storage.models import Revision
from tests.support.databases import fresh_database, postgres_admin_url
from tests.support.replay import replay_server
from tests.support.settings import settings_for
from tracker.cli.app import App
from tracker.differs import diff_snapshots
from tracker.pipeline.behaviour_store import extras_reader
from tracker.pipeline.dataset_revision import tables_reader
from tracker.pipeline.verify import lints_reader
from tracker.revision.stored import load_snapshot

HOSTILE = "hubwatch-tests/hostile-model"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
API_TOKEN = "api-token-for-tests"
READ_TOKEN = "read-token-for-tests"
HOOK_SECRET = "hub-secret-for-tests"
SCHEMAS = Path(__file__).resolve().parents[1] / "fixtures" / "schemas"


@dataclass
class History:
    """A database holding the hostile fixture repo and Llama-3.1-8B-Instruct, every commit ingested: a SQLite
    file, or on PostgreSQL (HUBWATCH_TEST_POSTGRES) a database, its copies cloned from a pristine template."""

    url: str
    template: str | None = None  # PostgreSQL: the untouched copy that `copy_to` clones
    copies: ExitStack | None = None  # PostgreSQL: the copies made, dropped with the session

    def copy_to(self, folder: Path) -> History:
        """A private copy a test may write to."""
        if self.copies is None:
            target = folder / "history.db"
            shutil.copyfile(self.url.removeprefix("sqlite:///"), target)
            return History(f"sqlite:///{target}")
        return History(self.copies.enter_context(fresh_database(folder / "history.db", template=self.template)))

    def store(self) -> Storage:
        return Storage(create_db_engine(self.url))


@contextmanager
def ingested_history(folder: Path) -> Iterator[History]:
    """Ingest HOSTILE and LLAMA, every commit, from the replay into a fresh database under `folder`."""
    with ExitStack() as stack:
        url = stack.enter_context(fresh_database(folder / "history.db"))
        with replay_server() as replay:
            app = App(settings_for(replay.endpoint, url))  # type: ignore[arg-type]
            for repo_id in (HOSTILE, LLAMA):
                app.store.watches.add_watch(repo_id, "main", 3600, backfill=100)
            outcomes = app.poller.poll()
            assert not any(o.failed for o in outcomes), [o.error for o in outcomes]
            app.store.engine.dispose()  # checkpoints the WAL: the file alone is the whole database
        if not postgres_admin_url():
            yield History(url)
            return
        # Copies clone a template no one is connected to: the shared history is served while tests copy it.
        template = stack.enter_context(fresh_database(folder, template=sa.engine.make_url(url).database))
        yield History(url, sa.engine.make_url(template).database, stack.enter_context(ExitStack()))


def differ_for(store: Storage) -> Any:
    """The tracker's differ, injected the way the CLI (the composition root) injects it."""

    def diff(a: Revision, b: Revision) -> list[dict[str, Any]]:
        return [c.to_dict() for c in diff_snapshots(load_snapshot(store, a), load_snapshot(store, b))]

    return diff


@dataclass
class Served:
    url: str
    store: Storage
    app: Any

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, **kwargs)


@contextmanager
def serve(store: Storage, **options: Any) -> Iterator[Served]:
    """The real ASGI app on uvicorn, on a free loopback port."""
    trigger, reprice = options.pop("trigger", None), options.pop("reprice", None)
    app = create_app(store, options=ServerOptions(**options), trigger=trigger, subscriptions=store.subscriptions,
                     diff=differ_for(store), extras=extras_reader(store), verify=lints_reader(store),
                     tables=tables_reader(store), reprice=reprice)
    with ServerThread(app, "127.0.0.1", 0) as server:
        yield Served(server.url, store, app)
    store.engine.dispose()
