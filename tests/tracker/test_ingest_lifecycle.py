"""What the Hub does to a watched repo itself, through the ingest: each state stored on the watch with its history
and one event per change, against the replay's `set_state` with the real huggingface_hub client."""

from __future__ import annotations

import pytest

from tracker.cli.app import App

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

BROKEN = "hubwatch-tests/broken-model"


@pytest.fixture(autouse=True)
def no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)


def _watched(app: App, replay, n: int = 1):
    replay.set_head(BROKEN, n)
    app.store.watches.add_watch(BROKEN, "main", 900)
    [outcome] = app.poller.poll()
    assert outcome.status == "ingested"


def _state_events(app: App) -> list[tuple[str, str]]:
    """The repo's lifecycle events (kind, severity), oldest first."""
    events = reversed(app.store.history.list_events(BROKEN))
    return [(e.kind, e.severity) for e in events if e.kind.startswith("repo.") and e.kind != "repo.visibility_changed"]


@pytest.mark.parametrize(("hub_state", "state", "kind", "severity", "words"), [
    ("deleted", "gone", "repo.gone", "critical", "deleted, or made private"),
    ("private", "gone", "repo.gone", "critical", "without a token with access the two look alike"),
    ("disabled", "disabled", "repo.disabled", "critical", "Access to this resource is disabled."),
    ("branch_deleted", "branch_missing", "repo.branch_missing", "critical", "branch main no longer exists"),
])
def test_a_bad_state_is_stored_once_and_its_return_resumes_with_every_commit(
    app: App, replay, hub_state, state, kind, severity, words
) -> None:
    """The state, since when and why are on the watch, one event and one history row per change (repeated polls add
    none); when the repo answers again the commits made meanwhile are all stored and `repo.restored` is told."""
    _watched(app, replay)
    replay.set_state(BROKEN, hub_state)
    for _ in range(2):
        [outcome] = app.poller.poll()
        assert outcome.failed and outcome.repo_state == state
    watch = app.store.watches.get_watch(BROKEN)
    assert (watch.repo_state, watch.error_count) == (state, 2)
    assert watch.state_since is not None and words in watch.state_detail["reason"] + str(app.store.history.list_events(BROKEN)[0].title)
    assert _state_events(app) == [(kind, severity)]
    [change] = app.store.watches.state_changes(BROKEN)
    assert (change.state, change.previous, change.branch) == (state, "active", "main")

    replay.set_state(BROKEN, "active")
    replay.set_head(BROKEN, 3)
    [outcome] = app.poller.poll()
    assert outcome.status == "ingested" and outcome.repo_state == "active" and outcome.state_changed
    assert [r.sha for r in reversed(app.store.history.list_revisions(BROKEN))] == [c.sha for c in replay.commits(BROKEN)[:3]]
    watch = app.store.watches.get_watch(BROKEN)
    assert (watch.repo_state, watch.error_count, watch.last_error, watch.state_detail) == ("active", 0, None, None)
    assert _state_events(app) == [(kind, severity), ("repo.restored", "notice")]
    assert [(c.state, c.previous) for c in app.store.watches.state_changes(BROKEN)] == [(state, "active"), ("active", state)]


def test_a_transient_fault_is_no_state(app: App, replay) -> None:
    """A 500 fails the poll as before, without a state or an event: only the Hub's typed answers tell a state."""
    _watched(app, replay)
    replay.inject(500, path=r"^/api/models/hubwatch-tests/broken-model", times=1)
    [outcome] = app.poller.poll()
    assert outcome.failed and outcome.repo_state == "active"
    assert app.store.watches.get_watch(BROKEN).repo_state == "active"
    assert _state_events(app) == [] and app.store.watches.state_changes(BROKEN) == []


