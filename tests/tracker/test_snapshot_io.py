"""fetch_snapshot against a parent in hand: the parent's unchanged files are not read back from the database, the
snapshot is the one a fetch without it builds, and a new small file costs one GET."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from storage.blobs import git_blob_oid
from tracker.cli.app import App
from tracker.errors import HubUnavailable, RateLimited, RepoGated
from tracker.hub.client import MissingFile, counting_requests
from tracker.pipeline.snapshot_io import fetch_snapshot
from tracker.revision.stored import DEFER_BYTES, load_snapshot
from tracker.standins.replay.realistic import realistic_history

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

REPO = "bench/copy-0"
READS = ("known_blobs", "read_blobs", "read_manifests", "read_file_scans", "revision_files")


def _count_reads(app: App, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Wrap the history store's reads: each records the ids it was asked for."""
    asked: dict[str, list[str]] = {name: [] for name in READS}

    def wrap(name: str, read: Callable[..., Any]) -> Callable[..., Any]:
        def counted(ids: Any, *args: Any, **kwargs: Any) -> Any:
            ids = list(ids) if not isinstance(ids, int) else [str(ids)]
            asked[name].extend(ids)
            return read(ids if name != "revision_files" else int(ids[0]), *args, **kwargs)
        return counted

    for name in READS:
        monkeypatch.setattr(app.store.history, name, wrap(name, getattr(app.store.history, name)))
    return asked


@pytest.fixture
def moved(app: App, replay) -> tuple[App, str, str]:
    """A realistic copy (weights with safetensors headers, a pickled checkpoint, a 700 KB tokenizer.json) whose
    baseline is stored, and its second commit (config.json moved) not yet."""
    replay.add_repo(realistic_history(REPO, "config", datetime(2026, 1, 1, tzinfo=UTC)))
    replay.set_head(REPO, 1)
    app.store.watches.add_watch(REPO, "main", 900)
    [outcome] = app.poller.poll([REPO])
    assert outcome.status == "ingested"
    replay.advance(REPO)
    first, second = (c.sha for c in replay.commits(REPO))
    return app, first, second


@pytest.fixture
def served(app: App, replay) -> tuple[App, str, str]:
    """The same realistic copy on the replay at its second commit, nothing ingested: for what the Hub client
    does alone (a download), where the stored baseline `moved` pays for (~1.5 CPU-s) is not used."""
    replay.add_repo(realistic_history(REPO, "config", datetime(2026, 1, 1, tzinfo=UTC)))
    replay.set_head(REPO, 2)
    first, second = (c.sha for c in replay.commits(REPO))
    return app, first, second


def test_the_parents_files_are_not_read_back(moved, replay, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the parent in hand, nothing of its blobs, manifests or scans is read from the database: only the
    moved config.json's oid is looked up (and downloaded, one GET, no HEAD); the rest comes from the parent."""
    app, first, second = moved
    parent = load_snapshot(app.store, app.store.history.find_revision(REPO, first), app.settings.scan.rules)
    assert parent.manifests and parent.scans and "tokenizer.json" in parent.contents
    asked = _count_reads(app, monkeypatch)
    replay.reset_requests()
    fetched = fetch_snapshot(app.hub, app.store, REPO, second, 2**24, app.settings.scan.rules, parent)
    new_config = fetched.snapshot.files["config.json"].oid
    assert {name: ids for name, ids in asked.items() if ids} == {"known_blobs": [new_config]}
    assert [(r.method, r.path) for r in replay.requests if "/resolve/" in r.path] == [
        ("GET", f"/{REPO}/resolve/{second}/config.json")]
    assert set(fetched.new_blobs) == {new_config} and not fetched.new_weight_files and not fetched.new_file_scans
    alone = fetch_snapshot(app.hub, app.store, REPO, second, 2**24, app.settings.scan.rules)
    assert asked["read_manifests"] and asked["read_file_scans"]  # without a parent they are read from the store
    snap, other = fetched.snapshot, alone.snapshot
    assert (snap.files, snap.contents, snap.unavailable) == (other.files, other.contents, other.unavailable)
    assert (snap.manifests, snap.scans) == (other.manifests, other.scans)


@pytest.mark.parametrize(
    ("status", "headers", "error", "message"),
    [
        (404, {"X-Error-Code": "EntryNotFound"}, MissingFile, "listed at"),
        (404, {}, HubUnavailable, "answered 404"),
        (401, {"X-Error-Code": "GatedRepo"}, RepoGated, "gated"),
        (403, {}, HubUnavailable, "answered 403"),
        (500, {}, HubUnavailable, "answered 500"),
        (429, {"RateLimit": '"api";r=0;t=41'}, RateLimited, "rate limited"),
        (429, {"RateLimit": "", "Retry-After": "7"}, RateLimited, "rate limited"),
    ],
)
def test_a_download_fault_is_ours(served, replay, status, headers, error, message) -> None:
    """One GET per file, no retry: the Hub's answer becomes our error (a 404 the Hub names EntryNotFound: the file
    is missing, noted on the revision; a 429 carries the wait it asked for), counted once by the request budget."""
    app, _, second = served
    replay.inject(status, path=f"/resolve/{second}/config.json$", method="GET", headers=headers)
    replay.reset_requests()
    with counting_requests(replay.endpoint) as counted, pytest.raises(error, match=message) as raised:
        app.hub.download(REPO, second, "config.json")
    assert counted == [1] and len(replay.requests) == 1
    if error is RateLimited:
        assert raised.value.retry_after_s == (42.0 if "t=41" in headers["RateLimit"] else 7.0)
    assert app.hub.download(REPO, second, "config.json") == replay.repo(REPO).trees[second]["config.json"].blob.read()


def test_a_body_longer_than_the_tree_says_is_cut(served, replay) -> None:
    """`max_bytes` (the tree's size) stops the read one byte past it: such bytes cannot match the tree's oid."""
    app, _, second = served
    data = replay.repo(REPO).trees[second]["config.json"].blob.read()
    assert app.hub.download(REPO, second, "config.json", max_bytes=len(data)) == data
    assert app.hub.download(REPO, second, "config.json", max_bytes=100) == data[:101]


def test_a_stored_snapshot_reads_a_large_file_when_first_asked_for(moved, monkeypatch: pytest.MonkeyPatch) -> None:
    """load_snapshot reads the small files in one query and holds the large tokenizer.json without reading it;
    asking for it reads that one blob, once, and the bytes are the stored ones."""
    app, first, _ = moved
    revision = app.store.history.find_revision(REPO, first)
    asked = _count_reads(app, monkeypatch)
    parent = load_snapshot(app.store, revision)
    tokenizer = parent.files["tokenizer.json"]
    assert tokenizer.size > DEFER_BYTES and "tokenizer.json" in parent.contents
    assert parent.contents.is_deferred("tokenizer.json") and tokenizer.oid not in asked["read_blobs"]
    assert asked["known_blobs"] == [tokenizer.oid]
    assert not any(parent.contents.is_deferred(p) for p in ("config.json", "tokenizer_config.json", "README.md"))
    data = parent.contents["tokenizer.json"]
    assert git_blob_oid(data) == tokenizer.oid and asked["read_blobs"].count(tokenizer.oid) == 1
    assert parent.contents["tokenizer.json"] is data and asked["read_blobs"].count(tokenizer.oid) == 1
