"""The ingest pipeline against the Hub replay server, with the real huggingface_hub client."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from tests.support.replay import replay_server
from tests.support.settings import settings_for
from tracker.cli.app import App

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

BROKEN = "hubwatch-tests/broken-model"
REWRITTEN = "hubwatch-tests/rewritten-model"


def _watch(app: App, repo_id: str, backfill: int = 0):
    app.store.watches.add_watch(repo_id, "main", 900, backfill=backfill)
    return app.store.watches.get_watch(repo_id)


def _shas(app: App, repo_id: str) -> list[str]:
    """Stored revisions, oldest first."""
    return [r.sha for r in reversed(app.store.history.list_revisions(repo_id))]


def _changes(app: App, repo_id: str, sha: str) -> list:
    revision = app.store.history.find_revision(repo_id, sha)
    return app.store.history.changes_by_revision([revision.id])[revision.id]


def test_first_poll_stores_the_head_as_baseline(app: App, replay) -> None:
    """A new watch's first poll stores only the head, as a baseline with a summary change."""
    replay.set_head(BROKEN, 3)
    _watch(app, BROKEN)
    [outcome] = app.poller.poll()
    assert outcome.status == "ingested"
    assert _shas(app, BROKEN) == [replay.head_sha(BROKEN)]
    changes = _changes(app, BROKEN, replay.head_sha(BROKEN))
    assert [c.kind for c in changes] == ["repo", "estimate", "lint"]
    assert changes[0].summary.startswith("baseline: ")
    assert changes[1].summary.startswith("estimate: 39,383,808 parameters; full fine-tune at batch 1 needs ")
    assert changes[2].summary.startswith("verify: +config-invalid (critical): config.json cannot be read: ")
    assert app.store.history.find_revision(BROKEN, replay.head_sha(BROKEN)).is_baseline


def test_backfill_ingests_earlier_commits_oldest_first(app: App, replay) -> None:
    """--backfill N ingests the N commits before the head too, the oldest as baseline."""
    replay.set_head(BROKEN, 3)
    _watch(app, BROKEN)
    app.poller.poll(backfill=2)
    commits = [c.sha for c in replay.commits(BROKEN)[:3]]
    assert _shas(app, BROKEN) == commits
    assert app.store.history.find_revision(BROKEN, commits[0]).is_baseline
    assert not app.store.history.find_revision(BROKEN, commits[1]).is_baseline


def test_unchanged_repo_costs_exactly_one_request(app: App, replay) -> None:
    """Polling a repo whose head did not move makes one HTTP request and stores nothing."""
    replay.set_head(BROKEN, 1)
    _watch(app, BROKEN)
    app.poller.poll()
    replay.reset_requests()
    [outcome] = app.poller.poll()
    assert outcome.status == "unchanged"
    assert replay.count_requests() == 1
    assert len(_shas(app, BROKEN)) == 1


def test_every_intermediate_commit_is_ingested_in_order(app: App, replay) -> None:
    """When the head moves by several commits, each one is ingested, oldest first, none skipped."""
    replay.set_head(BROKEN, 1)
    _watch(app, BROKEN)
    app.poller.poll()
    replay.set_head(BROKEN, 4)
    [outcome] = app.poller.poll()
    expected = [c.sha for c in replay.commits(BROKEN)[:4]]
    assert [r.sha for r in outcome.revisions] == expected[1:]
    assert _shas(app, BROKEN) == expected
    revisions = {r.sha: r for r in app.store.history.list_revisions(BROKEN)}
    assert [revisions[s].parent_sha for s in expected[1:]] == expected[:-1]


# [poll] chat_template_timeout_s: the looping template's renders stop here, not at 2 s each (0.3 s in
# tests/tracker/differs/test_template_engines.py; each of its six Node renders costs this plus the 0.5 s kill grace)
RENDER_TIME_S = 0.25


