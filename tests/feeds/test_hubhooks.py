"""Hub webhooks in: a good secret ingests the repo at once; forgeries, strangers and replays change nothing."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from tests.support.cli import write_config
from tests.support.replay import replay_server
from tests.support.served import HOOK_SECRET, Served, serve
from tests.support.settings import settings_for
from tests.support.waiting import read_log_until
from tracker.cli.app import App
from tracker.standins.replay.control import ReplayServer

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

BROKEN = "hubwatch-tests/broken-model"


def payload(repo_id: str, old: str | None, new: str, ref: str = "refs/heads/main", scope: str = "repo.content") -> dict[str, Any]:
    """A Hub webhook body as the Hub sends it (raw JSON, camelCase)."""
    return {
        "event": {"action": "update", "scope": scope},
        "repo": {"type": "model", "name": repo_id, "id": "65f0c0ffee", "private": False, "headSha": new,
                 "url": {"web": f"https://huggingface.co/{repo_id}", "api": f"https://huggingface.co/api/models/{repo_id}"},
                 "owner": {"id": "61a0c0ffee"}},
        "updatedRefs": [{"ref": ref, "oldSha": old, "newSha": new}],
        "webhook": {"id": "6601c0ffee", "version": 3},
    }


class Ingests:
    """The trigger: runs the real ingest in a thread, as the daemon would, and reports each outcome."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.calls: list[tuple[str, str | None]] = []
        self.heads: list[str | None] = []  # the head each trigger named
        self.outcomes: queue.Queue[Any] = queue.Queue()

    def __call__(self, repo_id: str, branch: str | None, head_sha: str | None = None) -> bool:
        self.calls.append((repo_id, branch))
        self.heads.append(head_sha)
        threading.Thread(target=lambda: self.outcomes.put(self.app.poller.poll_if_due(repo_id, branch or "main", head_sha))).start()
        return True


@pytest.fixture
def hooked(app: App, replay) -> Iterator[tuple[Served, Ingests]]:
    """broken-model watched and ingested at its first commit; the server's trigger ingests for real."""
    replay.set_head(BROKEN, 1)
    app.store.watches.add_watch(BROKEN, "main", 3600)
    app.poller.poll()
    ingests = Ingests(app)
    with serve(app.store, hub_webhook_secret=HOOK_SECRET, trigger=ingests) as served:
        yield served, ingests


@pytest.fixture(scope="module")
def refusing(module_database_url: str) -> Iterator[tuple[Served, Ingests, ReplayServer, App]]:
    """`hooked` once a module, for the webhooks that must change nothing (each case checks that it did not): the
    watch ingested at the first commit, the Hub's head already at the second."""
    with replay_server() as replay:
        app = App(settings_for(replay.endpoint, module_database_url))  # type: ignore[arg-type]
        try:
            replay.set_head(BROKEN, 1)
            app.store.watches.add_watch(BROKEN, "main", 3600)
            app.poller.poll()
            replay.set_head(BROKEN, 2)
            ingests = Ingests(app)
            with serve(app.store, hub_webhook_secret=HOOK_SECRET, trigger=ingests) as served:
                yield served, ingests, replay, app
        finally:
            app.store.engine.dispose()


def _post(served: Served, body: Any, secret: str | None = HOOK_SECRET) -> httpx.Response:
    headers = {"Content-Type": "application/json"} | ({"X-Webhook-Secret": secret} if secret is not None else {})
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    with served.client() as c:
        return c.post("/hooks/hub", content=content, headers=headers)


def test_good_secret_ingests_the_new_commit_at_once(hooked, replay, app: App) -> None:
    """A valid webhook for a watched repo triggers an ingest, and the pushed revision lands."""
    served, ingests = hooked
    old = replay.head_sha(BROKEN)
    replay.set_head(BROKEN, 2)
    new = replay.head_sha(BROKEN)
    response = _post(served, payload(BROKEN, old, new))
    assert response.status_code == 202, response.text
    assert response.json()["status"] == "triggered" and response.json()["branches"] == ["main"]
    outcome = ingests.outcomes.get(timeout=60)
    assert outcome.status == "ingested"
    assert app.store.history.has_revision(BROKEN, new)


