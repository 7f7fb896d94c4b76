"""A Hub webhook's head in place of the head request (Ingestor.poll `head_sha`): taken only when the walk
from it leads straight back to the watch's last commit; anything else (an unknown sha, an older commit, a
rewritten branch) makes an ordinary poll, and history comes out as it would have without the webhook."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from tracker.cli.app import App

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

BROKEN = "hubwatch-tests/broken-model"
REWRITTEN = "hubwatch-tests/rewritten-model"


def _baseline(app: App, replay, repo_id: str, n: int, backfill: int = 0) -> None:
    replay.set_head(repo_id, n)
    app.store.watches.add_watch(repo_id, "main", 900, backfill=backfill)
    [outcome] = app.poller.poll([repo_id])
    assert outcome.status == "ingested"


def _head_requests(replay, repo_id: str) -> int:
    return sum(r.path.startswith(f"/api/models/{repo_id}/revision/") for r in replay.requests)


def _shas(app: App, repo_id: str) -> list[str]:
    return [r.sha for r in reversed(app.store.history.list_revisions(repo_id))]


def test_a_webhook_head_that_moves_the_watch_forward_costs_no_head_request(app: App, replay) -> None:
    """The webhook's sha, one commit past the last stored: ingested without asking the Hub for the head."""
    _baseline(app, replay, BROKEN, 1)
    replay.set_head(BROKEN, 2)
    new = replay.head_sha(BROKEN)
    replay.reset_requests()
    outcome = app.poller.poll_if_due(BROKEN, "main", new)
    assert outcome is not None and outcome.status == "ingested" and [r.sha for r in outcome.revisions] == [new]
    assert _head_requests(replay, BROKEN) == 0
    watch = app.store.watches.get_watch(BROKEN)
    assert watch.last_sha == new and watch.last_error is None
    # the visibility and identity last seen, carried on
    assert watch.repo_meta == {"private": False, "gated": False, "uid": replay.commits(BROKEN)[0].sha[:24]}


def test_every_commit_up_to_the_webhook_head_is_ingested_oldest_first(app: App, replay) -> None:
    """A webhook naming a head two commits on: both commits are stored, in order, none skipped."""
    _baseline(app, replay, BROKEN, 1)
    replay.set_head(BROKEN, 3)
    outcome = app.poller.poll_if_due(BROKEN, "main", replay.head_sha(BROKEN))
    assert outcome is not None and [r.sha for r in outcome.revisions] == [c.sha for c in replay.commits(BROKEN)[1:3]]
    assert _shas(app, BROKEN) == [c.sha for c in replay.commits(BROKEN)[:3]]


def test_an_unknown_sha_falls_back_to_the_head_request(app: App, replay) -> None:
    """A sha the Hub does not know (forged, or from elsewhere): one log line, then an ordinary poll that
    ingests the real head; no error is recorded on the watch."""
    _baseline(app, replay, BROKEN, 1)
    replay.set_head(BROKEN, 2)
    replay.reset_requests()
    with capture_logs() as logs:
        outcome = app.poller.poll_if_due(BROKEN, "main", "f" * 40)
    assert outcome is not None and [r.sha for r in outcome.revisions] == [replay.head_sha(BROKEN)]
    assert _head_requests(replay, BROKEN) == 1
    [line] = [e for e in logs if e["event"] == "head_hint_unverified"]
    assert line["sha"] == "f" * 40 and "revision not found" in line["reason"]
    assert app.store.watches.get_watch(BROKEN).last_error is None


def test_an_older_commit_than_the_last_stored_changes_nothing(app: App, replay) -> None:
    """An out-of-order webhook naming a commit before the last stored one (here not stored itself): the
    walk from it never meets the last commit, so the Hub is asked; the head has not moved: nothing is
    written, no rewrite is claimed."""
    _baseline(app, replay, BROKEN, 3)
    older = replay.commits(BROKEN)[0].sha
    with capture_logs() as logs:
        outcome = app.poller.poll_if_due(BROKEN, "main", older)
    assert outcome is not None and outcome.status == "unchanged" and outcome.revisions == []
    assert any(e["event"] == "head_hint_unverified" and e["sha"] == older for e in logs)
    assert _shas(app, BROKEN) == [replay.head_sha(BROKEN)]
    assert app.store.watches.get_watch(BROKEN).last_sha == replay.head_sha(BROKEN)


def test_a_rewritten_branch_head_is_recorded_as_the_ordinary_poll_records_it(app: App, replay) -> None:
    """A force-push's new head, named by the webhook, does not lead back to the last commit: the ordinary
    poll runs and records the rewrite, with the dropped commit named, exactly as without the webhook."""
    first, dropped, new = (c.sha for c in replay.commits(REWRITTEN))
    _baseline(app, replay, REWRITTEN, 2, backfill=1)
    replay.set_head(REWRITTEN, 3)
    outcome = app.poller.poll_if_due(REWRITTEN, "main", new)
    assert outcome is not None and [r.sha for r in outcome.revisions] == [new]
    revision = app.store.history.find_revision(REWRITTEN, new)
    changes = app.store.history.changes_by_revision([revision.id])[revision.id]
    assert [c.detail["dropped"] for c in changes if c.kind == "repo"] == [[dropped]]
    assert revision.parent_sha == dropped and _shas(app, REWRITTEN) == [first, dropped, new]


def test_a_webhook_head_on_a_first_poll_is_not_used(app: App, replay) -> None:
    """A watch never polled takes its baseline from the Hub's own head (the webhook's sha is not trusted
    for the first revision, whose visibility is unknown)."""
    replay.set_head(BROKEN, 2)
    app.store.watches.add_watch(BROKEN, "main", 900)
    replay.reset_requests()
    outcome = app.poller.poll_if_due(BROKEN, "main", replay.commits(BROKEN)[0].sha)
    assert outcome is not None and [r.sha for r in outcome.revisions] == [replay.head_sha(BROKEN)]
    assert _head_requests(replay, BROKEN) == 1
