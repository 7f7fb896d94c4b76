"""Canonical short dataset names (`wikitext`, no org) the Hub moved under orgs (`Salesforce/wikitext`) and answers
with a redirect, end to end through the real huggingface_hub client against the replay: the replay's redirect,
`watch add NAME --type dataset` resolving it (never storing a key without an org), the configuration's clear error,
and pins in code (`load_dataset("wikitext", ..., revision=...)`) reported by `outdated` as moved, or gone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import RepositoryNotFoundError

from storage.kinds import split_repo_key
from tests.support.cli import app_on, invoke_with
from tests.support.dataset_repos import evolving_dataset
from tracker.cli.app import App
from tracker.config import settings_from_mapping, validate_repo
from tracker.errors import ConfigError
from tracker.hub.client import HubClient
from tracker.pins.code_scan import scan_tree
from tracker.pins.lockfile import read_lock
from tracker.standins.replay.control import ReplayServer

CANONICAL = "datasets/hubwatch-canon/wikitext"  # where the short name `wikitext` redirects to
SHORT = "wikitext"


@pytest.fixture(scope="module")
def hub() -> Iterator[ReplayServer]:
    with ReplayServer(roots=[]) as server:
        server.add_repo(evolving_dataset(CANONICAL, with_conversion=False))
        server.canonical_name(SHORT, CANONICAL)
        yield server


@pytest.fixture
def app(hub: ReplayServer, database_url: str) -> Iterator[App]:
    with app_on(hub.endpoint, database_url) as app:
        yield app


def run(app: App, *args: str):
    return invoke_with(app, *args)


def test_the_replay_redirects_a_short_name_to_its_org_name(hub: ReplayServer, tmp_path: Path) -> None:
    """The real client asking for `wikitext` follows the 307 and reads the org name's info, tree and files; a short
    name the replay does not know is RepositoryNotFound, as on the Hub."""
    api = HfApi(endpoint=hub.endpoint, token=False)
    info = api.dataset_info(SHORT)
    assert info.id == split_repo_key(CANONICAL)[1] and info.sha == hub.head_sha(CANONICAL)
    assert "README.md" in [f.path for f in api.list_repo_tree(SHORT, repo_type="dataset")]
    head = HubClient(hub.endpoint).head(f"datasets/{SHORT}", "main")
    assert head.repo_id == CANONICAL and head.sha == hub.head_sha(CANONICAL)
    path = hf_hub_download(SHORT, "README.md", repo_type="dataset", endpoint=hub.endpoint, cache_dir=tmp_path, token=False)
    assert Path(path).read_bytes() == HubClient(hub.endpoint).download(CANONICAL, head.sha, "README.md")
    with pytest.raises(RepositoryNotFoundError):
        api.dataset_info("squad")
    with pytest.raises(ValueError, match="without an org"):
        hub.canonical_name("org/name", CANONICAL)


def test_the_replay_admin_route_sets_a_short_name(hub: ReplayServer) -> None:
    """`POST /_replay/canonical/{short}?to=ORG/NAME`, for a replay in another process; a target it does not serve is
    refused (400)."""
    ok = httpx.post(f"{hub.endpoint}/_replay/canonical/wikitext-103?to={split_repo_key(CANONICAL)[1]}")
    assert ok.status_code == 200 and ok.json() == {"short": "wikitext-103", "repo_id": CANONICAL}
    assert HfApi(endpoint=hub.endpoint, token=False).dataset_info("wikitext-103").id == split_repo_key(CANONICAL)[1]
    assert httpx.post(f"{hub.endpoint}/_replay/canonical/glue?to=nyu-mll/glue").status_code == 400


def test_watch_add_a_short_name_watches_the_org_name_and_says_so(app: App, hub: ReplayServer) -> None:
    result = run(app, "watch", "add", SHORT, "--type", "dataset")
    assert result.exit_code == 0, result.output
    assert f"{SHORT} is a dataset's canonical short name: the Hub redirects it to hubwatch-canon/wikitext" in result.output
    assert f"watching {CANONICAL}@main" in result.output
    assert [w.repo_id for w in app.store.watches.list_watches()] == [CANONICAL]


def test_a_short_name_the_hub_does_not_resolve_is_a_clear_error_and_nothing_is_stored(app: App) -> None:
    result = run(app, "watch", "add", "squad", "--type", "dataset")
    assert result.exit_code == 3
    assert "dataset squad does not resolve on the Hub" in result.output and "find the dataset's ORG/NAME" in result.output
    no_check = run(app, "watch", "add", SHORT, "--type", "dataset", "--no-check")
    assert no_check.exit_code == 2 and "--no-check cannot ask the Hub" in no_check.output
    both = run(app, "watch", "add", "squad", SHORT, "--type", "dataset")  # the good one is added all the same
    assert both.exit_code == 3 and "1 of 2 added or already watched, 1 failed" in both.output
    assert [w.repo_id for w in app.store.watches.list_watches()] == [CANONICAL]


@pytest.mark.parametrize("entry", [{"repo": SHORT, "type": "dataset"}, {"repo": f"datasets/{SHORT}"}])
def test_the_configuration_refuses_a_short_name_saying_what_to_write(entry: dict) -> None:
    """The configuration is read without asking the Hub: a [[watch]] naming a short name is refused, saying what to
    write instead."""
    with pytest.raises(ConfigError, match="canonical short name, without an org.*watch add wikitext --type dataset"):
        settings_from_mapping({"watch": [entry]}, env={}, source="test")
    assert validate_repo("Salesforce/wikitext", "dataset") == "datasets/Salesforce/wikitext"


def test_watch_add_takes_a_short_name_written_as_its_url_path(app: App) -> None:
    result = run(app, "watch", "add", f"datasets/{SHORT}")
    assert result.exit_code == 0, result.output
    assert [w.repo_id for w in app.store.watches.list_watches()] == [CANONICAL]


def _code(tmp_path: Path, repo: str, sha: str) -> Path:
    (tmp_path / "train.py").write_text(
        "from datasets import load_dataset\n"
        f'ds = load_dataset("{repo}", "wikitext-2-raw-v1", revision="{sha}")\n'
        'local = load_dataset("json", data_files="x.jsonl", revision="main")\n'
        'folder = load_dataset("my_folder")\n', encoding="utf-8")
    return tmp_path


def test_the_scanner_finds_a_short_name_pin_and_not_a_packaged_builder(tmp_path: Path) -> None:
    scan = scan_tree(_code(tmp_path, SHORT, "a" * 40))
    assert [(p.repo_id, p.sha) for p in scan.pins] == [(f"datasets/{SHORT}", "a" * 40)]
    assert not scan.unpinned and not scan.branch_pins and not scan.problems


def test_outdated_reports_a_short_name_pin_as_moved_to_its_org_name(app: App, hub: ReplayServer, tmp_path: Path) -> None:
    pinned = hub.commits(CANONICAL)[0].sha
    result = run(app, "outdated", "--scan", str(_code(tmp_path, SHORT, pinned)), "--json")
    assert result.exit_code == 3, result.output
    [model] = json.loads(result.output)["models"]
    assert (model["repo_id"], model["status"], model["moved_to"]) == (f"datasets/{SHORT}", "moved", CANONICAL)
    assert model["commits_behind"] == len(hub.commits(CANONICAL)) - 1
    assert f"update the pin's repo id to {CANONICAL}" in model["what_to_do"]
    assert not [w.repo_id for w in app.store.watches.list_watches() if "/" not in split_repo_key(w.repo_id)[1]]
    text = run(app, "outdated", "--scan", str(tmp_path)).output
    assert f"datasets/{SHORT}@main  moved to {CANONICAL}" in text and f"update the pin's repo id to {CANONICAL}" in text


def test_outdated_reports_a_short_name_the_hub_does_not_resolve_as_gone_saying_what_to_do(app: App, tmp_path: Path) -> None:
    result = run(app, "outdated", "--scan", str(_code(tmp_path, "squad", "b" * 40)), "--json")
    assert result.exit_code == 3, result.output
    [model] = json.loads(result.output)["models"]
    assert (model["repo_id"], model["status"]) == ("datasets/squad", "gone")
    assert "canonical short name" in model["message"] and "pin that" in model["message"]


def test_lock_scan_locks_a_short_name_pin_under_its_org_name(app: App, hub: ReplayServer, tmp_path: Path) -> None:
    """`lock --scan` never writes a name without an org: the short name is locked as the org name it redirects to,
    and one the Hub does not resolve is a bad entry (exit 1); the lock file reads back."""
    pinned = hub.commits(CANONICAL)[0].sha
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    lock = tmp_path / "hubwatch.lock"
    result = run(app, "lock", "--lock", str(lock), "--scan", str(_code(tmp_path / "a", SHORT, pinned)))
    assert result.exit_code == 0, result.output
    assert f"datasets/{SHORT} is a dataset's canonical short name: locked as {CANONICAL}" in result.output
    assert f'repo = "{CANONICAL}"' in lock.read_text() and f'"datasets/{SHORT}"' not in lock.read_text()
    pins, bad = read_lock(lock)
    assert [(p.repo_id, p.sha) for p in pins] == [(CANONICAL, pinned)] and not bad
    gone = run(app, "lock", "--lock", str(tmp_path / "other.lock"), "--scan", str(_code(tmp_path / "b", "squad", pinned)))
    assert gone.exit_code == 1 and "pin the dataset's ORG/NAME" in gone.output


def test_a_resolved_short_name_is_kept_as_an_alias_readers_answer(app: App, hub: ReplayServer, tmp_path: Path) -> None:
    """What hubwatch saw the Hub resolve is kept, so the Renovate datasource answers the short name: `watch add`,
    `outdated --scan` and `lock --scan` each record datasets/wikitext -> the org name; nothing is stored under it."""
    renames = app.store.renames
    assert app.store.renames.current_name(f"datasets/{SHORT}") is None
    assert run(app, "watch", "add", SHORT, "--type", "dataset").exit_code == 0
    assert app.store.renames.current_name(f"datasets/{SHORT}") == CANONICAL
    assert renames.record_short_name(f"datasets/{SHORT}", CANONICAL) is False  # already known: nothing changed
    assert renames.record_short_name(f"datasets/{SHORT}", "datasets/other-org/wikitext") is True  # the Hub moved it
    assert renames.current_name(f"datasets/{SHORT}") == "datasets/other-org/wikitext"
    pinned = hub.commits(CANONICAL)[0].sha
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert run(app, "outdated", "--scan", str(_code(tmp_path / "a", SHORT, pinned)), "--json").exit_code == 3
    assert renames.current_name(f"datasets/{SHORT}") == CANONICAL
    renames.record_short_name(f"datasets/{SHORT}", "datasets/other-org/wikitext")
    assert run(app, "lock", "--lock", str(tmp_path / "x.lock"), "--scan", str(_code(tmp_path / "b", SHORT, pinned))).exit_code == 0
    assert renames.current_name(f"datasets/{SHORT}") == CANONICAL
    assert not [w.repo_id for w in app.store.watches.list_watches() if w.repo_id == f"datasets/{SHORT}"]


@pytest.mark.parametrize(("short", "key"), [
    ("wikitext", CANONICAL), ("datasets/org/name", CANONICAL), (f"datasets/{SHORT}", "hubwatch-canon/wikitext"),
    (f"datasets/{SHORT}", "datasets/wikitext"), (f"datasets/{SHORT}", "datasets/x/../y"),
])
def test_only_a_short_dataset_key_aliases_a_datasets_org_name(app: App, short: str, key: str) -> None:
    """A short name is `datasets/NAME`, and it aliases only a dataset's `datasets/ORG/NAME`: anything else is refused
    and nothing is kept."""
    with pytest.raises(ValueError, match="short name key|dataset's key"):
        app.store.renames.record_short_name(short, key)
    assert app.store.renames.current_name(short) is None
