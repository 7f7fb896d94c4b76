"""A repo renamed on the Hub, followed ([poll] on_move = "follow"): its watch and whole history move to the new name
in one transaction, the old name keeps answering (feeds, API, pages, `history`, `show`), and neither an unrelated
history under the new name nor a new repo under the old name is ever merged. Against the replay's `rename` with
the real huggingface_hub client."""

from __future__ import annotations

import pytest

from tests.support.cli import run_cli, write_config
from tracker.cli.app import App

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

OLD = "hubwatch-tests/broken-model"
NEW = "hubwatch-tests/renamed-model"


@pytest.fixture(autouse=True)
def no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)


def _renamed(app: App, replay, commits_after: int = 3):
    """OLD watched and polled at its first commit, renamed to NEW on the Hub with `commits_after` commits shown,
    and polled again: the poll's outcome."""
    replay.set_head(OLD, 1)
    app.store.watches.add_watch(OLD, "main", 900)
    [outcome] = app.poller.poll()
    assert outcome.status == "ingested"
    replay.rename(OLD, NEW)
    replay.set_head(NEW, commits_after)
    [outcome] = app.poller.poll()
    return outcome


def _kinds(app: App, repo_id: str) -> list[str]:
    return [e.kind for e in reversed(app.store.history.list_events(repo_id))]


def test_a_followed_rename_moves_the_watch_and_its_whole_history_to_the_new_name(app: App, replay) -> None:
    """After the poll that sees the rename, the watch, every revision (the commits made after the rename too), its
    events, its state history and its summary are under NEW, nothing is left under OLD, and OLD is an alias of NEW."""
    outcome = _renamed(app, replay)
    assert outcome.status == "ingested" and outcome.repo_state == "moved" and outcome.history_moved_to == NEW
    assert app.store.watches.get_watch(OLD) is None
    watch = app.store.watches.get_watch(NEW)
    assert (watch.repo_state, watch.state_detail["moved_from"], watch.state_detail["moved_to"]) == ("moved", OLD, NEW)
    assert [r.sha for r in reversed(app.store.history.list_revisions(NEW))] == [c.sha for c in replay.commits(NEW)[:3]]
    assert app.store.history.list_revisions(OLD) == []
    assert _kinds(app, NEW).count("repo.moved") == 1 and "revision.ingested" in _kinds(app, NEW)
    assert _kinds(app, OLD) == []
    assert [c.state for c in app.store.watches.state_changes(NEW)] == ["moved"] and not app.store.watches.state_changes(OLD)
    assert [r.repo_id for r in app.store.read_model.repos()] == [NEW] and app.store.read_model.count_revisions(NEW) == 3
    assert app.store.renames.current_name(OLD) == NEW and app.store.renames.old_names(NEW) == [OLD]


def test_after_the_move_the_watch_polls_the_new_name_without_announcing_a_restore(app: App, replay) -> None:
    """The next polls go to NEW itself: an unchanged head is one stamp (no `repo.restored`), a new commit is stored
    under NEW with its parent the last commit stored before."""
    _renamed(app, replay)
    replay.reset_requests()
    [outcome] = app.poller.poll()
    assert outcome.repo_id == NEW and outcome.status == "unchanged" and not outcome.state_changed
    assert replay.requests and all(OLD not in r.path for r in replay.requests)  # no 307 to pay any more
    replay.set_head(NEW, 4)
    [outcome] = app.poller.poll()
    assert outcome.status == "ingested" and [r.sha for r in outcome.revisions] == [replay.commits(NEW)[3].sha]
    assert "repo.restored" not in _kinds(app, NEW)
    assert app.store.history.list_revisions(NEW)[0].parent_sha == replay.commits(NEW)[2].sha


def test_a_rename_onto_a_name_hubwatch_holds_a_history_of_is_not_merged(app: App, replay) -> None:
    """When hubwatch already holds a history under the new name (here: NEW watched on its own), nothing moves: the
    watch stays under OLD, moved, following the redirect, its detail and poll line saying why."""
    from tracker.cli.output import outcome_text

    replay.set_head(OLD, 1)
    app.store.watches.add_watch(OLD, "main", 900)
    app.poller.poll()
    replay.rename(OLD, NEW)
    replay.set_head(NEW, 2)
    app.store.watches.add_watch(NEW, "main", 900)
    app.poller.poll([NEW])
    new_history = [r.sha for r in app.store.history.list_revisions(NEW)]
    [outcome] = app.poller.poll([OLD])
    assert outcome.status == "ingested" and outcome.repo_state == "moved" and outcome.history_moved_to is None
    assert "not merged" in outcome.move_refused
    assert [r.sha for r in app.store.history.list_revisions(NEW)] == new_history
    assert len(app.store.history.list_revisions(OLD)) == 2
    watch = app.store.watches.get_watch(OLD)
    assert watch.state_detail["moved_to"] == NEW and "not merged" in watch.state_detail["not_moved"]
    assert any(line.startswith(f"{OLD}@main: history not moved to {NEW}: ") for line in outcome_text(outcome))
    assert app.store.renames.current_name(OLD) is None


