"""Dataset changes end to end: `hubwatch poll` through the real huggingface_hub client against the replay's dataset
repos, Parquet footers read by range once per content id, the conversion branch tied to its commit, the events
stored, and the per-dataset licence flag from the configuration."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pyarrow as pa
import pytest

from storage.kinds import split_repo_key
from tests.support.cli import app_on, invoke_with
from tests.support.dataset_repos import (
    DATASET_ID,
    SCRIPT_ONLY_ID,
    dataset_history,
    evolving_dataset,
    evolving_steps,
    lfs_file,
    script_only_dataset,
)
from tests.support.parquet_files import parquet_bytes
from tests.support.settings import settings_for
from tracker.cli.app import App
from tracker.config.entries import WatchSpec
from tracker.pipeline.dataset_store import load_summary
from tracker.standins.replay.control import ReplayServer
from tracker.standins.replay.history import scripted_history

NAME = split_repo_key(DATASET_ID)[1]
SHARDS = "datasets/hubwatch-test/sharded"
BROKEN = "datasets/hubwatch-test/broken-footer"
GATED = "datasets/hubwatch-test/gated-qa"


def _sharded() -> object:
    """Ten shards of one split, then a commit rewriting one of them with two more rows."""
    shard = [parquet_bytes(pa.table({"id": list(range(i * 10, i * 10 + 10))})) for i in range(10)]
    first = {f"data/train-{i:05d}-of-00010.parquet": lfs_file(data) for i, data in enumerate(shard)}
    second = {"data/train-00003-of-00010.parquet": lfs_file(parquet_bytes(pa.table({"id": list(range(30, 42))})))}
    return scripted_history(SHARDS, [first, second], titles=["shards", "one shard rewritten"])


def _broken() -> object:
    """A good shard and a truncated one; then the truncated one fixed."""
    good = parquet_bytes(pa.table({"id": [1, 2, 3]}))
    return scripted_history(BROKEN, [{"data/train-0.parquet": lfs_file(good), "data/train-1.parquet": lfs_file(good[:-30])},
                                     {"data/train-1.parquet": lfs_file(parquet_bytes(pa.table({"id": [4]})))}])


@pytest.fixture(scope="module")
def hub() -> Iterator[ReplayServer]:
    with ReplayServer(roots=[]) as server:
        gated = dataset_history(GATED, evolving_steps()[:2], gated="manual")
        for history in (evolving_dataset(), script_only_dataset(), _sharded(), _broken(), gated):
            server.add_repo(history)
        yield server


@pytest.fixture
def app(hub: ReplayServer, database_url: str) -> Iterator[App]:
    with app_on(hub.endpoint, database_url) as app:
        yield app


def run(app: App, *args: str):
    return invoke_with(app, *args)


def dataset_changes(app: App, key: str) -> dict[str, list[tuple[str, str]]]:
    """{commit title: [(event, severity)]} of the dataset changes of every stored revision."""
    history = json.loads(run(app, "history", key, "--json").stdout)
    return {r["title"]: [(c["detail"]["event"], c["severity"]) for c in r["changes"] if c["kind"] == "dataset"]
            for r in history[::-1]}


def test_the_evolving_dataset_gets_its_events(app: App, hub: ReplayServer) -> None:
    """A column gained by one split, rows removed, the licence changed: each revision's dataset changes, and events of
    their own kinds; the conversion (made at revision 2 of 4) lags the head and is said so in the head's summary."""
    assert run(app, "watch", "add", NAME, "--type", "dataset", "--backfill", "3").exit_code == 0
    assert run(app, "poll").exit_code == 0
    assert list(dataset_changes(app, DATASET_ID).values()) == [
        [], [("dataset.columns_added", "warning")], [("dataset.rows_removed", "warning")],
        [("dataset.licence_changed", "warning")]]
    kinds = [e.kind for e in app.store.history.list_events(DATASET_ID)]
    assert {"dataset.columns_added", "dataset.rows_removed", "dataset.licence_changed"} <= set(kinds)
    head = hub.head_sha(DATASET_ID)
    summary = load_summary(app.store, DATASET_ID, head)
    conversions = hub.repo(DATASET_ID).conversions
    assert summary["conversion"]["sha"] == conversions[-1][1].sha and summary["conversion"]["lagging"] is True
    assert summary["conversion"]["source_sha"] == hub.repo(DATASET_ID).commits[1].sha  # made after revision 2
    assert summary["conversion"]["configs"]["default"]["splits"]["test"]["rows"] == 20  # converted before the removal
    assert summary["configs"]["default"]["splits"]["test"]["rows"] == 15
    assert summary["licence"] == "mit" and summary["gated"] is False
    first = hub.repo(DATASET_ID).commits[0].sha
    compared = json.loads(run(app, "diff", DATASET_ID, first[:12], head[:12], "--json").stdout)
    assert [c["detail"]["event"] for c in compared["changes"] if c["kind"] == "dataset"] == [
        "dataset.licence_changed", "dataset.rows_removed", "dataset.columns_added"]  # revision 1 to 4 in one
    assert [c["summary"] for c in compared["changes"] if "apache-2.0" in c["summary"]] == [
        "licence changed: apache-2.0 -> mit"]  # `diff` says the licence once too, not again by the card's change
    shown = json.loads(run(app, "show", DATASET_ID, head[:12], "--json").stdout)
    assert shown["dataset"] == summary  # `show --json` gives the summary (None for a model)
    assert shown["dataset"]["configs"]["default"]["splits"]["train"]["columns"]["source"] == 'Value("string")'


