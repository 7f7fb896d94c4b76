"""A revision that raises the context from 8k to 128k (Meta-Llama-3-8B's config.json, then Llama-3.1-8B's) is a
serving change end to end: `hubwatch poll` stores it, and it reaches the feed, a signed webhook, the revision
page, and `hubwatch outdated` of a lock pinned before it. A GGUF-only repo gets the same from its headers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import feedparser
import pytest
from standardwebhooks import Webhook

from tests.support.cli import cli_json, run_cli, signed_webhook_section, write_config
from tests.support.gguf_files import GgufFile, GgufSpec, gguf_header, real_vocab, write_gguf_repo
from tests.support.served import serve
from tests.support.settings import settings_for
from tests.support.synthetic_repos import write_repo
from tests.support.webhooks import SECRET, Receiver
from tracker.cli.app import App
from tracker.standins.replay.control import ReplayServer

pytestmark = pytest.mark.postgres

REPO = "hubwatch-tests/serving-model"
GGUF_REPO = "hubwatch-tests/gguf-only-model"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "estimator" / "configs" / "llama" / "Llama-3.1-8B.json"
LLAMA_31 = json.loads(FIXTURE.read_text(encoding="utf-8"))
# Meta-Llama-3-8B's config.json: Llama-3.1-8B's dimensions at 8k positions, without the llama3 rope scaling
LLAMA_3 = {**{k: v for k, v in LLAMA_31.items() if k != "rope_scaling"}, "max_position_embeddings": 8192,
           "transformers_version": "4.38.0.dev0"}
COMMITS = [
    {"title": "Llama 3 8B", "files": {"config.json": LLAMA_3}},
    {"title": "Llama 3.1: 128k context", "files": {"config.json": LLAMA_31}},
]
ENV = {"TEST_HOOK_SECRET": SECRET}
L4_WORDS = "on L4 24GB: the model no longer loads at its full context (128k): the context was raised from 8k to 128k"


@pytest.fixture
def replay(tmp_path: Path) -> Iterator[ReplayServer]:
    write_repo(tmp_path / "histories", REPO, COMMITS)
    tokens = real_vocab()[:3000]
    write_gguf_repo(tmp_path / "histories", GGUF_REPO, [
        {"title": "Q4_K_M and Q8_0 at 8k", "gguf": {
            "tiny-Q4_K_M.gguf": GgufFile(gguf_header(GgufSpec(tokens=tokens))),
            "tiny-Q8_0.gguf": GgufFile(gguf_header(GgufSpec(tokens=tokens, quant="Q8_0", file_type=7)))}},
        {"title": "Q8_0 at 128k", "gguf": {
            "tiny-Q8_0.gguf": GgufFile(gguf_header(GgufSpec(tokens=tokens, quant="Q8_0", file_type=7,
                                                            context_length=131072)))}},
    ])
    with ReplayServer(roots=[tmp_path / "histories"]) as server:
        server.set_head(REPO, 1)
        server.set_head(GGUF_REPO, 1)
        yield server


@pytest.fixture
def config(replay: ReplayServer, receiver: Receiver, database_url: str, tmp_path: Path) -> Path:
    return write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url,
                        signed_webhook_section(receiver.url, ("estimate",)))


def _ok(result) -> str:
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_raised_context_is_a_serving_change_everywhere(replay: ReplayServer, receiver: Receiver, config: Path,
                                                       tmp_path: Path, database_url: str) -> None:
    """Raising the context to 128k is stored as a warning that says which cards no longer load it, and it
    reaches the RSS feed, a signed webhook, the revision page and `outdated` of a lock pinned at 8k."""
    _ok(run_cli("watch", "add", REPO, config=config, env=ENV))
    _ok(run_cli("poll", config=config, env=ENV))
    lock = tmp_path / "models.lock"
    _ok(run_cli("lock", REPO, "--lock", str(lock), config=config, env=ENV))
    replay.set_head(REPO, 2)
    _ok(run_cli("poll", config=config, env=ENV))

    history = cli_json("history", REPO, config=config, env=ENV)
    newest = history[0] if isinstance(history, list) else history["revisions"][0]
    [change] = [c for c in newest["changes"] if c["kind"] == "estimate"]
    assert change["severity"] == "warning" and L4_WORDS in change["summary"]
    assert L4_WORDS in " ".join(change["detail"]["no_longer_fits"])
    sha = replay.head_sha(REPO)

    feed = feedparser.parse(_ok(run_cli("feed", REPO, "--format", "rss", config=config, env=ENV)))
    assert not feed.bozo and any(L4_WORDS in (e.get("summary") or "") + e.title for e in feed.entries)

    pending = [d for d in cli_json("deliveries", "list", config=config, env=ENV) if d["event"]["sha"] == sha]
    assert pending, "the estimate change queued no delivery"
    _ok(run_cli("deliveries", "redeliver", pending[0]["id"], config=config, env=ENV))
    payload = Webhook(SECRET).verify(receiver.accepted[-1].body, receiver.accepted[-1].headers)
    assert L4_WORDS in json.dumps(payload)

    code = run_cli("outdated", "--lock", str(lock), "--json", config=config, env=ENV)
    assert code.returncode in (0, 1), code.stderr
    [model] = json.loads(code.stdout)["models"]
    assert model["commits_behind"] == 1 and "estimate" in model["summary"]
    assert any(L4_WORDS in c["summary"] for c in model["changes"] if c["kind"] == "estimate")

    app = App(settings_for(replay.endpoint, database_url))  # type: ignore[arg-type]
    try:
        with serve(app.store) as server, server.client() as client:
            page = client.get(f"/repos/{REPO}/revisions/{sha}").text
            estimates = client.get(f"/repos/{REPO}/estimates").text
    finally:
        app.store.engine.dispose()
    assert "no longer loads at its full context (128k)" in page and "Serving" in page
    assert "Serving memory per card" in estimates and "131,072" in estimates


def test_gguf_only_repo_gets_an_estimate_and_a_serving_change(replay: ReplayServer, config: Path) -> None:
    """A repo of GGUF files alone is estimated from their headers (the largest quantization, each priced), and a
    re-upload raising the context is an estimate change naming the GGUF file."""
    _ok(run_cli("watch", "add", GGUF_REPO, config=config, env=ENV))
    _ok(run_cli("poll", config=config, env=ENV))
    first = cli_json("estimate", GGUF_REPO, "--serve", config=config, env=ENV)
    gguf = first["serving"]["gguf"]
    assert gguf["chosen"] == "tiny-Q8_0.gguf" and {m["name"] for m in gguf["models"]} == \
        {"tiny-Q4_K_M.gguf", "tiny-Q8_0.gguf"}
    assert first["source"] == "GGUF headers" and "GGUF header" in first["serving"]["weights"]["source"]
    assert first["parameters"]["derived"] == first["parameters"]["checkpoint"]
    assert first["serving"]["full_context"] == 8192
    replay.set_head(GGUF_REPO, 2)
    _ok(run_cli("poll", config=config, env=ENV))
    history = cli_json("history", GGUF_REPO, config=config, env=ENV)
    newest = history[0] if isinstance(history, list) else history["revisions"][0]
    [change] = [c for c in newest["changes"] if c["kind"] == "estimate"]
    assert change["path"] == "tiny-Q8_0.gguf" and "the context was raised from 8k to 128k" in change["summary"]
    assert cli_json("estimate", GGUF_REPO, "--serve", config=config, env=ENV)["serving"]["full_context"] == 131072