def test_a_new_repo_under_the_old_name_after_the_move_is_its_own_history(app: App, replay) -> None:
    """Once a new repo is created under OLD and watched, OLD answers with that repo's own history; the renamed
    repo's history stays under NEW, and the alias no longer applies."""
    from tracker.standins.replay.history import synthetic_history

    _renamed(app, replay)
    moved = [r.sha for r in app.store.history.list_revisions(NEW)]
    replay.add_repo(synthetic_history(OLD, commits=2))
    app.store.watches.add_watch(OLD, "main", 900)
    outcomes = {o.repo_id: o for o in app.poller.poll()}
    assert outcomes[OLD].status == "ingested" and outcomes[OLD].repo_state == "active"
    assert [r.sha for r in app.store.history.list_revisions(NEW)] == moved
    assert not set(moved) & {r.sha for r in app.store.history.list_revisions(OLD)}
    assert app.store.renames.current_name(OLD) is None


def test_the_old_name_redirects_feeds_api_and_pages_to_the_new_name(app: App, replay) -> None:
    """Feeds, API and pages asked under OLD answer a permanent redirect to the same URL under NEW (query kept), which
    serves the whole history; `/api/v1/events?repo=OLD` answers NEW's events; a name never watched is still a 404."""
    from tests.support.served import serve

    _renamed(app, replay)
    sha = replay.commits(NEW)[0].sha
    paths = [f"/repos/{OLD}/feed.atom?limit=5", f"/repos/{OLD}/feed.rss", f"/api/v1/repos/{OLD}/revisions",
             f"/api/v1/repos/{OLD}/revisions/{sha}", f"/repos/{OLD}", f"/repos/{OLD}/revisions/{sha}"]
    with serve(app.store) as served, served.client() as client:
        for path in paths:
            answer = client.get(path)
            assert answer.status_code == 301, path
            assert answer.headers["location"] == path.replace(OLD, NEW), path
            assert client.get(answer.headers["location"]).status_code == 200, path
        assert client.get(f"/api/v1/repos/{OLD}/revisions").json()["detail"].startswith(f"{OLD} was renamed to {NEW}")
        followed = client.get(f"/api/v1/repos/{OLD}/revisions", follow_redirects=True).json()
        assert followed["total"] == 3
        assert client.get("/repos/hubwatch-tests/never-watched").status_code == 404
        by_old = client.get("/api/v1/events", params={"repo": OLD}).json()["items"]
        assert by_old and by_old == client.get("/api/v1/events", params={"repo": NEW}).json()["items"]
        page = client.get(f"/repos/{NEW}").text
        assert f"renamed on the Hub from <code>{OLD}</code>" in page


def test_watch_list_names_where_a_watch_moved_from(app: App, replay) -> None:
    """`watch list`'s line of a moved watch says the name it had."""
    from tracker.cli.output import watch_text

    _renamed(app, replay)
    assert "; repo moved since " in watch_text(app.store.watches.get_watch(NEW))
    assert watch_text(app.store.watches.get_watch(NEW)).endswith(f"(from {OLD})")


def test_history_and_show_answer_under_the_old_name(app: App, replay, tmp_path) -> None:
    """`hubwatch history OLD`, `show OLD SHA`, `diff OLD A B`, `feed OLD` and `advisories OLD` read NEW's history,
    saying on stderr where it moved."""
    import json

    _renamed(app, replay)
    config = write_config(tmp_path / "hubwatch.toml", replay.endpoint, app.settings.database_url)
    result = run_cli("history", OLD, "--json", config=config)
    assert result.returncode == 0, result.stderr
    assert [r["sha"] for r in json.loads(result.stdout)] == [r.sha for r in app.store.history.list_revisions(NEW)]
    assert f"{OLD} was renamed to {NEW}" in result.stderr
    sha = replay.commits(NEW)[1].sha
    shown = run_cli("show", OLD, sha[:12], config=config)
    assert shown.returncode == 0 and sha[:12] in shown.stdout
    first = replay.commits(NEW)[0].sha
    diffed = run_cli("diff", OLD, first[:12], sha[:12], config=config)
    assert diffed.returncode == 0 and diffed.stdout.startswith(f"{NEW}: {first[:12]} -> {sha[:12]}")
    feed = run_cli("feed", OLD, config=config)
    assert feed.returncode == 0 and "repo renamed on the Hub" in feed.stdout
    advisories = run_cli("advisories", OLD, "--json", config=config)
    assert advisories.returncode == 0 and f"renamed to {NEW}" in advisories.stderr
    assert run_cli("history", "hubwatch-tests/never-watched", config=config).returncode == 3