@pytest.fixture
def quick_renders(replay, database_url: str) -> Iterator[App]:
    """An App (as the `app` fixture) whose chat template renders each stop after RENDER_TIME_S."""
    from tests.support.databases import premigrated

    app = App(settings_for(replay.endpoint, premigrated(database_url), poll={"chat_template_timeout_s": RENDER_TIME_S}))  # type: ignore[arg-type]
    yield app
    app.store.engine.dispose()


def _ingest_broken(app: App, replay, baseline: int, head: int) -> dict[str, str]:
    """The broken model watched from commit `baseline` (its baseline), then polled with commits up to `head` revealed:
    the poll succeeds and leaves no error on the watch; its commits' shas by title."""
    replay.set_head(BROKEN, baseline)
    _watch(app, BROKEN)
    app.poller.poll()
    replay.set_head(BROKEN, head)
    [outcome] = app.poller.poll()
    assert outcome.status == "ingested", outcome.error
    assert [r.sha for r in outcome.revisions] == [c.sha for c in replay.commits(BROKEN)[baseline:head]]
    assert app.store.watches.get_watch(BROKEN).last_error is None
    return {c.dirname: c.sha for c in replay.commits(BROKEN)}


def _text(app: App, sha: str) -> str:
    return "\n".join(f"{c.kind} {c.severity} {c.summary} {c.detail}" for c in _changes(app, BROKEN, sha))


# The broken model's history in two tests, each one kind of bad input: one test of all eight commits took 8.6-9.8 s,
# most of it the looping template's renders, whose Node worker is killed and started again for each of its samples.
def test_bad_files_are_recorded_on_changes_and_the_poll_succeeds(app: App, replay) -> None:
    """Malformed JSON, a 300 MB file, broken headers and a truncated shard are each recorded on their revision's changes."""
    by_title = _ingest_broken(app, replay, baseline=1, head=5)
    assert "not valid JSON" in _text(app, by_title["0002-malformed-config"])
    assert "over the 64.0 MiB limit" in _text(app, by_title["0003-huge-tokenizer"])
    assert "header" in _text(app, by_title["0004-header-claims-10gb"]).lower()
    assert "model-00002-of-00002.safetensors" in _text(app, by_title["0005-truncated-shard"])


def test_hostile_templates_and_a_missing_file_are_recorded_and_the_poll_succeeds(quick_renders: App, replay) -> None:
    """Hostile templates and a 404 file, ingested after a baseline at the truncated shard, are each recorded; the
    looping template is stopped at the configured render time limit."""
    app = quick_renders
    by_title = _ingest_broken(app, replay, baseline=5, head=len(replay.commits(BROKEN)))
    looping = _text(app, by_title["0006-looping-template"])
    assert "chat_template" in looping and f"exceeded the time limit ({RENDER_TIME_S:g} s)" in looping
    escape = [c for c in _changes(app, BROKEN, by_title["0007-template-escape"]) if c.kind == "chat_template"]
    assert escape and any(c.security and c.severity == "critical" for c in escape)
    assert "404" in _text(app, by_title["0008-listed-but-missing"])
    history = app.store.history
    files = {f.path: f for f in history.revision_files(history.find_revision(BROKEN, by_title["0008-listed-but-missing"]).id)}
    assert not files["generation_config.json"].held and "404" in files["generation_config.json"].note
    assert not files["tokenizer.json"].held and "limit" in files["tokenizer.json"].note