def test_a_gated_repo_is_gated_with_its_mode_until_its_files_are_read(app: App, replay) -> None:
    """Gated without access: the new commit is stored from what stays readable and the watch is gated (with the mode)
    on the first refused file, one warning; polls of an unchanged gated head do not call it restored; once the gate
    is lifted the next commit's files are read and it is restored (tests/tracker/test_ingest_gated.py has the rest)."""
    _watched(app, replay)
    replay.set_state(BROKEN, "gated", gated="manual")
    replay.set_head(BROKEN, 2)
    [outcome] = app.poller.poll()
    assert outcome.status == "ingested" and outcome.repo_state == "gated" and outcome.unread == ["config.json"]
    watch = app.store.watches.get_watch(BROKEN)
    assert watch.repo_state == "gated" and watch.state_detail["mode"] == "manual"
    [outcome] = app.poller.poll()  # the same head: nothing to read, still gated
    assert outcome.status == "unchanged" and outcome.repo_state == "gated" and not outcome.state_changed
    assert _state_events(app) == [("repo.gated", "warning")]
    replay.set_state(BROKEN, "active")
    replay.set_head(BROKEN, 3)
    [outcome] = app.poller.poll()
    assert outcome.status == "ingested" and outcome.repo_state == "active"
    assert _state_events(app) == [("repo.gated", "warning"), ("repo.restored", "notice")]


@pytest.mark.parametrize("fmt", ["generic", "slack", "discord", "apprise"])
def test_state_events_render_in_every_webhook_format(app: App, replay, fmt) -> None:
    """A repo gone and restored: each format renders both events with the kind, the Hub's words and the severity."""
    import json

    from feeds.webhooks import Links, render

    _watched(app, replay)
    replay.set_state(BROKEN, "disabled")
    app.poller.poll()
    replay.set_state(BROKEN, "active")
    app.poller.poll()
    gone, restored = [e for e in reversed(app.store.history.list_events(BROKEN)) if e.kind in ("repo.disabled", "repo.restored")]
    for event, words in ((gone, "Access to this resource is disabled."), (restored, "restored")):
        body = render(event, fmt, Links(hub_endpoint=replay.endpoint))
        text = json.dumps(json.loads(body))
        assert words in text.replace('\\"', '"'), text
        if fmt == "generic":
            assert json.loads(body)["type"] == event.kind


def test_state_events_are_feed_entries(app: App, replay) -> None:
    """The repo's Atom feed carries a gone event as an entry in the `repo.gone` category, severity critical."""
    import feedparser

    from feeds.views.feed import FeedBuilder, FeedRequest

    _watched(app, replay)
    replay.set_state(BROKEN, "deleted")
    app.poller.poll()
    body = FeedBuilder(app.store, app.store.read_model).build(FeedRequest("repo", "atom", BROKEN), "http://h").body
    parsed = feedparser.parse(body)
    assert not parsed.bozo
    [entry] = [e for e in parsed.entries if "repo gone" in e.title]
    assert {"repo.gone", "severity:critical"} <= {t.term for t in entry.tags}


def test_the_state_is_shown_by_watch_list_the_api_the_pages_and_healthz(app: App, replay) -> None:
    """A disabled watch: `watch list` (text and JSON), /api/v1/watches, the home and repo pages name the state;
    /healthz stays "ok" and counts the failing watches by state."""
    from tests.support.served import serve
    from tracker.cli.output import watch_dict, watch_text

    _watched(app, replay)
    replay.set_state(BROKEN, "disabled")
    app.poller.poll()
    watch = app.store.watches.get_watch(BROKEN)
    assert "repo disabled since " in watch_text(watch)
    as_json = watch_dict(watch)
    assert as_json["repo_state"] == "disabled" and as_json["state_since"]
    assert "Access to this resource is disabled." in as_json["state_detail"]["reason"]
    with serve(app.store) as served, served.client() as client:
        [api_watch] = client.get("/api/v1/watches").json()
        assert api_watch["repo_state"] == "disabled" and api_watch["state_since"]
        assert "repo disabled</span> since" in client.get(f"/repos/{BROKEN}").text
        assert ">disabled</span> since" in client.get("/").text
        health = client.get("/healthz").json()
        assert health["status"] == "ok"
        assert (health["watches_failing"], health["watches_by_state"]) == (1, {"disabled": 1})
        metrics = client.get("/metrics").text
        assert 'hubwatch_watches_by_state{state="disabled"} 1' in metrics
        assert 'hubwatch_watches_by_state{state="gone"} 0' in metrics and 'hubwatch_watches_by_state{state="active"} 0' in metrics