def test_poll_lines_say_where_the_history_moved(app: App, replay) -> None:
    """`poll`'s lines of a followed rename name the new name and where the history went."""
    from tracker.cli.output import outcome_dict, outcome_text

    outcome = _renamed(app, replay, commits_after=1)
    lines = outcome_text(outcome)
    assert lines[0] == f"{OLD}@main: repo now moved to {NEW}: followed through the Hub's redirect"
    assert lines[1].startswith(f"{OLD}@main: history moved to {NEW}: watched under the new name")
    assert not any("restored" in line or "unchanged" in line for line in lines)
    assert outcome_dict(outcome)["history_moved_to"] == NEW


def test_a_config_file_watch_of_the_old_name_is_not_watched_again_after_the_move(app: App, replay) -> None:
    """A `[[watch]]` naming OLD in the config file does not bring back a watch of OLD once its watch and history
    moved to NEW (it would poll the redirect into a second history); other declared names are still added."""
    _renamed(app, replay)
    app.store.watches.sync_config_watches([(OLD, "main", 900), ("hubwatch-tests/every-kind", "main", 900)])
    assert [w.repo_id for w in app.store.watches.list_watches()] == ["hubwatch-tests/every-kind", NEW]


def test_subscriptions_made_through_the_api_that_name_the_old_name_name_the_new_one_too(app: App, replay) -> None:
    """An API subscription naming OLD exactly names NEW beside it after the move (so the repo's next events still
    reach it); one with a pattern, and the config file's, are left as written."""
    subs = app.store.subscriptions
    exact = subs.add_subscription("https://hooks.example.com/a", "slack", repos=[OLD])
    pattern = subs.add_subscription("https://hooks.example.com/b", "slack", repos=["hubwatch-tests/*"])
    configured = subs.add_subscription("https://hooks.example.com/c", "slack", repos=[OLD], source="config")
    _renamed(app, replay)
    repos = {s.id: s.repos for s in subs.list_subscriptions()}
    assert repos[exact.id] == [OLD, NEW]
    assert (repos[pattern.id], repos[configured.id]) == (["hubwatch-tests/*"], [OLD])


def test_poll_and_watch_remove_of_the_old_name_name_the_new_one(app: App, replay, tmp_path) -> None:
    """`poll OLD` and `watch remove OLD` after the move exit 3 saying the watch is under NEW now."""
    _renamed(app, replay)
    config = write_config(tmp_path / "hubwatch.toml", replay.endpoint, app.settings.database_url)
    for args in (("poll", OLD), ("watch", "remove", OLD)):
        result = run_cli(*args, config=config)
        assert result.returncode == 3 and f"renamed to {NEW} on the Hub and its watch moved there" in result.stderr, args
    assert app.store.watches.get_watch(NEW) is not None


def test_a_move_changes_the_watch_list_version_so_a_daemon_reschedules(app: App, replay) -> None:
    """The scheduler's cheap change check (the watch list's version) moves with a followed rename, so a running
    daemon drops the old name's job and schedules the new name's."""
    replay.set_head(OLD, 1)
    app.store.watches.add_watch(OLD, "main", 900)
    app.poller.poll()
    before = app.store.watches.watch_list_version()
    replay.rename(OLD, NEW)
    app.poller.poll()
    assert app.store.watches.watch_list_version() != before
    assert [(w.repo_id, w.branch) for w in app.store.watches.watch_schedule()] == [(NEW, "main")]


def test_a_second_rename_is_announced_and_moves_the_history_on_with_every_old_name(app: App, replay) -> None:
    """Renamed again (OLD -> NEW -> LAST): a second `repo.moved`, the history under LAST, and both earlier names
    answer with LAST."""
    last = "hubwatch-tests/renamed-again"
    _renamed(app, replay)
    replay.rename(NEW, last)
    [outcome] = app.poller.poll()
    assert outcome.history_moved_to == last and outcome.state_changed is False  # moved, and moved again
    assert _kinds(app, last).count("repo.moved") == 2 and len(app.store.history.list_revisions(last)) == 3
    assert app.store.watches.get_watch(last).state_detail["moved_from"] == NEW
    assert (app.store.renames.current_name(OLD), app.store.renames.current_name(NEW)) == (last, last)
    assert app.store.renames.old_names(last) == [OLD, NEW]
