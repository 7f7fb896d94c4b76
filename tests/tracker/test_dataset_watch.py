"""Dataset repos as a kind of watch, end to end through the real huggingface_hub client against the replay:
`watch add --type dataset`, the config's `type = "dataset"`, the ingest, `history`/`show`/`diff`/`feed`, an org's
datasets followed by the dataset listing, and the bad input (missing, gated, disabled, a model named as a dataset)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import feedparser
import pytest

from storage.kinds import repo_key, split_repo_key
from storage.listing_state import author_scope
from tests.support.cli import app_on, invoke_with
from tests.support.dataset_repos import DATASET_ID, SCRIPT_ONLY_ID, evolving_dataset, script_only_dataset
from tests.support.settings import settings_for
from tracker.cli.app import App
from tracker.polling.listing import ListingPass
from tracker.standins.replay.control import ReplayServer
from tracker.standins.replay.history import synthetic_history

NAME = split_repo_key(DATASET_ID)[1]  # hubwatch-test/evolving-qa: also a model's name on this Hub
SCRIPTED = split_repo_key(SCRIPT_ONLY_ID)[1]


@pytest.fixture(scope="module")
def hub() -> Iterator[ReplayServer]:
    """A Hub with the evolving dataset, a script-only dataset and a model named like the evolving dataset."""
    with ReplayServer(roots=[]) as server:
        server.add_repo(evolving_dataset())
        server.add_repo(script_only_dataset())
        server.add_repo(synthetic_history(NAME, commits=2))
        server.add_repo(synthetic_history("hubwatch-test/only-a-model", commits=1))
        yield server


@pytest.fixture
def app(hub: ReplayServer, database_url: str) -> Iterator[App]:
    with app_on(hub.endpoint, database_url) as app:
        yield app


def run(app: App, *args: str):
    return invoke_with(app, *args)


def watched(app: App) -> list[str]:
    return sorted(w.repo_id for w in app.store.watches.list_watches())


def test_a_dataset_and_a_model_of_one_name_are_two_watches(app: App, hub: ReplayServer) -> None:
    """`--type dataset` watches the dataset under `datasets/ORG/NAME`; the model of the same name is another watch."""
    result = run(app, "watch", "add", NAME, "--type", "dataset")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"watching {DATASET_ID}@main every 900s, head at {hub.head_sha(DATASET_ID)[:12]}\n"
    assert run(app, "watch", "add", NAME).exit_code == 0
    assert watched(app) == [DATASET_ID, NAME]
    assert hub.head_sha(DATASET_ID) != hub.head_sha(NAME)


def test_the_dataset_key_names_a_dataset_without_type(app: App) -> None:
    """`datasets/ORG/NAME` (the Hub's URL path) is a dataset as it is; `--type dataset` on it changes nothing."""
    assert run(app, "watch", "add", DATASET_ID).exit_code == 0
    assert run(app, "watch", "add", DATASET_ID, "--type", "dataset").exit_code != 0  # the same watch: exists
    assert watched(app) == [DATASET_ID]


def test_dataset_history_show_diff_and_feed(app: App, hub: ReplayServer) -> None:
    """Every revision of the dataset is ingested through the real client; `history`, `show`, `diff` and `feed` name
    the dataset by its key; the shards changed are file changes, and the licence change is in the card."""
    assert run(app, "watch", "add", NAME, "--type", "dataset", "--backfill", "3").exit_code == 0
    polled = run(app, "poll", "--json")
    assert polled.exit_code == 0, polled.output
    [outcome] = json.loads(polled.stdout)
    assert outcome["repo_id"] == DATASET_ID and len(outcome["revisions"]) == 4
    shas = [c.sha for c in hub.repo(DATASET_ID).commits]
    history = json.loads(run(app, "history", DATASET_ID, "--json").stdout)
    assert [r["sha"] for r in history] == shas[::-1]
    by_sha = {r["sha"]: r for r in history}
    gained = {c["path"] for c in by_sha[shas[1]]["changes"] if c["kind"] == "files"}
    assert gained == {"README.md", "data/train-00000-of-00001.parquet"}
    removed = {c["path"] for c in by_sha[shas[2]]["changes"] if c["kind"] == "files"}
    assert removed == {"README.md", "data/test-00000-of-00001.parquet"}
    # and what they are for a user of the dataset (tracker/differs/dataset.py), from the footers read by range
    assert [(c["detail"]["event"], c["path"]) for c in by_sha[shas[1]]["changes"] if c["kind"] == "dataset"] == [
        ("dataset.columns_added", "default")]
    assert [c["summary"] for c in by_sha[shas[2]]["changes"] if c["kind"] == "dataset"] == [
        "config default, split test: 5 rows removed (20 -> 15)"]
    licence = [c["summary"] for c in by_sha[shas[3]]["changes"] if c["path"] == "README.md"]
    assert licence == ["README.md changed", "licence changed: apache-2.0 -> mit"]  # said once, by the dataset's change
    shown = json.loads(run(app, "show", DATASET_ID, shas[0][:12], "--json").stdout)
    assert {f["path"] for f in shown["files"]} == {"README.md", "data/test-00000-of-00001.parquet",
                                                   "data/train-00000-of-00001.parquet",
                                                   "extra/train-00000-of-00001.parquet"}
    diff = json.loads(run(app, "diff", DATASET_ID, shas[0][:12], shas[3][:12], "--json").stdout)
    assert {c["path"] for c in diff["changes"]} >= {"data/train-00000-of-00001.parquet", "data/test-00000-of-00001.parquet"}
    feed = feedparser.parse(run(app, "feed", DATASET_ID).stdout)
    assert feed.feed.title == f"hubwatch: {DATASET_ID}" and feed.entries
    assert feed.feed.link.endswith(f"/repos/{DATASET_ID}")
    assert any("evolving-qa (dataset)" in e.title for e in feed.entries)
    assert run(app, "history", NAME).exit_code == 3  # the model of that name is not watched: nothing stored


def test_dataset_files_are_read_from_the_dataset_routes(app: App, hub: ReplayServer) -> None:
    """The head, commits, tree and the card are asked of /api/datasets and /datasets/.../resolve, never of a model's
    routes; no Parquet shard is downloaded: each is read by Range for its footer (these small ones whole, in one
    request), the shards of the head and of its Parquet conversion (refs/convert/parquet)."""
    run(app, "watch", "add", NAME, "--type", "dataset")
    hub.reset_requests()
    assert run(app, "poll").exit_code == 0
    paths = [r.path for r in hub.requests]
    assert paths and all(p.startswith((f"/api/datasets/{NAME}/", f"/datasets/{NAME}/resolve/")) for p in paths), paths
    shards = [r for r in hub.requests if r.path.endswith(".parquet")]
    assert shards and all(r.range for r in shards)
    assert {r.path.rsplit("/", 1)[-1] for r in shards} == {"train-00000-of-00001.parquet", "test-00000-of-00001.parquet",
                                                           "0000.parquet"}


def test_config_watch_of_type_dataset(hub: ReplayServer, database_url: str) -> None:
    """A [[watch]] with `type = "dataset"` is the dataset's watch; the same name without it is the model's."""
    from tracker.config import settings_from_mapping

    raw = {"hub": {"endpoint": hub.endpoint}, "storage": {"url": database_url},
           "watch": [{"repo": NAME, "type": "dataset"}, {"repo": NAME}]}
    app = App(settings_from_mapping(raw, env={}, source="test"))
    try:
        assert watched(app) == [DATASET_ID, NAME]
    finally:
        app.store.engine.dispose()


@pytest.mark.parametrize(("entry", "message"), [
    ({"repo": NAME, "type": "space"}, "type must be one of model, dataset"),
    ({"repo": NAME, "type": "dataset", "derivatives": ["quantized"]}, "derivatives are followed for models"),
    ({"repo": "datasets/x"}, "not a Hub repo id"),
])
def test_config_watch_type_bad_input(entry: dict, message: str) -> None:
    """A type other than model or dataset, derivatives of a dataset, or a malformed key: a clear config error."""
    from tracker.config import settings_from_mapping
    from tracker.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        settings_from_mapping({"watch": [entry]}, env={}, source="test")


def test_config_watches_twice_only_when_same_kind() -> None:
    """The dataset and the model of one name may both be configured; the dataset twice (by name and key) may not."""
    from tracker.config import settings_from_mapping
    from tracker.errors import ConfigError

    settings = settings_from_mapping({"watch": [{"repo": NAME, "type": "dataset"}, {"repo": NAME}]}, env={}, source="t")
    assert [w.key for w in settings.watch] == [DATASET_ID, NAME]
    with pytest.raises(ConfigError, match="watched twice"):
        settings_from_mapping({"watch": [{"repo": NAME, "type": "dataset"}, {"repo": DATASET_ID}]}, env={}, source="t")


@pytest.mark.parametrize(("args", "code", "message"), [
    (("hubwatch-test/no-such-dataset", "--type", "dataset"), 3, "does not exist"),
    (("hubwatch-test/only-a-model", "--type", "dataset"), 3, "is a model on the Hub: watch it without --type dataset"),
    ((SCRIPTED,), 3, f"is a dataset on the Hub: watch it with --type dataset (or as {SCRIPT_ONLY_ID})"),
    (("not a repo", "--type", "dataset"), 2, "not a Hub repo id"),
    ((NAME, "--type", "dataset", "--derivatives"), 2, "a dataset has none"),
])
def test_watch_add_dataset_bad_input(app: App, args: tuple[str, ...], code: int, message: str) -> None:
    """A missing dataset, a model named as a dataset (and the reverse), a malformed name: exit codes as for models,
    the message says which kind the Hub has, and nothing is stored."""
    result = run(app, "watch", "add", *args)
    assert result.exit_code == code, result.output
    assert message in result.output
    assert watched(app) == []


@pytest.mark.parametrize(("state", "message"), [("gated", "is gated"), ("disabled", "was disabled by the Hub")])
def test_watch_add_gated_or_disabled_dataset(app: App, hub: ReplayServer, state: str, message: str) -> None:
    """A gated dataset whose files are refused, or a disabled one: exit 3 with its state, as for a model."""
    hub.set_state(SCRIPT_ONLY_ID, state)
    try:
        result = run(app, "watch", "add", SCRIPTED, "--type", "dataset")
    finally:
        hub.set_state(SCRIPT_ONLY_ID, "active")
    assert result.exit_code == 3, result.output
    assert message in result.output and f"[repo state: {state}" in result.output
    assert watched(app) == []


def test_org_datasets_followed_by_the_dataset_listing(app: App, hub: ReplayServer) -> None:
    """`ORG/* --type dataset` follows every dataset of ORG (not its models) from /api/datasets?author=ORG; a listing
    pass reads the dataset listing for it, and a dataset that moved is handed on to be polled."""
    result = run(app, "watch", "add", "hubwatch-test/*", "--type", "dataset")
    assert result.exit_code == 0, result.output
    assert "watching every dataset of datasets/hubwatch-test/* every 900s: 2 listed now, 2 newly watched" in result.stdout
    assert watched(app) == sorted([DATASET_ID, SCRIPT_ONLY_ID])
    assert "datasets/hubwatch-test/*  every dataset of hubwatch-test" in run(app, "watch", "list").stdout
    listed = json.loads(run(app, "watch", "list", "--json").stdout)
    assert {(w["repo_id"], w["repo_type"]) for w in listed} == {
        ("datasets/hubwatch-test/*", "dataset"), (DATASET_ID, "dataset"), (SCRIPT_ONLY_ID, "dataset")}
    assert app.store.listing.listing_state(author_scope("datasets/hubwatch-test")) is not None
    for watch in app.store.watches.list_watches():
        app.store.watches.move_watch(watch.id, hub.head_sha(watch.repo_id))
    hub.reset_requests()
    passes = ListingPass(app.store.listing, app.hub).run(include_all=True)
    assert [r.path for r in hub.requests] == ["/api/datasets"]
    assert all("author=hubwatch-test" in r.query for r in hub.requests)
    assert [p.scope for p in passes] == [author_scope("datasets/hubwatch-test")] and not passes[0].moved
    hub.set_head(SCRIPT_ONLY_ID, 1)  # the head moves (back): listed as modified now
    moved = ListingPass(app.store.listing, app.hub).run(include_all=True)
    assert moved[0].moved == [(SCRIPT_ONLY_ID, "main")]
    hub.set_head(SCRIPT_ONLY_ID, 2)
    assert run(app, "watch", "remove", "datasets/hubwatch-test/*").exit_code == 0
    assert watched(app) == []


def test_repo_key_round_trip() -> None:
    """A dataset's key is `datasets/` + its id, and splits back; a model's id is its own key."""
    assert repo_key(NAME, "dataset") == DATASET_ID and split_repo_key(DATASET_ID) == ("dataset", NAME)
    assert repo_key(NAME) == NAME and split_repo_key(NAME) == ("model", NAME)
    assert repo_key(DATASET_ID, "dataset") == DATASET_ID


def test_each_dataset_revision_is_handed_to_the_dataset_summary(app: App, hub: ReplayServer) -> None:
    """The ingest hands every dataset revision (its files, its card, its parent's card) to the dataset summary
    before the write, and the changes it returns are stored with the revision; a model's revisions are not."""
    from tracker.pipeline.dataset_revision import DatasetRevision
    from tracker.pipeline.ingest import Ingestor
    from tracker.revision.changes import Change, ChangeKind, Severity

    seen: list[tuple[str, str, set[str], bytes | None, bytes | None]] = []

    def summary(revision: DatasetRevision) -> list[Change]:
        seen.append((revision.hub_id, revision.sha, set(revision.files), revision.card, revision.parent_card))
        if revision.parent is None:
            return []
        return [Change(ChangeKind.FILES, "data/test-00000-of-00001.parquet", f"summary of {revision.sha[:7]}", Severity.NOTICE)]

    app.store.watches.add_watch(DATASET_ID, "main", 900, backfill=3)
    app.store.watches.add_watch(NAME, "main", 900)
    ingestor = Ingestor(app.store, app.hub, app.settings, dataset_summary=summary)
    for watch in app.store.watches.list_watches():
        assert not ingestor.poll(watch).failed
    shas = [c.sha for c in hub.repo(DATASET_ID).commits]
    assert [s[1] for s in seen] == shas and {s[0] for s in seen} == {NAME}
    assert "data/train-00000-of-00001.parquet" in seen[0][2] and "extra/train-00000-of-00001.parquet" in seen[0][2]
    assert seen[0][3] is not None and b"license: apache-2.0" in seen[0][3] and seen[0][4] is None
    assert b"license: mit" in seen[3][3] and b"license: apache-2.0" in seen[3][4]
    head = app.store.history.find_revision(DATASET_ID, shas[3])
    stored = app.store.history.changes_by_revision([head.id])[head.id]
    assert f"summary of {shas[3][:7]}" in [c.summary for c in stored]


@pytest.fixture
def served_dataset(app: App, hub: ReplayServer):
    """The dataset and the model of the same name, every revision of the dataset ingested, behind the HTTP server
    (writes with API_TOKEN, Hub webhooks with HOOK_SECRET, triggers recorded)."""
    from tests.support.served import API_TOKEN, HOOK_SECRET, serve

    assert run(app, "watch", "add", NAME, "--type", "dataset", "--backfill", "3").exit_code == 0
    assert run(app, "watch", "add", NAME).exit_code == 0
    assert run(app, "poll").exit_code == 0
    triggered: list[tuple[str, str | None]] = []
    with serve(app.store, api_token=API_TOKEN, hub_webhook_secret=HOOK_SECRET,
               trigger=lambda repo_id, branch, sha=None: triggered.append((repo_id, branch)) or True) as server:
        yield server, triggered


def test_pages_feeds_and_api_of_a_dataset(served_dataset, hub: ReplayServer) -> None:
    """A dataset's pages, feeds and API are its model routes under /repos/datasets/{org}/{name}; the model of the same
    name keeps /repos/{org}/{name}; the timeline links the dataset's Hub page."""
    server, _ = served_dataset
    shas = [c.sha for c in hub.repo(DATASET_ID).commits]
    with server.client() as client:
        page = client.get(f"/repos/{DATASET_ID}")
        assert page.status_code == 200 and "Relicense under MIT" in page.text
        assert f'href="https://huggingface.co/datasets/{NAME}"' in page.text  # its page on the Hub
        assert "/estimates" not in page.text and "/derivatives" not in page.text  # a model's pages only
        assert f'href="/repos/{NAME}/estimates"' in client.get(f"/repos/{NAME}").text
        assert "Relicense under MIT" not in client.get(f"/repos/{NAME}").text  # the model's timeline
        revision = client.get(f"/repos/{DATASET_ID}/revisions/{shas[2]}")
        assert revision.status_code == 200 and "data/test-00000-of-00001.parquet" in revision.text
        assert f'href="https://huggingface.co/datasets/{NAME}/commit/{shas[2]}"' in revision.text
        assert "/estimates" not in revision.text
        compare = client.get(f"/repos/{DATASET_ID}/compare/{shas[0]}...{shas[3]}")
        assert compare.status_code == 200 and "data/train-00000-of-00001.parquet" in compare.text
        feed = feedparser.parse(client.get(f"/repos/{DATASET_ID}/feed.atom").text)
        assert feed.entries and feed.feed.title == f"hubwatch: {DATASET_ID}"
        assert all(e.link.split("/repos/")[1].startswith(f"{DATASET_ID}/") for e in feed.entries)
        api = client.get(f"/api/v1/repos/{DATASET_ID}/revisions", params={"limit": 10}).json()
        assert [r["sha"] for r in api["items"]] == shas[::-1] and {r["repo_id"] for r in api["items"]} == {DATASET_ID}
        detail = client.get(f"/api/v1/repos/{DATASET_ID}/revisions/{shas[0]}").json()
        assert "extra/train-00000-of-00001.parquet" in {f["path"] for f in detail["files"]}
        assert detail["purl"] is None  # the huggingface purl type names models; the BOM names a dataset by its URL
        model = client.get(f"/api/v1/repos/{NAME}/revisions").json()
        assert {r["repo_id"] for r in model["items"]} == {NAME}
        org = feedparser.parse(client.get("/orgs/hubwatch-test/feed.atom").text)  # the org's models and datasets
        assert {DATASET_ID, NAME} <= {e.link.split("/repos/")[1].rsplit("/revisions/", 1)[0] for e in org.entries}
        events = client.get("/api/v1/events", params={"repo": DATASET_ID}).json()["items"]
        assert events and {e["repo_id"] for e in events} == {DATASET_ID}
        assert client.get("/repos/datasets/hubwatch-test/no-such").status_code == 404


def test_api_watches_a_dataset(served_dataset) -> None:
    """POST /api/v1/watches with repo_type dataset watches the dataset's key; DELETE under /watches/datasets/ removes
    that watch and leaves the model's."""
    from tests.support.served import API_TOKEN

    server, _ = served_dataset
    auth = {"Authorization": f"Bearer {API_TOKEN}"}
    with server.client() as client:
        added = client.post("/api/v1/watches", json={"repo_id": SCRIPTED, "repo_type": "dataset"}, headers=auth)
        assert added.status_code == 201 and added.json()["repo_id"] == SCRIPT_ONLY_ID
        assert added.json()["repo_type"] == "dataset"
        listed = {w["repo_id"]: w["repo_type"] for w in client.get("/api/v1/watches").json()}
        assert listed == {SCRIPT_ONLY_ID: "dataset", DATASET_ID: "dataset", NAME: "model"}
        bad = client.post("/api/v1/watches", json={"repo_id": SCRIPTED, "repo_type": "space"}, headers=auth)
        assert bad.status_code == 422
        assert client.delete(f"/api/v1/watches/{DATASET_ID}", headers=auth).status_code == 204
        assert client.delete(f"/api/v1/watches/{DATASET_ID}", headers=auth).status_code == 404
    assert sorted(w.repo_id for w in server.store.watches.list_watches()) == [SCRIPT_ONLY_ID, NAME]


@pytest.mark.parametrize(("repo_type", "expected"), [("dataset", DATASET_ID), ("model", NAME)])
def test_hub_webhook_for_a_dataset(served_dataset, repo_type: str, expected: str) -> None:
    """A Hub webhook whose repo.type is dataset triggers the dataset's watch (not the model of the same name), and
    one of type model the model's; a space is ignored."""
    from tests.support.served import HOOK_SECRET

    server, triggered = served_dataset
    body = {"event": {"action": "update", "scope": "repo.content"},
            "repo": {"type": repo_type, "name": NAME, "id": "65f0c0ffee", "private": False, "headSha": "f" * 40},
            "updatedRefs": [{"ref": "refs/heads/main", "oldSha": None, "newSha": "f" * 40}]}
    with server.client() as client:
        answer = client.post("/hooks/hub", json=body, headers={"X-Webhook-Secret": HOOK_SECRET})
        assert answer.status_code == 202, answer.text
        assert answer.json()["repo_id"] == expected and triggered == [(expected, "main")]
        space = client.post("/hooks/hub", json={**body, "repo": {**body["repo"], "type": "space"}},
                            headers={"X-Webhook-Secret": HOOK_SECRET})
        assert space.status_code == 200 and space.json()["status"] == "ignored"


@pytest.mark.parametrize(("globs", "dataset", "model"), [
    (["datasets/hubwatch-test/*"], True, False),
    (["hubwatch-test/*"], False, True),
    (["*"], True, True),
])
def test_subscription_repo_globs_tell_datasets_from_models(globs: list[str], dataset: bool, model: bool) -> None:
    """An outbound subscription's repo globs match the key: `datasets/ORG/*` selects the org's datasets, `ORG/*` its
    models, `*` both."""
    from storage.models import Event, Subscription
    from storage.subscriptions import matches

    sub = Subscription(url="https://example.org/hook", format="generic", repos=globs, kinds=[], min_severity="info",
                       enabled=True)
    assert matches(sub, Event(event_id="a", repo_id=DATASET_ID, kind="revision.ingested", severity="notice")) is dataset
    assert matches(sub, Event(event_id="b", repo_id=NAME, kind="revision.ingested", severity="notice")) is model


def test_datasets_watched_alone_are_read_from_the_listing_of_every_dataset(app: App, hub: ReplayServer) -> None:
    """With the listing on, a dataset watched on its own is covered by the listing of every dataset (polled at the
    reconcile interval, as a model by the listing of every model): a pass reads /api/models and /api/datasets once
    each, and the dataset that moved is handed on; with only datasets of a followed org, no such pass is made."""
    from tracker.polling.listing import ListingJob

    settings = settings_for(hub.endpoint, app.settings.database_url, poll={"listing": "on", "reconcile_interval": "1d"})
    app.store.watches.add_watch(NAME, "main", 900)
    app.store.watches.add_watch(DATASET_ID, "main", 900)
    triggered: list[tuple[str, str]] = []
    job = ListingJob(settings, app.store.listing, app.hub, lambda r, b: triggered.append((r, b)))
    assert job.plan(app.store.watches.list_watches()) == {f"{NAME}@main": 86400, f"{DATASET_ID}@main": 86400}
    for watch in app.store.watches.list_watches():
        app.store.watches.move_watch(watch.id, hub.head_sha(watch.repo_id))
    hub.reset_requests()
    passes = job()
    assert sorted(r.path for r in hub.requests) == ["/api/datasets", "/api/models"]
    assert not any("author=" in r.query for r in hub.requests)
    assert {p.scope for p in passes} == {"*", "datasets:*"} and triggered == []
    hub.set_head(DATASET_ID, 3)  # the dataset's head moves: listed as modified now
    try:
        job()
        assert triggered == [(DATASET_ID, "main")]
    finally:
        hub.set_head(DATASET_ID, 4)
    assert app.store.watches.remove_watch(DATASET_ID) == 1
    assert run(app, "watch", "add", "hubwatch-test/*", "--type", "dataset").exit_code == 0
    hub.reset_requests()
    ListingJob(settings, app.store.listing, app.hub, lambda r, b: None)()
    # the followed org was just listed (its own pass not due yet); no listing of every dataset is made for it
    assert [r.path for r in hub.requests] == ["/api/models"]


def test_renovate_datasource_of_a_dataset(served_dataset, hub: ReplayServer) -> None:
    """The Renovate datasource answers for a dataset under /api/v1/renovate/datasets/{org}/{name}, its source the
    dataset's Hub page."""
    server, _ = served_dataset
    with server.client() as client:
        answer = client.get(f"/api/v1/renovate/{DATASET_ID}")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["sourceUrl"] == f"https://huggingface.co/datasets/{NAME}"
    assert [r["digest"] for r in body["releases"]] == [hub.head_sha(DATASET_ID)]


def test_outdated_scan_checks_dataset_pins(hub: ReplayServer, tmp_path, database_url: str) -> None:
    """`outdated --scan` finds datasets pinned in code (`load_dataset("org/name", revision=...)`, a Hub call with
    `repo_type="dataset"`, `hf download ... --repo-type dataset`), checks them upstream under their key, apart from
    the model of the same name; a space is not followed."""
    from tests.support.cli import run_cli, write_config

    config = write_config(tmp_path / "hubwatch.toml", hub.endpoint, database_url)
    shas = [c.sha for c in hub.repo(DATASET_ID).commits]
    model_sha = hub.head_sha(NAME)
    root = tmp_path / "src"
    root.mkdir()
    (root / "train.py").write_text(
        "from datasets import load_dataset\nfrom huggingface_hub import hf_hub_download, snapshot_download\n"
        f'qa = load_dataset("{NAME}", "default", revision="{shas[0]}")\n'
        f'card = hf_hub_download("{NAME}", "README.md", repo_type="dataset", revision="{shas[3]}")\n'
        f'model = snapshot_download("{NAME}", revision="{model_sha}")\n'
        f'demo = snapshot_download("{NAME}", repo_type="space", revision="{shas[0]}")\n', encoding="utf-8")
    (root / "fetch.sh").write_text(f"hf download {NAME} --repo-type dataset --revision {shas[0]}\n", encoding="utf-8")
    result = run_cli("outdated", "--scan", str(root), "--json", config=config)
    data = json.loads(result.stdout)
    found = {(m["repo_id"], m["pinned_sha"]): m for m in data["models"]}
    assert set(found) == {(DATASET_ID, shas[0]), (DATASET_ID, shas[3]), (NAME, model_sha)}
    assert found[(DATASET_ID, shas[0])]["status"] == "behind" and found[(DATASET_ID, shas[0])]["commits_behind"] == 3
    assert found[(DATASET_ID, shas[3])]["status"] == "up_to_date" and found[(NAME, model_sha)]["status"] == "up_to_date"
    assert {(loc["path"], loc["line"]) for loc in found[(DATASET_ID, shas[0])]["locations"]} == {("train.py", 3),
                                                                                             ("fetch.sh", 1)}
    changed = {c["path"] for c in found[(DATASET_ID, shas[0])]["changes"]}
    assert {"data/train-00000-of-00001.parquet", "data/test-00000-of-00001.parquet"} <= changed
    lock = tmp_path / "models.lock"
    assert run_cli("lock", "--scan", str(root), "--lock", str(lock), config=config).returncode == 0
    import tomllib

    entries = {(e["repo"], e["revision"]) for e in tomllib.loads(lock.read_text())["model"]}
    assert (DATASET_ID, shas[0]) in entries and (NAME, model_sha) in entries
    from_lock = json.loads(run_cli("outdated", "--lock", str(lock), "--json", config=config).stdout)
    assert {(m["repo_id"], m["status"]) for m in from_lock["models"]} >= {(DATASET_ID, "behind"), (NAME, "up_to_date")}


def test_a_watched_dataset_gated_then_disabled_is_followed_as_a_model(app: App, hub: ReplayServer) -> None:
    """A watched dataset the Hub gates is followed through what stays readable (its new commit stored, its card
    named unread, exit 3); disabled, its poll fails with that state and an event; restored, it answers again."""
    hub.set_head(SCRIPT_ONLY_ID, 1)
    try:
        assert run(app, "watch", "add", SCRIPTED, "--type", "dataset").exit_code == 0
        assert run(app, "poll").exit_code == 0
        hub.set_state(SCRIPT_ONLY_ID, "gated")
        hub.set_head(SCRIPT_ONLY_ID, 2)
        gated = run(app, "poll", "--json")
        [outcome] = json.loads(gated.stdout)
        assert gated.exit_code == 3 and outcome["repo_state"] == "gated" and "README.md" in outcome["unread_files"]
        assert app.store.history.has_revision(SCRIPT_ONLY_ID, hub.head_sha(SCRIPT_ONLY_ID))
        hub.set_state(SCRIPT_ONLY_ID, "disabled")
        disabled = run(app, "poll", "--json")
        assert disabled.exit_code == 3 and json.loads(disabled.stdout)[0]["repo_state"] == "disabled"
        kinds = [e.kind for e in app.store.history.list_events(SCRIPT_ONLY_ID)]
        assert "repo.gated" in kinds and "repo.disabled" in kinds
    finally:
        hub.set_state(SCRIPT_ONLY_ID, "active")
        hub.set_head(SCRIPT_ONLY_ID, 2)
    assert json.loads(run(app, "poll", "--json").stdout)[0]["repo_state"] == "active"