def test_a_renamed_repo_is_moved_once_and_followed_through_the_redirect(app: App, replay) -> None:
    """Renamed on the Hub: the watch is `moved` (to the new name) with one `repo.moved` warning, and the commits made
    after the rename are stored, through the Hub's 307, with the whole history under the new name
    (tests/tracker/test_ingest_rename.py)."""
    new = "hubwatch-tests/renamed-model"
    _watched(app, replay)
    replay.rename(BROKEN, new)
    replay.set_head(new, 3)
    [outcome] = app.poller.poll()
    assert outcome.status == "ingested" and outcome.repo_state == "moved" and len(outcome.revisions) == 2
    [outcome] = app.poller.poll()
    assert outcome.status == "unchanged" and outcome.repo_state == "moved" and not outcome.state_changed
    watch = app.store.watches.get_watch(new)
    assert (watch.repo_state, watch.state_detail["moved_to"]) == ("moved", new)
    events = reversed(app.store.history.list_events(new))
    assert [(e.kind, e.severity) for e in events if e.kind == "repo.moved"] == [("repo.moved", "warning")]
    assert len(app.store.history.list_revisions(new)) == 3


def test_a_rename_with_on_move_stop_fails_the_watch_naming_the_new_name(replay, database_url: str) -> None:
    """[poll] on_move = "stop": the renamed repo's watch fails in state moved (exit 3's kind), the new name in its
    detail and error, one `repo.moved` event, and nothing is stored from the new name."""
    from tests.support.settings import settings_for

    app = App(settings_for(replay.endpoint, database_url, poll={"on_move": "stop"}))  # type: ignore[arg-type]
    try:
        _watched(app, replay)
        replay.rename(BROKEN, "hubwatch-tests/renamed-model")
        replay.set_head("hubwatch-tests/renamed-model", 2)
        [outcome] = app.poller.poll()
        assert outcome.failed and outcome.repo_state == "moved"
        assert "renamed to hubwatch-tests/renamed-model" in outcome.error
        watch = app.store.watches.get_watch(BROKEN)
        assert watch.state_detail["moved_to"] == "hubwatch-tests/renamed-model"
        assert _state_events(app) == [("repo.moved", "warning")]
        assert len(app.store.history.list_revisions(BROKEN)) == 1
    finally:
        app.store.engine.dispose()


def test_a_new_repo_under_a_renamed_repos_old_name_is_never_merged(app: App, replay) -> None:
    """Renamed, then a new repo created under the old name: its `_id` differs, so the watch is gone (replaced), one
    `repo.gone` event, and none of the new repo's commits is stored in the old history."""
    from tracker.standins.replay.history import synthetic_history

    _watched(app, replay)
    stored = [r.sha for r in app.store.history.list_revisions(BROKEN)]
    replay.rename(BROKEN, "hubwatch-tests/renamed-model")
    replay.add_repo(synthetic_history(BROKEN, commits=2))
    [outcome] = app.poller.poll()
    assert outcome.failed and outcome.repo_state == "gone"
    assert "another repo" in outcome.error
    assert [r.sha for r in app.store.history.list_revisions(BROKEN)] == stored
    assert app.store.watches.get_watch(BROKEN).state_detail["replaced_by"]
    assert _state_events(app) == [("repo.gone", "critical")]


def test_the_bom_names_the_repo_state_of_a_model_gone_from_the_hub(app: App, replay) -> None:
    """`hubwatch bom` of a stored revision whose repo is now disabled carries `hubwatch:repo-state` on the model."""
    import json
    from datetime import UTC, datetime

    from tracker.pins.bom import render_bom, stored_model

    _watched(app, replay)
    replay.set_state(BROKEN, "disabled")
    app.poller.poll()
    [revision] = app.store.history.list_revisions(BROKEN)
    bom = json.loads(render_bom([stored_model(app.store, revision)], replay.endpoint, datetime.now(UTC), "test"))
    [model] = [c for c in bom["components"] if c["type"] == "machine-learning-model"]
    assert {"name": "hubwatch:repo-state", "value": "disabled"} in model["properties"]


def test_poll_lines_of_a_followed_rename(app: App, replay) -> None:
    """`poll`'s lines for a rename it follows name the new name, never "restored" or "unchanged"."""
    from tracker.cli.output import outcome_text

    _watched(app, replay)
    replay.rename(BROKEN, "hubwatch-tests/renamed-model")
    [outcome] = app.poller.poll()
    lines = outcome_text(outcome)
    assert lines[0] == (f"{BROKEN}@main: repo now moved to hubwatch-tests/renamed-model: followed through the Hub's "
                        "redirect")
    assert not any("restored" in line or "unchanged" in line for line in lines)
