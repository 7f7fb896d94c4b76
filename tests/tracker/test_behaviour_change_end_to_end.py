"""A revision that changes what the model does (its chat template no longer parses in minijinja, TGI's engine,
and generation_config.json adds a stop token) reaches every output: history --json's engine matrix, the revision
page, the feed, a signed webhook, `outdated` of a lock pinned before it (a warning) and `lock --update`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import feedparser
import pytest
from standardwebhooks import Webhook

from tests.support.cli import cli_json, run_cli, signed_webhook_section, write_config
from tests.support.served import serve
from tests.support.settings import settings_for
from tests.support.synthetic_repos import write_repo
from tests.support.webhooks import SECRET, Receiver
from tracker.cli.app import App
from tracker.standins.replay.control import ReplayServer

pytestmark = pytest.mark.postgres

REPO = "hubwatch-tests/behaviour-model"
TEMPLATES = Path(__file__).resolve().parents[1] / "fixtures" / "chat_templates"
QWEN2 = (TEMPLATES / "Qwen-Qwen2-7B-Instruct" / "chat_template.jinja").read_text(encoding="utf-8")
# The real Qwen2 template with the assistant turn in `{% generation %}` (TRL's assistant_only_loss marker):
# transformers renders it, minijinja (TGI) refuses it ("unknown statement generation").
TURN = "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
GENERATION = QWEN2.replace(TURN, (
    "{% if message['role'] == 'assistant' %}{{'<|im_start|>assistant\n'}}{% generation %}"
    "{{ message['content'] + '<|im_end|>' }}{% endgeneration %}{{ '\n' }}{% else %}" + TURN + "{% endif %}"))


def _tokenizer_config(template: str) -> dict:
    return {"tokenizer_class": "Qwen2Tokenizer", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
            "bos_token": None, "chat_template": template}


COMMITS = [
    {"title": "Qwen2 chat model", "files": {"tokenizer_config.json": _tokenizer_config(QWEN2),
                                             "generation_config.json": {"eos_token_id": [151645, 151643]}}},
    {"title": "Mark assistant turns for training; stop on 151644 too", "files": {
        "tokenizer_config.json": _tokenizer_config(GENERATION),
        "generation_config.json": {"eos_token_id": [151645, 151643, 151644]}}},
]
ENV = {"TEST_HOOK_SECRET": SECRET}


@pytest.fixture
def replay(tmp_path: Path) -> Iterator[ReplayServer]:
    assert GENERATION != QWEN2
    write_repo(tmp_path / "histories", REPO, COMMITS)
    with ReplayServer(roots=[tmp_path / "histories"]) as server:
        server.set_head(REPO, 1)
        yield server


@pytest.fixture
def config(replay: ReplayServer, receiver: Receiver, database_url: str, tmp_path: Path) -> Path:
    return write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url,
                        signed_webhook_section(receiver.url, ("chat_template", "stop_tokens")))


def _ok(result) -> str:
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_an_engine_break_and_a_stop_token_reach_every_output(replay: ReplayServer, receiver: Receiver, config: Path,
                                                              tmp_path: Path, database_url: str) -> None:
    _ok(run_cli("watch", "add", REPO, config=config, env=ENV))
    _ok(run_cli("poll", config=config, env=ENV))
    lock = tmp_path / "models.lock"
    _ok(run_cli("lock", REPO, "--lock", str(lock), config=config, env=ENV))
    replay.set_head(REPO, 2)
    _ok(run_cli("poll", config=config, env=ENV))
    sha = replay.head_sha(REPO)

    newest, baseline = cli_json("history", REPO, config=config, env=ENV)
    broken = [c for c in newest["changes"] if (c["detail"] or {}).get("change") == "engine_broken"]
    assert [c["detail"]["engine"] for c in broken] == ["minijinja"]
    assert "unknown statement generation" in broken[0]["summary"]
    [stop] = [c for c in newest["changes"] if c["kind"] == "stop_tokens"]
    assert stop["severity"] == "notice" and [t["id"] for t in newest["stop_tokens"]["added"]] == [151644]
    engines = {e["engine"]: e for e in newest["template_engines"]}  # history --json carries the stored matrix
    assert engines["minijinja"]["parses"] is False and engines["jinja2"]["parses"] is True
    assert newest["template_samples"] and {e["engine"]: e["parses"] for e in baseline["template_engines"]}["minijinja"] is True

    feed = feedparser.parse(_ok(run_cli("feed", REPO, "--format", "rss", config=config, env=ENV)))
    [entry] = [e for e in feed.entries if sha[:12] in e.link or sha in e.link]
    text = (entry.get("summary") or "") + entry.title
    assert not feed.bozo and "minijinja" in text and "151644" in text

    pending = [d for d in cli_json("deliveries", "list", config=config, env=ENV) if d["event"]["sha"] == sha]
    assert pending, "the behaviour changes queued no delivery"
    _ok(run_cli("deliveries", "redeliver", pending[0]["id"], config=config, env=ENV))
    payload = json.dumps(Webhook(SECRET).verify(receiver.accepted[-1].body, receiver.accepted[-1].headers))
    assert "no longer parses in minijinja" in payload and "unknown statement generation" in payload
    assert "stop tokens: added 151644" in payload and '"stop_tokens"' in payload

    code = run_cli("outdated", "--lock", str(lock), "--json", "--fail-on", "warning", config=config, env=ENV)
    assert code.returncode == 1, code.stderr  # the added stop token (a notice of its own) is a warning since a pin
    [model] = json.loads(code.stdout)["models"]
    [since_stop] = [c for c in model["changes"] if c["kind"] == "stop_tokens"]
    assert (since_stop["severity"], since_stop["behaviour"]) == ("warning", True)
    assert any(c["behaviour"] and "minijinja" in c["summary"] for c in model["changes"] if c["kind"] == "chat_template")
    assert model["max_severity"] == "warning"

    moved = run_cli("lock", "--update", REPO, "--lock", str(lock), config=config, env=ENV)
    assert moved.returncode == 0, moved.stderr
    warnings = [line for line in moved.stderr.splitlines() if line.startswith("warning: ")]
    assert any("stop_tokens" in w and "[warning]" in w for w in warnings)
    assert any("chat_template" in w and "minijinja" in w for w in warnings)

    app = App(settings_for(replay.endpoint, database_url))  # type: ignore[arg-type]
    try:
        with serve(app.store) as server, server.client() as client:
            page = client.get(f"/repos/{REPO}/revisions/{sha}").text
    finally:
        app.store.engine.dispose()
    assert "The chat template in every runtime" in page and "does not parse" in page
    assert "unknown statement generation" in page
    assert "Stop tokens" in page and "added: 151644" in page