def test_the_poll_is_asked_for_before_the_answer(app: App, replay) -> None:
    """The watch's poll is handed to the trigger before the 202 leaves: the poll need not wait for the answer,
    and a move the Hub is told was taken has been asked for."""
    replay.set_head(BROKEN, 1)
    app.store.watches.add_watch(BROKEN, "main", 3600)
    app.poller.poll()
    answered = threading.Event()
    asked: list[tuple[str, str | None, bool]] = []

    def trigger(repo_id: str, branch: str | None, head_sha: str | None = None) -> bool:
        asked.append((repo_id, branch, answered.is_set()))
        return True

    old = replay.head_sha(BROKEN)
    replay.set_head(BROKEN, 2)
    new = replay.head_sha(BROKEN)
    with capture_logs() as logs, serve(app.store, hub_webhook_secret=HOOK_SECRET, trigger=trigger) as served:
        response = _post(served, payload(BROKEN, old, new))
        answered.set()
        assert response.status_code == 202, response.text
        assert asked == [(BROKEN, "main", False)]
    [line] = [entry for entry in logs if entry["event"] == "hub_webhook_accepted"]  # the path's first stamp
    assert (line["repo_id"], line["sha"]) == (BROKEN, new) and line["triggered_ms"] >= 0
    assert datetime.fromisoformat(line["received_at"]).tzinfo is not None


def test_replayed_payload_is_a_no_op(hooked, replay, app: App) -> None:
    """The same webhook again, once its commit is stored, triggers nothing and stores nothing twice."""
    served, ingests = hooked
    old = replay.head_sha(BROKEN)
    replay.set_head(BROKEN, 2)
    body = payload(BROKEN, old, replay.head_sha(BROKEN))
    assert _post(served, body).status_code == 202
    ingests.outcomes.get(timeout=60)
    before = [r.sha for r in app.store.history.list_revisions(BROKEN)]
    replayed = _post(served, body)
    assert replayed.status_code == 200 and replayed.json()["status"] == "ignored"
    assert "already ingested" in replayed.json()["detail"]
    assert len(ingests.calls) == 1
    assert [r.sha for r in app.store.history.list_revisions(BROKEN)] == before


@pytest.mark.parametrize(
    ("case", "status"),
    [
        ("forged secret", 401),
        ("missing secret", 401),
        ("unknown repo", 404),
        ("not JSON", 400),
        ("no repo", 400),
        ("bad refs", 400),
        ("other branch", 200),
        ("discussion", 200),
    ],
)
def test_refused_webhooks_have_no_side_effects(refusing, case: str, status: int) -> None:
    """Forged or missing secrets, strangers' repos, malformed bodies, unwatched branches and other scopes trigger nothing."""
    served, ingests, replay, app = refusing
    old = replay.commits(BROKEN)[0].sha
    new = replay.head_sha(BROKEN)
    good = payload(BROKEN, old, new)
    body, secret = {
        "forged secret": (good, "hub-secret-for-test"),
        "missing secret": (good, None),
        "unknown repo": (payload("someone/else", None, new), HOOK_SECRET),
        "not JSON": (b"<xml/>", HOOK_SECRET),
        "no repo": ({"event": {"scope": "repo.content"}}, HOOK_SECRET),
        "bad refs": ({**good, "updatedRefs": "main"}, HOOK_SECRET),
        "other branch": (payload(BROKEN, old, new, ref="refs/heads/dev"), HOOK_SECRET),
        "discussion": (payload(BROKEN, old, new, scope="discussion.comment"), HOOK_SECRET),
    }[case]
    watch_before = app.store.watches.get_watch(BROKEN)
    response = _post(served, body, secret)
    assert response.status_code == status, response.text
    assert response.json()["status"] in ("refused", "ignored")
    assert ingests.calls == []
    assert not app.store.history.has_revision(BROKEN, new)
    assert app.store.watches.get_watch(BROKEN) == watch_before


