"""Storage moves are not content changes: a Xet migration (a `xetHash` on entries whose `lfs.oid` is unchanged) raises
no change and reads no weights, and a `/resolve/` answered with a 302 to another host (the CDN stand-in: signed URLs
that honour Range) is followed without ever carrying the token there. Against the replay, the real client."""

from __future__ import annotations

import json

import httpx
import pytest

from tracker.cli.app import App
from tracker.errors import RepoGated
from tracker.hub.client import HubClient
from tracker.standins.replay.history import lfs_entry, scripted_history

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

REPO = "hubwatch-tests/stored-elsewhere"
TOKEN = "hf_never_on_the_cdn"  # a test token: the replay takes any bearer token when it has none of its own
HEADER = {"w": {"dtype": "F16", "shape": [64, 64], "data_offsets": [0, 8192]}, "__metadata__": {"format": "pt"}}
WIDER = {"w": {"dtype": "F16", "shape": [64, 128], "data_offsets": [0, 16384]}, "__metadata__": {"format": "pt"}}
STEPS = [
    {"config.json": b'{"model_type": "llama"}', "README.md": b"# one\n", "model.safetensors": lfs_entry(HEADER)},
    {"README.md": b"# two\n"},
    {"model.safetensors": lfs_entry(WIDER)},
]


@pytest.fixture
def watched(app: App, replay):
    replay.add_repo(scripted_history(REPO, STEPS))
    replay.set_head(REPO, 1)
    app.store.watches.add_watch(REPO, "main", 900)
    [outcome] = app.poller.poll()
    assert outcome.status == "ingested"
    replay.reset_requests()
    return replay


def _weight_reads(replay) -> list[str]:
    return [r.path for r in replay.requests if r.path.endswith("model.safetensors") and "/resolve/" in r.path]


def test_a_xet_migration_raises_no_change_and_reads_no_weights(app: App, watched) -> None:
    """The migration itself (no commit) leaves the head: the poll is unchanged. The next commit lists every LFS entry
    with a `xetHash` beside the same `lfs.oid`: only its own change (the README) is reported, no weight is read."""
    watched.migrate_to_xet(REPO)
    [outcome] = app.poller.poll()
    assert outcome.status == "unchanged" and outcome.stamped
    watched.set_head(REPO, 2)
    tree = httpx.get(f"{watched.endpoint}/api/models/{REPO}/tree/{watched.head_sha(REPO)}").json()
    [weights] = [e for e in tree if e["path"] == "model.safetensors"]
    assert weights["xetHash"] and weights["lfs"]["oid"] == watched.repo(REPO).trees[watched.commits(REPO)[0].sha][
        "model.safetensors"].blob.lfs_sha256
    [outcome] = app.poller.poll()
    [revision] = outcome.revisions
    assert [c.path for c in revision.changes] == ["README.md"]
    assert _weight_reads(watched) == [] and watched.cdn.requests == []


def test_a_resolve_redirected_to_the_cdn_keeps_the_hubs_headers_on_the_302(watched) -> None:
    """The Hub's 302 to the CDN carries X-Repo-Commit, ETag, X-Linked-Etag and X-Linked-Size; the signed URL is on
    another host, serves Range, and refuses a tampered signature."""
    watched.serve_from_cdn(REPO)
    sha = watched.head_sha(REPO)
    answer = httpx.get(f"{watched.endpoint}/{REPO}/resolve/{sha}/model.safetensors", follow_redirects=False)
    blob = watched.repo(REPO).trees[sha]["model.safetensors"].blob
    assert answer.status_code == 302
    assert answer.headers["X-Repo-Commit"] == sha and answer.headers["X-Linked-Size"] == str(blob.size)
    assert answer.headers["X-Linked-Etag"] == answer.headers["ETag"] == f'"{blob.lfs_sha256}"'
    location = answer.headers["Location"]
    assert location.startswith(watched.cdn.origin) and httpx.URL(location).host != httpx.URL(watched.endpoint).host
    ranged = httpx.get(location, headers={"Range": "bytes=0-7"})
    assert ranged.status_code == 206 and ranged.content == blob.read(0, 8)
    assert httpx.get(location.replace("sig=", "sig=0")).status_code == 403