def test_only_a_script_left_is_critical(app: App) -> None:
    """The shard deleted, the loading script kept: critical, unloadable with datasets 4."""
    assert run(app, "watch", "add", split_repo_key(SCRIPT_ONLY_ID)[1], "--type", "dataset", "--backfill", "1").exit_code == 0
    assert run(app, "poll").exit_code == 0
    changes = list(dataset_changes(app, SCRIPT_ONLY_ID).values())
    assert ("dataset.script_only", "critical") in changes[-1]
    assert [e.kind for e in app.store.history.list_events(SCRIPT_ONLY_ID)].count("dataset.script_only") == 1


def test_a_footer_is_read_once_per_content(app: App, hub: ReplayServer) -> None:
    """Ten shards read once; the next revision rewrites one: one footer read, rows added counted from it."""
    assert run(app, "watch", "add", split_repo_key(SHARDS)[1], "--type", "dataset").exit_code == 0
    hub.set_head(SHARDS, 1)
    hub.reset_requests()
    assert run(app, "poll").exit_code == 0
    assert len({r.path for r in hub.requests if r.path.endswith(".parquet")}) == 10
    hub.set_head(SHARDS, 2)
    hub.reset_requests()
    assert run(app, "poll").exit_code == 0
    read = [r for r in hub.requests if r.path.endswith(".parquet")]
    assert [r.path.rsplit("/", 1)[-1] for r in read] == ["train-00003-of-00010.parquet"] and read[0].range
    assert list(dataset_changes(app, SHARDS).values())[-1] == [("dataset.rows_added", "notice")]


def test_a_broken_footer_is_a_verdict_and_the_rest_is_kept(app: App) -> None:
    """A truncated shard: its own event and verdict, the good shard's rows and columns kept; fixed later, its rows
    are counted again."""
    assert run(app, "watch", "add", split_repo_key(BROKEN)[1], "--type", "dataset", "--backfill", "1").exit_code == 0
    assert run(app, "poll").exit_code == 0
    revisions = app.store.history.list_revisions(BROKEN)
    first = load_summary(app.store, BROKEN, revisions[-1].sha)
    assert first["shards"]["data/train-1.parquet"]["verdict"] == "unreadable"
    assert first["shards"]["data/train-0.parquet"]["rows"] == 3
    assert first["configs"]["default"]["splits"]["train"]["rows"] is None
    assert first["configs"]["default"]["splits"]["train"]["columns"] == {"id": "int64"}
    assert load_summary(app.store, BROKEN, revisions[0].sha)["configs"]["default"]["splits"]["train"]["rows"] == 4


def test_licence_requires_latest_from_the_configuration(hub: ReplayServer, database_url: str) -> None:
    """`licence_requires_latest = true` on the dataset's [[watch]]: rows removed are also their own critical event."""
    settings = settings_for(hub.endpoint, database_url)
    spec = WatchSpec(repo=NAME, type="dataset", licence_requires_latest=True)
    app = App(settings.model_copy(update={"watch": (spec,)}))  # type: ignore[attr-defined]
    try:
        hub.set_head(DATASET_ID, 2)  # the config's watch starts at revision 2; revision 3 removes rows
        assert run(app, "poll").exit_code == 0
        hub.set_head(DATASET_ID, 3)
        assert run(app, "poll").exit_code == 0
        removal = list(dataset_changes(app, DATASET_ID).values())[-1]
        assert removal == [("dataset.rows_removed", "warning"), ("dataset.rows_removed_latest_required", "critical")]
        assert "dataset.rows_removed_latest_required" in [e.kind for e in app.store.history.list_events(DATASET_ID)]
    finally:
        hub.set_head(DATASET_ID, len(hub.repo(DATASET_ID).commits))
        app.store.engine.dispose()


def test_a_gated_dataset_is_followed_without_false_changes(app: App) -> None:
    """Files refused by the gate: the revisions are stored, their card and footers unread, and no dataset change is
    made up from what was not read (no licence or config 'removed')."""
    app.store.watches.add_watch(GATED, "main", 900, backfill=1)  # `watch add` refuses a gated repo; a watch may become one
    run(app, "poll")
    revisions = app.store.history.list_revisions(GATED)
    assert len(revisions) == 2
    assert list(dataset_changes(app, GATED).values()) == [[], []]
    summary = load_summary(app.store, GATED, revisions[0].sha)
    assert summary["card"] == "unread" and summary["gated"] == "manual"
    assert all(shard["verdict"] == "not read" for shard in summary["shards"].values())
