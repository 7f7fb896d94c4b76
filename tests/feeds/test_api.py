"""The JSON API over real HTTP: history, diffs, events by cursor, writes behind the bearer token."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.cli import run_cli, write_config
from tests.support.served import API_TOKEN, HOSTILE, LLAMA, History, Served, serve

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

AUTH = {"Authorization": f"Bearer {API_TOKEN}"}


@pytest.fixture
def writable(history: History, tmp_path: Path) -> Iterator[Served]:
    """A server over a private copy of the history that accepts writes with API_TOKEN."""
    with serve(history.copy_to(tmp_path).store(), api_token=API_TOKEN, allow_private_targets=True) as server:
        yield server


def _all_revisions(client: httpx.Client, repo_id: str, limit: int) -> list[dict]:
    items, offset = [], 0
    while offset is not None:
        page = client.get(f"/api/v1/repos/{repo_id}/revisions", params={"limit": limit, "offset": offset}).json()
        items += page["items"]
        offset = page["next_offset"]
    return items


def test_revisions_are_paginated_newest_first(client: httpx.Client, served: Served) -> None:
    """Pages of revisions add up to the stored history, newest first, each with its change summaries."""
    stored = [r.sha for r in served.store.history.list_revisions(LLAMA)]
    first = client.get(f"/api/v1/repos/{LLAMA}/revisions", params={"limit": 3}).json()
    assert first["total"] == len(stored) and first["next_offset"] == 3 and len(first["items"]) == 3
    assert [r["sha"] for r in _all_revisions(client, LLAMA, 3)] == stored
    assert all(r["changes"] and "detail" not in r["changes"][0] for r in first["items"])


def test_one_revision_has_its_changes_files_and_estimate(client: httpx.Client, served: Served) -> None:
    """One revision (by a short sha) comes with full change detail, its files and its estimate slot."""
    revision = served.store.history.list_revisions(LLAMA)[-2]  # the upload of config, tokenizer and template
    body = client.get(f"/api/v1/repos/{LLAMA}/revisions/{revision.sha[:10]}").json()
    assert body["sha"] == revision.sha
    assert body["purl"] == f"pkg:huggingface/{LLAMA}@{revision.sha}"  # the revision's package URL
    kinds = {c["kind"] for c in body["changes"]}
    assert {"config", "chat_template"} <= kinds
    assert any(c["detail"] for c in body["changes"])
    assert {f["path"] for f in body["files"]} >= {"config.json", "tokenizer_config.json"}
    assert "estimate" in body


def test_a_revision_s_findings_are_computed_once(history: History) -> None:
    """A stored revision never changes: the verifier runs once for it however often it is asked for."""
    from feeds.http.app import create_app

    calls = []
    store = history.store()
    app = create_app(store, verify=lambda revision: calls.append(revision.sha) or [{"id": "x"}])
    revision = store.history.list_revisions(LLAMA)[0]
    services = app.state.services
    assert services.revision_lints(revision) == services.revision_lints(revision) == [{"id": "x"}]
    assert calls == [revision.sha]
    assert create_app(store).state.services.revision_lints(revision) is None  # no verifier wired in
    store.engine.dispose()


def test_a_revision_carries_the_verifier_findings(client: httpx.Client, served: Served) -> None:
    """`lints` lists the verifier's findings with evidence and fix: Llama 3.1's rope type against its 4.42.3."""
    revision = served.store.history.list_revisions(LLAMA)[0]
    body = client.get(f"/api/v1/repos/{LLAMA}/revisions/{revision.sha}").json()
    [finding] = body["lints"]
    assert finding["id"] == "rope-scaling-version" and finding["severity"] == "critical"
    assert finding["evidence"]["since"] == "4.43.0" and finding["fix"]
    first = served.store.history.list_revisions(LLAMA)[-1]  # "initial commit": no config.json
    assert client.get(f"/api/v1/repos/{LLAMA}/revisions/{first.sha}").json()["lints"] is None


def test_diff_between_two_revisions_matches_the_cli(client: httpx.Client, history: History, tmp_path: Path) -> None:
    """GET .../diff?from=A&to=B answers what `hubwatch diff --json` prints for the same revisions."""
    shas = [r["sha"] for r in _all_revisions(client, LLAMA, 100)]
    oldest, newest = shas[-1], shas[0]
    answer = client.get(f"/api/v1/repos/{LLAMA}/diff", params={"from": oldest[:8], "to": newest})
    assert answer.status_code == 200, answer.text
    config = write_config(tmp_path / "hubwatch.toml", "http://127.0.0.1:9", history.copy_to(tmp_path).url)
    printed = run_cli("diff", LLAMA, oldest, newest, "--json", config=config)
    assert printed.returncode == 0, printed.stderr
    assert answer.json()["changes"] == json.loads(printed.stdout)["changes"]
    assert answer.json()["from_sha"] == oldest


def test_events_walk_by_cursor_exactly_once(client: httpx.Client, served: Served) -> None:
    """Following next_cursor forward (after=) and backward (before=) visits every event once, in seq order."""
    forward, cursor = [], 0
    while cursor is not None:
        page = client.get("/api/v1/events", params={"after": cursor, "limit": 2}).json()
        assert page["order"] == "asc"
        forward += [e["seq"] for e in page["items"]]
        cursor = page["next_cursor"]
    backward, params = [], {"limit": 3}
    while True:
        page = client.get("/api/v1/events", params=params).json()
        backward += [e["seq"] for e in page["items"]]
        if page["next_cursor"] is None:
            break
        params = {"limit": 3, "before": page["next_cursor"]}
    assert forward == sorted(forward) and len(set(forward)) == len(forward)
    assert backward == sorted(forward, reverse=True)
    assert len(forward) == len(served.store.history.list_events(limit=1000))


def test_event_filters(client: httpx.Client) -> None:
    """Events filter by repo, org, kind, minimum severity and security."""
    def seqs(**params: object) -> list[int]:
        return [e["seq"] for e in client.get("/api/v1/events", params=params).json()["items"]]

    assert set(seqs(repo=HOSTILE)) | set(seqs(org="meta-llama")) == set(seqs())
    warned = client.get("/api/v1/events", params={"min_severity": "warning"}).json()["items"]
    assert warned and all(e["severity"] in ("warning", "critical") for e in warned)
    templates = client.get("/api/v1/events", params={"kind": "chat_template", "repo": LLAMA}).json()["items"]
    assert templates and all("chat_template" in e["payload"]["kinds"] for e in templates)
    security = client.get("/api/v1/events", params={"security": "true"}).json()["items"]
    assert security and all(e["security"] for e in security)


def test_hostile_text_is_plain_json(client: httpx.Client, served: Served) -> None:
    """Upstream HTML and control characters come back as JSON strings, exactly as committed, never as markup."""
    revision = served.store.history.list_revisions(HOSTILE)[0]
    response = client.get(f"/api/v1/repos/{HOSTILE}/revisions/{revision.sha}")
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "\\u0007" in response.text and "\x07" not in response.text  # JSON escapes control characters
    assert response.json()["title"] == revision.title


@pytest.mark.parametrize(
    ("path", "params", "status"),
    [
        (f"/api/v1/repos/{LLAMA}/revisions", {"limit": 0}, 422),
        (f"/api/v1/repos/{LLAMA}/revisions", {"limit": "ten"}, 422),
        (f"/api/v1/repos/{LLAMA}/revisions", {"offset": -1}, 422),
        (f"/api/v1/repos/{LLAMA}/revisions/xyz", {}, 422),
        (f"/api/v1/repos/{LLAMA}/revisions/deadbeef", {}, 404),
        (f"/api/v1/repos/{LLAMA}/diff", {"from": "deadbeef"}, 422),
        ("/api/v1/repos/nobody/nothing/revisions", {}, 404),
        ("/api/v1/events", {"after": -1}, 422),
        ("/api/v1/events", {"min_severity": "loud"}, 422),
        ("/api/v1/events", {"kind": "no such kind"}, 422),
        ("/api/v1/events", {"repo": "not a repo"}, 422),
    ],
)
def test_bad_parameters_get_clear_errors(client: httpx.Client, path: str, params: dict, status: int) -> None:
    """Invalid parameters are 422 with the parameter named; unknown repos and revisions are 404."""
    response = client.get(path, params=params)
    assert response.status_code == status, response.text
    assert response.json()["detail"]


def test_writes_need_the_api_token(writable: Served) -> None:
    """Adding and removing a watch needs the bearer token; without it nothing changes."""
    with writable.client() as c:
        anonymous = c.post("/api/v1/watches", json={"repo_id": "openai/clip-vit-base-patch32"})
        forged = c.post("/api/v1/watches", json={"repo_id": "openai/clip-vit-base-patch32"},
                        headers={"Authorization": "Bearer nope"})
        assert anonymous.status_code == 401 and forged.status_code == 401
        assert "openai/clip-vit-base-patch32" not in {w["repo_id"] for w in c.get("/api/v1/watches").json()}
        added = c.post("/api/v1/watches", json={"repo_id": "openai/clip-vit-base-patch32", "interval_s": 600}, headers=AUTH)
        again = c.post("/api/v1/watches", json={"repo_id": "openai/clip-vit-base-patch32"}, headers=AUTH)
        bad = c.post("/api/v1/watches", json={"repo_id": "<script>/x"}, headers=AUTH)
        not_removed = c.delete("/api/v1/watches/openai/clip-vit-base-patch32")
        removed = c.delete("/api/v1/watches/openai/clip-vit-base-patch32", headers=AUTH)
        gone = c.delete("/api/v1/watches/openai/clip-vit-base-patch32", headers=AUTH)
    assert added.status_code == 201 and added.json()["source"] == "api" and added.json()["interval_s"] == 600
    assert again.status_code == 409 and "already watched" in again.json()["detail"]
    assert bad.status_code == 422
    assert not_removed.status_code == 401
    assert removed.status_code == 204 and gone.status_code == 404


def test_writes_are_refused_when_no_token_is_configured(history: History) -> None:
    """Without [server] api_token_env's variable, every write is 403 and says how to enable it."""
    with serve(history.store()) as served, served.client() as c:
        response = c.post("/api/v1/watches", json={"repo_id": "a/b"}, headers={"Authorization": "Bearer anything"})
    assert response.status_code == 403 and "api_token_env" in response.json()["detail"]