def test_server_error_mid_ingest_writes_nothing_of_that_revision(app: App, replay) -> None:
    """A 5xx while fetching a commit aborts that revision whole, is recorded, and the next poll retries."""
    replay.set_head(BROKEN, 1)
    _watch(app, BROKEN)
    app.poller.poll()
    replay.set_head(BROKEN, 3)
    second = replay.commits(BROKEN)[1].sha
    replay.inject(500, path=f"/resolve/{second}/config.json$", method="GET", times=100)
    [outcome] = app.poller.poll()
    assert outcome.failed and "500" in outcome.error
    assert _shas(app, BROKEN) == [replay.commits(BROKEN)[0].sha]
    watch = app.store.watches.get_watch(BROKEN)
    assert watch.last_error and "500" in watch.last_error and watch.error_count == 1
    assert watch.last_sha == replay.commits(BROKEN)[0].sha
    assert watch.next_retry_at is not None
    replay.clear_faults()
    [outcome] = app.poller.poll()
    assert outcome.status == "ingested"
    assert _shas(app, BROKEN) == [c.sha for c in replay.commits(BROKEN)[:3]]
    assert app.store.watches.get_watch(BROKEN).last_error is None


def test_rate_limit_mid_ingest_defers_the_retry(app: App, replay) -> None:
    """A 429 while reading a safetensors header fails the poll, keeps earlier revisions, and backs off."""
    replay.set_head(BROKEN, 1)
    _watch(app, BROKEN)
    app.poller.poll()
    replay.set_head(BROKEN, 4)
    fourth = replay.commits(BROKEN)[3].sha
    replay.inject(429, path=f"/resolve/{fourth}/model.safetensors$", times=100,
                  headers={"RateLimit": '"api";r=0;t=120'})
    [outcome] = app.poller.poll()
    assert outcome.failed and "rate limited" in outcome.error
    assert _shas(app, BROKEN) == [c.sha for c in replay.commits(BROKEN)[:3]]
    watch = app.store.watches.get_watch(BROKEN)
    assert watch.next_retry_at - watch.last_polled_at >= timedelta(seconds=120)
    assert app.poller.poll_if_due(BROKEN, "main") is None  # backing off
    replay.clear_faults()
    [outcome] = app.poller.poll()
    assert outcome.status == "ingested"


def test_an_unknown_repo_fails_clearly(app: App) -> None:
    """An unknown repo fails its poll with a plain reason recorded on the watch."""
    _watch(app, "hubwatch-tests/no-such-model")
    [outcome] = app.poller.poll()
    assert outcome.failed and "does not exist" in outcome.error
    assert "does not exist" in app.store.watches.get_watch("hubwatch-tests/no-such-model").last_error
    assert app.store.history.list_revisions("hubwatch-tests/no-such-model") == []


def test_a_gated_repo_is_stored_from_what_stays_readable(app: App) -> None:
    """A gated repo without access: its baseline is stored from the file list, the refused file noted, the watch
    gated (tests/tracker/test_ingest_gated.py follows it further)."""
    _watch(app, "hubwatch-tests/gated-model")
    [outcome] = app.poller.poll()
    assert outcome.status == "ingested" and outcome.repo_state == "gated" and outcome.unread == ["config.json"]
    [revision] = app.store.history.list_revisions("hubwatch-tests/gated-model")
    [config] = app.store.history.revision_files(revision.id)
    assert (config.path, config.held) == ("config.json", False) and config.note.startswith("gated (manual): not read")


def test_force_push_is_recorded_as_a_history_rewrite(app: App, replay) -> None:
    """A force-push dropping a commit already seen is recorded as a rewrite, diffed against what was seen."""
    first, dropped, new = (c.sha for c in replay.commits(REWRITTEN))
    replay.set_head(REWRITTEN, 2)
    _watch(app, REWRITTEN)
    app.poller.poll(backfill=1)
    assert _shas(app, REWRITTEN) == [first, dropped]
    replay.set_head(REWRITTEN, 3)
    [outcome] = app.poller.poll()
    assert [r.sha for r in outcome.revisions] == [new]
    changes = _changes(app, REWRITTEN, new)
    rewrite = [c for c in changes if c.kind == "repo"]
    assert rewrite and rewrite[0].detail["dropped"] == [dropped]
    assert "history rewritten" in outcome.revisions[0].event_title
    assert app.store.history.find_revision(REWRITTEN, new).parent_sha == dropped
    # Against what was seen (12 layers), the new head has 6 again: the config change is reported.
    assert any(c.kind == "config" for c in changes)


