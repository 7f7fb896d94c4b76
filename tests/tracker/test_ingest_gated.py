"""A gated repo without access followed through what stays readable (the file list, commits, sizes and LFS hashes):
new revisions are stored with the refused files noted, one refused `/resolve/` per poll at most, differs that need an
unread file say "not compared", and the watch moves to gated and back with its events; `poll` exits 3 and its JSON
names the unread files. Against the replay with the real huggingface_hub client."""

from __future__ import annotations

import json

import pytest

from tracker.cli.app import App
from tracker.standins.replay.history import lfs_entry, scripted_history

pytestmark = pytest.mark.postgres  # its database tests run on PostgreSQL too (.ci/run)

REPO = "hubwatch-tests/gated-follow"
HEADER = {"w": {"dtype": "F16", "shape": [4, 4], "data_offsets": [0, 32]}}
WIDER = {"w": {"dtype": "F16", "shape": [4, 8], "data_offsets": [0, 64]}}


def _gen(**keys: object) -> bytes:
    return json.dumps({"eos_token_id": 2, **keys}).encode()


def _tok(template: str) -> bytes:
    return json.dumps({"eos_token": "</s>", "chat_template": template}).encode()


STEPS = [
    {"config.json": b'{"model_type": "llama"}', "generation_config.json": _gen(), "README.md": b"# one\n",
     "tokenizer_config.json": _tok("{{ messages[0].content }}</s>"), "model.safetensors": lfs_entry(HEADER)},
    {"generation_config.json": _gen(temperature=0.6), "model.safetensors": lfs_entry(WIDER),  # eos 2 kept
     "tokenizer_config.json": _tok("{{ messages[0].content }} </s>")},
    {"README.md": b"# two\n"},
    {"README.md": b"# three\n"},
]


@pytest.fixture(autouse=True)
def no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)


@pytest.fixture
def gated(app: App, replay):
    """The repo watched at its first commit (read while open), then gated (manual) without access."""
    replay.add_repo(scripted_history(REPO, STEPS))
    replay.set_head(REPO, 1)
    app.store.watches.add_watch(REPO, "main", 900)
    [outcome] = app.poller.poll()
    assert outcome.status == "ingested" and outcome.repo_state == "active"
    replay.set_state(REPO, "gated", gated="manual")
    return replay


def _refused(replay) -> int:
    return sum(1 for r in replay.requests if "/resolve/" in r.path and r.status in (401, 403))


def _lifecycle(app: App) -> list[tuple[str, str]]:
    events = reversed(app.store.history.list_events(REPO))
    return [(e.kind, e.severity) for e in events if e.kind in ("repo.gated", "repo.restored")]


def test_new_revisions_are_stored_from_what_stays_readable(app: App, gated) -> None:
    """The new commit is stored from its file list: the refused files are noted on the revision and on each file,
    the weights' new LFS hash is a change, the config, tokenizer, chat template and stop tokens are "not compared"
    (nothing "dropped" or "removed"), one refused read."""
    gated.reset_requests()
    gated.set_head(REPO, 2)
    [outcome] = app.poller.poll()
    assert outcome.status == "ingested" and outcome.repo_state == "gated" and outcome.state_changed
    assert outcome.unread == ["generation_config.json", "tokenizer_config.json", "model.safetensors"]
    assert _refused(gated) == 1
    [revision] = outcome.revisions
    summaries = [c.summary for c in revision.changes]
    assert "gated (manual): 3 file(s) not read: generation_config.json, tokenizer_config.json, model.safetensors" in summaries
    assert not [s for s in summaries if "removed" in s]  # nothing unread is said to be gone
    [stops] = [c for c in revision.changes if c.kind.value == "stop_tokens"]
    assert stops.summary.startswith("stop tokens not compared: new generation_config.json, new tokenizer_config.json not "
                                    "read (gated (manual)")
    assert [c.summary.split(";")[0] for c in revision.changes if c.kind.value in ("config", "tokenizer", "chat_template")] \
        == ["generation_config.json changed", "tokenizer_config.json changed", "chat_template: could not be read (gated "
            "(manual): not read, the Hub refuses its files to this token)"]
    assert stops.severity.value == "info"
    [weights] = [c for c in revision.changes if c.path == "model.safetensors"]
    assert "changed" in weights.summary and "tensors not compared" in weights.summary
    assert not [c for c in revision.changes if c.severity.value == "critical"]
    stored = app.store.history.find_revision(REPO, gated.head_sha(REPO))
    notes = {f.path: f.note for f in app.store.history.revision_files(stored.id)}
    assert notes["generation_config.json"].startswith("gated (manual): not read")
    assert notes["config.json"] is None
    watch = app.store.watches.get_watch(REPO)
    assert (watch.repo_state, watch.last_sha, watch.error_count) == ("gated", gated.head_sha(REPO), 0)
    assert watch.state_detail["mode"] == "manual" and watch.state_detail["unread"] == outcome.unread
    assert _lifecycle(app) == [("repo.gated", "warning")]


def test_one_refused_read_per_poll_and_the_return_is_told(app: App, gated) -> None:
    """Two new commits in one poll: one refused `/resolve/` in all, both stored; an unchanged gated head reads no
    file; a later commit read in full (access granted) restores the watch, with one event each way."""
    gated.reset_requests()
    gated.set_head(REPO, 3)
    [outcome] = app.poller.poll()
    assert len(outcome.revisions) == 2 and _refused(gated) == 1
    assert outcome.unread == ["generation_config.json", "tokenizer_config.json", "model.safetensors", "README.md"]
    [outcome] = app.poller.poll()
    assert outcome.status == "unchanged" and outcome.repo_state == "gated" and _refused(gated) == 1
    assert not [r for r in gated.requests if "/resolve/" in r.path and r.status < 400]
    gated.set_state(REPO, "active")  # the gate lifted: the next commit's files are read
    gated.set_head(REPO, 4)
    [outcome] = app.poller.poll()
    assert outcome.repo_state == "active" and outcome.state_changed and not outcome.unread
    assert _lifecycle(app) == [("repo.gated", "warning"), ("repo.restored", "notice")]