def test_the_token_is_never_forwarded_to_the_cdn(app: App, watched) -> None:
    """With a token: a download, our own range reader and the library's safetensors header read all follow the 302,
    get the right bytes from the CDN, and the CDN never sees an Authorization header; a poll of new weights too."""
    watched.serve_from_cdn(REPO)
    watched.set_state(REPO, "gated", gated="auto", granted=True)  # the Hub's 302 only answers a request with the token
    with pytest.raises(RepoGated):
        HubClient(watched.endpoint).download(REPO, watched.head_sha(REPO), "model.safetensors")
    watched.reset_requests()
    hub = HubClient(watched.endpoint, TOKEN)
    sha = watched.head_sha(REPO)
    blob = watched.repo(REPO).trees[sha]["model.safetensors"].blob
    assert hub.download(REPO, sha, "model.safetensors", blob.size) == blob.read(0, blob.size)
    source = hub.open_range(REPO, sha, "model.safetensors", blob.size, budget=blob.size, first_block=1)
    assert source.read(100, 50) == blob.read(100, 150)
    manifest = hub.safetensors_manifest(REPO, sha, "model.safetensors")
    assert [t.shape for t in manifest.tensors] == [(64, 64)]
    watched.set_head(REPO, 3)
    new_app = App(app.settings)
    new_app.__dict__["store"] = app.store
    new_app.__dict__["hub"] = HubClient(watched.endpoint, TOKEN)
    [outcome] = new_app.poller.poll()
    weights = [c for c in outcome.revisions[-1].changes if c.path == "model.safetensors"]
    assert any("w [64, 64] -> [64, 128]" in c.summary for c in weights)  # the new header was read, through the CDN
    seen = watched.cdn.requests
    assert len(seen) >= 4 and any(r.range and r.status == 206 for r in seen)
    assert [r.authorization for r in seen] == [None] * len(seen)
    hub_side = [r for r in watched.requests if "/resolve/" in r.path and r.path.endswith(".safetensors")]
    assert hub_side and {r.status for r in hub_side} == {302}  # each with the token: gated, granted


def test_a_squash_keeps_what_was_stored_and_is_no_rewrite(app: App, watched) -> None:
    """A super-squash (the old shas gone, one new commit with the same files): one `repo.history_squashed` warning, the
    revisions stored before kept, the squashed commit stored with no file change and no "history rewritten"."""
    watched.set_head(REPO, 2)
    app.poller.poll()
    before = [r.sha for r in app.store.history.list_revisions(REPO)]
    squashed = watched.squash(REPO)
    [outcome] = app.poller.poll()
    [revision] = outcome.revisions
    assert revision.sha == squashed
    [fact] = revision.changes
    assert fact.summary.startswith("history squashed: 2 commit(s) seen before are no longer on main")
    assert (fact.severity.value, fact.security, fact.detail["dropped"]) == ("warning", False, before)
    assert "rewritten" not in revision.event_title
    assert [r.sha for r in app.store.history.list_revisions(REPO)] == [squashed, *before]
    events = [(e.kind, e.severity) for e in app.store.history.list_events(REPO) if e.kind.startswith("repo.")]
    assert events == [("repo.history_squashed", "warning")]
    [outcome] = app.poller.poll()
    assert outcome.status == "unchanged"


@pytest.mark.parametrize("fmt", ["generic", "slack", "discord", "apprise"])
def test_the_squash_event_goes_out_through_every_channel(app: App, watched, fmt) -> None:
    """`repo.history_squashed` renders in every webhook format (the generic one typed by its kind) and is an Atom entry
    in its own category with its severity."""
    import feedparser

    from feeds.views.feed import FeedBuilder, FeedRequest
    from feeds.webhooks import Links, render

    watched.squash(REPO)
    app.poller.poll()
    [event] = [e for e in app.store.history.list_events(REPO) if e.kind == "repo.history_squashed"]
    body = render(event, fmt, Links(hub_endpoint=watched.endpoint))
    assert "history squashed" in json.dumps(json.loads(body))
    if fmt == "generic":
        assert json.loads(body)["type"] == "repo.history_squashed"
        feed = FeedBuilder(app.store, app.store.read_model).build(FeedRequest("repo", "atom", REPO), "http://h").body
        [entry] = [e for e in feedparser.parse(feed).entries if "repo.history_squashed" in {t.term for t in e.tags}]
        assert "history squashed" in entry.title and "severity:warning" in {t.term for t in entry.tags}


def test_cdn_requests_do_not_count_as_hub_requests(watched) -> None:
    """The request budget counts the Hub's host only: a download through the 302 is one Hub request (the 302), the
    CDN's answer is not counted against the Hub's limits."""
    from tracker.hub.client import counting_requests

    watched.serve_from_cdn(REPO)
    hub = HubClient(watched.endpoint)
    sha = watched.head_sha(REPO)
    with counting_requests(watched.endpoint) as counted:
        hub.download(REPO, sha, "model.safetensors")
    assert counted == [1] and len(watched.cdn.requests) == 1