EVERY_KIND = "hubwatch-tests/every-kind"


@pytest.fixture(scope="module")
def every_kind(module_database_url: str) -> Iterator[dict[str, list]]:
    """The every-kind history ingested once for the module (baseline, then heads 7 and 8), only read: each
    commit's changes by its dirname."""
    with replay_server() as replay:
        app = App(settings_for(replay.endpoint, module_database_url))  # type: ignore[arg-type]
        try:
            _watch(app, EVERY_KIND)
            for head in (1, 7, 8):
                replay.set_head(EVERY_KIND, head)
                assert not any(o.failed for o in app.poller.poll())
            yield {c.dirname: _changes(app, EVERY_KIND, c.sha) for c in replay.commits(EVERY_KIND)}
        finally:
            app.store.engine.dispose()


@pytest.mark.parametrize(
    ("dirname", "kind", "severity", "flag"),
    [
        ("0002-longer-context", "config", "warning", "structural"),
        ("0003-new-special-token", "tokenizer", "warning", "security"),
        ("0004-chat-template", "chat_template", "warning", None),
        ("0005-pickle-weights", "weights", "warning", "security"),  # not a real pickle: could not be checked
        ("0006-custom-code", "custom_code", "critical", "security"),
        ("0006-custom-code", "config", "critical", "security"),
        ("0007-license", "files", "info", None),
        ("0008-force-push", "repo", "warning", "security"),
        ("0008-force-push", "files", "warning", None),
    ],
)
def test_one_history_produces_every_change_kind(every_kind: dict[str, list], dirname, kind, severity, flag) -> None:
    """Replaying the every-kind history yields each change kind with the expected severity and flags."""
    matching = [c for c in every_kind[dirname] if c.kind == kind]
    assert matching, f"no {kind} change in {dirname}"
    top = max(matching, key=lambda c: ["info", "notice", "warning", "critical"].index(c.severity))
    assert top.severity == severity, [c.summary for c in matching]
    if flag:
        assert any(getattr(c, flag) for c in matching)


def test_gating_toggled_without_a_commit_becomes_an_event(app: App, replay) -> None:
    """A repo that becomes gated while its head stays put yields one repo event, not a revision."""
    replay.set_head(BROKEN, 1)
    _watch(app, BROKEN)
    app.poller.poll()
    replay.repo(BROKEN).gated = "manual"
    [outcome] = app.poller.poll()
    assert outcome.status == "unchanged"
    events = [e for e in app.store.history.list_events(BROKEN) if e.kind == "repo.visibility_changed"]
    assert len(events) == 1 and "gated" in events[0].title and "'manual'" in events[0].title
    app.poller.poll()
    assert len([e for e in app.store.history.list_events(BROKEN) if e.kind == "repo.visibility_changed"]) == 1
    assert len(app.store.history.list_revisions(BROKEN)) == 1


def test_a_visibility_change_seen_again_is_the_same_event(app: App, replay) -> None:
    """The same visibility transition at the same head has one event id, whenever it is seen: seen again
    (the watch's meta lost, as a crash before its update once did), it is not announced twice."""
    replay.set_head(BROKEN, 1)
    watch = _watch(app, BROKEN)
    app.poller.poll()
    before = app.store.watches.get_watch(BROKEN).repo_meta
    replay.repo(BROKEN).gated = "auto"
    app.poller.poll()
    app.store.watches.move_watch(watch.id, replay.head_sha(BROKEN), before)  # the meta as it was before the transition
    app.poller.poll()
    events = [e for e in app.store.history.list_events(BROKEN) if e.kind == "repo.visibility_changed"]
    assert len(events) == 1
    assert app.store.watches.get_watch(BROKEN).repo_meta["gated"] == "auto"