def test_subscriptions_are_managed_with_the_token(writable: Served) -> None:
    """A subscription is added, listed without its secret, refused for a bad URL, re-enabled and removed; writes need the token."""
    with writable.client() as c:
        refused = c.post("/api/v1/subscriptions", json={"url": "http://127.0.0.1:9/hook"})
        created = c.post("/api/v1/subscriptions", json={"url": "http://127.0.0.1:9/hook", "repos": ["meta-llama/*"],
                                                        "kinds": ["chat_template"], "min_severity": "warning"}, headers=AUTH)
        malformed = c.post("/api/v1/subscriptions", json={"url": "http://user:pw@127.0.0.1:9/x"}, headers=AUTH)
        listed = c.get("/api/v1/subscriptions").json()
        enabled = c.post(f"/api/v1/subscriptions/{created.json()['id']}/enable", headers=AUTH)
        unknown = c.post("/api/v1/subscriptions/999/enable", headers=AUTH)
        removed = c.delete(f"/api/v1/subscriptions/{created.json()['id']}", headers=AUTH)
        after = c.get("/api/v1/subscriptions").json()
    assert refused.status_code == 401
    assert created.status_code == 201, created.text
    secret = created.json()["secret"]
    assert secret and secret.startswith("whsec_")
    assert [s["url"] for s in listed] == ["http://127.0.0.1:9/…"] and listed[0]["secret"] is None
    assert secret not in json.dumps(listed)
    assert malformed.status_code == 422
    assert enabled.status_code == 200 and enabled.json()["enabled"] is True and unknown.status_code == 404
    assert removed.status_code == 204 and after == []


def test_health_readiness_and_metrics(client: httpx.Client) -> None:
    """/healthz and /readyz answer; /metrics has request counters by route template and gauges from the database."""
    assert client.get("/healthz").json()["status"] == "ok"
    assert client.get("/readyz").json()["status"] == "ready"
    client.get(f"/repos/{LLAMA}/feed.atom")
    text = client.get("/metrics").text
    assert 'route="/repos/{org}/{name}/feed.atom"' in text
    assert "hubwatch_events " in text and "hubwatch_watches 2" in text
    assert 'hubwatch_feed_responses_total{outcome="rendered"}' in text