def test_webhooks_are_refused_until_a_secret_is_configured(app: App) -> None:
    """Without [server] hub_webhook_secret_env's variable, /hooks/hub answers 403 naming that setting and triggers nothing."""
    calls: list[Any] = []
    with serve(app.store, trigger=lambda *a: calls.append(a) or True) as served:
        response = _post(served, payload(BROKEN, None, "0" * 40), secret="")
    assert response.status_code == 403 and "hub_webhook_secret_env" in response.json()["detail"]
    assert calls == []


def test_run_serves_http_and_ingests_on_a_hub_webhook(replay, tmp_path: Path) -> None:
    """`hubwatch run` serves on its port, a Hub webhook makes it ingest the pushed commit, and SIGTERM stops both."""
    replay.set_head(BROKEN, 1)
    config = write_config(tmp_path / "hubwatch.toml", replay.endpoint, tmp_path / "hubwatch.db",
                          extra='\n[server]\nport = 0\n\n[[watch]]\nrepo = "hubwatch-tests/broken-model"\ninterval = "1h"\n')
    env = {**os.environ, "HUBWATCH_HUB_WEBHOOK_SECRET": HOOK_SECRET}
    proc = subprocess.Popen([sys.executable, "-m", "tracker", "--config", str(config), "run"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = read_log_until(proc, "http_server_started")[-1]["url"]
        first = replay.head_sha(BROKEN)
        read_log_until(proc, '"repo_polled"')
        replay.set_head(BROKEN, 2)
        second = replay.head_sha(BROKEN)
        response = httpx.post(f"{url}/hooks/hub", json=payload(BROKEN, first, second), headers={"X-Webhook-Secret": HOOK_SECRET})
        assert response.status_code == 202, response.text
        stored = read_log_until(proc, '"revision_stored"')[-1]
        assert stored["sha"] == second
        feed = httpx.get(f"{url}/repos/{BROKEN}/feed.atom")
        assert feed.status_code == 200 and second[:12].encode() in feed.content
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=30)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, rest[-2000:]
    assert "http_server_stopped" in rest and "scheduler_stopped" in rest


def test_serve_answers_a_burst_of_hub_webhooks_with_one_ingest(replay, tmp_path: Path) -> None:
    """`hubwatch serve`: 50 identical Hub webhooks for one moved repo at once are all accepted and cost one
    poll (two at most: one queued behind the poll under way), not one each. A webhook for another repo sent
    after them is polled after every poll they queued (one ingest thread), so its log line says they are done."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.support.cli import run_cli

    burst, sentinel = "hubwatch-tests/every-kind", BROKEN
    for repo_id in (burst, sentinel):
        replay.set_head(repo_id, 1)
    config = write_config(tmp_path / "hubwatch.toml", replay.endpoint, tmp_path / "hubwatch.db", extra=(
        '\n[server]\nport = 0\n'
        + "".join(f'\n[[watch]]\nrepo = "{r}"\ninterval = "1h"\n' for r in (burst, sentinel))))
    assert run_cli("poll", config=config).returncode == 0  # the baselines
    moves = {}
    for repo_id in (burst, sentinel):
        first = replay.head_sha(repo_id)
        replay.advance(repo_id)
        moves[repo_id] = payload(repo_id, first, replay.head_sha(repo_id))
    replay.reset_requests()
    env = {**os.environ, "HUBWATCH_HUB_WEBHOOK_SECRET": HOOK_SECRET}
    proc = subprocess.Popen([sys.executable, "-m", "tracker", "--config", str(config), "serve"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = read_log_until(proc, "http_server_started")[-1]["url"]

        def post(repo_id: str) -> int:
            return httpx.post(f"{url}/hooks/hub", json=moves[repo_id], headers={"X-Webhook-Secret": HOOK_SECRET},
                              timeout=30).status_code

        with ThreadPoolExecutor(16) as pool:
            codes = list(pool.map(post, [burst] * 50))
        assert set(codes) <= {202, 200} and codes.count(202) >= 1  # 200: the commit was stored by then
        assert post(sentinel) == 202
        seen: list[dict] = []
        while not any(e.get("event") == "repo_polled" and e.get("repo_id") == sentinel for e in seen):
            seen += read_log_until(proc, '"repo_polled"')
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    polls = [e for e in seen if e.get("event") == "repo_polled" and e.get("repo_id") == burst]
    assert 1 <= len(polls) <= 2, polls
    assert sum(e["revisions"] for e in polls) == 1
    head_checks = [r for r in replay.requests if r.path == f"/api/models/{burst}/revision/main"]
    assert 1 <= len(head_checks) <= 2


def test_the_poll_is_handed_the_branch_new_sha_and_asks_the_hub_for_no_head(hooked, replay, app: App) -> None:
    """The ref's `newSha` goes to the poll with the trigger; the poll stores the commit without a head request."""
    served, ingests = hooked
    old = replay.head_sha(BROKEN)
    replay.set_head(BROKEN, 2)
    new = replay.head_sha(BROKEN)
    replay.reset_requests()
    assert _post(served, payload(BROKEN, old, new)).status_code == 202
    assert ingests.outcomes.get(timeout=60).status == "ingested"
    assert ingests.heads == [new] and app.store.history.has_revision(BROKEN, new)
    assert not [r for r in replay.requests if r.path.startswith(f"/api/models/{BROKEN}/revision/")]


@pytest.mark.parametrize("sha", ["F" * 40, "abc123", 42])
def test_a_sha_that_is_not_a_commit_id_is_not_handed_to_the_poll(hooked, replay, app: App, sha: object) -> None:
    """A `newSha` that is not 40 lowercase hex digits is dropped: the poll asks the Hub for the head."""
    served, ingests = hooked
    old = replay.head_sha(BROKEN)
    replay.set_head(BROKEN, 2)
    body = payload(BROKEN, old, replay.head_sha(BROKEN))
    body["updatedRefs"][0]["newSha"] = sha
    assert _post(served, body).status_code == 202
    assert ingests.outcomes.get(timeout=60).status == "ingested"
    assert ingests.heads == [None] and app.store.history.has_revision(BROKEN, replay.head_sha(BROKEN))


def test_a_payload_naming_no_ref_hands_the_poll_no_sha(hooked, replay, app: App) -> None:
    """With no `updatedRefs`, `repo.headSha` is the default branch's head, not necessarily the watched branch's:
    the poll asks the Hub for the head instead of taking it."""
    served, ingests = hooked
    old = replay.head_sha(BROKEN)
    replay.set_head(BROKEN, 2)
    new = replay.head_sha(BROKEN)
    body = payload(BROKEN, old, new)
    del body["updatedRefs"]
    replay.reset_requests()
    assert _post(served, body).status_code == 202
    assert ingests.outcomes.get(timeout=60).status == "ingested"
    assert ingests.heads == [None] and app.store.history.has_revision(BROKEN, new)
    assert [r for r in replay.requests if r.path.startswith(f"/api/models/{BROKEN}/revision/")]


def test_a_move_webhook_polls_the_watch_which_records_the_rename(hooked, replay, app: App) -> None:
    """A Hub webhook `action: "move"` with `movedTo` for a watched repo triggers its poll; following the Hub's 307,
    the poll records the watch `moved` to the new name with one `repo.moved` event, and the watch and its history
    are under the new name from then on."""
    served, ingests = hooked
    new = "hubwatch-tests/renamed-model"
    replay.rename(BROKEN, new)
    body = payload(BROKEN, None, replay.head_sha(new), scope="repo")
    body["event"]["action"] = "move"
    body["movedTo"] = {"name": new, "owner": "61a0c0ffee"}
    del body["updatedRefs"]
    response = _post(served, body)
    assert response.status_code == 202, response.text
    outcome = ingests.outcomes.get(timeout=60)
    assert outcome.repo_state == "moved" and outcome.state_changed
    assert outcome.history_moved_to == new and app.store.watches.get_watch(BROKEN) is None
    watch = app.store.watches.get_watch(new)
    assert (watch.state_detail["moved_to"], watch.state_detail["moved_from"]) == (new, BROKEN)
    assert [e.kind for e in app.store.history.list_events(new)][0] == "repo.moved"
