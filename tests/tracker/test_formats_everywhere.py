"""What the formats readers find reaches every outbound surface: a GGUF re-upload's EOS change, its embedded template
change and its mismatch with the repo's own template, and a pickle's dangerous import, each in the repo's feed, a
signed webhook delivery and the revision page, naming the file and the finding."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import feedparser
import pytest
from standardwebhooks import Webhook

from tests.support.cli import cli_json, run_cli, signed_webhook_section, write_config
from tests.support.gguf_files import GgufFile, GgufSpec, gguf_header, real_template, real_vocab, write_gguf_repo
from tests.support.pickle_repos import calling_fragment, sparse, tensor_pickle, torch_zip, whole, write_pickle_repo
from tests.support.served import serve
from tests.support.settings import settings_for
from tests.support.webhooks import SECRET, Receiver
from tracker.cli.app import App
from tracker.standins.replay.control import ReplayServer

pytestmark = pytest.mark.postgres

GGUF_REPO = "hubwatch-tests/gguf-everywhere"
PICKLE_REPO = "hubwatch-tests/pickle-everywhere"
TEMPLATE = real_template()
CONFIG = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "chat_template": TEMPLATE}
ENV = {"TEST_HOOK_SECRET": SECRET}
GGUF = "model-Q4_K_M.gguf"
# the findings, as the differs word them (tracker/differs/gguf.py, pickle_verdicts.py)
GGUF_FINDINGS = [f"{GGUF} (GGUF): EOS token", "chat_template embedded in GGUF",
                 f"{GGUF}: the chat template embedded in this GGUF differs from the repo"]
PICKLE_FINDING = "pickle imports a dangerous callable: os.system"


def _spec(**kw) -> GgufSpec:
    return GgufSpec(**{"tokens": real_vocab()[:3000], "templates": {"default": TEMPLATE}, **kw})


@pytest.fixture
def replay(tmp_path: Path) -> Iterator[ReplayServer]:
    histories = tmp_path / "histories"
    write_gguf_repo(histories, GGUF_REPO, [
        {"title": "initial", "files": {"tokenizer_config.json": CONFIG}, "gguf": {GGUF: GgufFile(gguf_header(_spec()))}},
        {"title": "re-upload with a new EOS and template", "gguf": {GGUF: GgufFile(gguf_header(_spec(
            eos=103, templates={"default": TEMPLATE.replace("<|eot_id|>", "<|end|>")})))}},
    ])
    write_pickle_repo(histories, PICKLE_REPO, [
        {"title": "initial", "files": {"config.json": {"model_type": "net"}},
         "pickles": {"pytorch_model.bin": sparse(tensor_pickle())}},
        {"title": "add extra weights", "pickles": {
            "extra/evil.bin": whole(torch_zip(tensor_pickle(calling_fragment("os", "system", "id"))))}},
    ])
    with ReplayServer(roots=[histories]) as server:
        server.set_head(GGUF_REPO, 1)
        server.set_head(PICKLE_REPO, 1)
        yield server


@pytest.fixture
def config(replay: ReplayServer, receiver: Receiver, database_url: str, tmp_path: Path) -> Path:
    return write_config(tmp_path / "hubwatch.toml", replay.endpoint, database_url,
                        signed_webhook_section(receiver.url))


def _ok(result) -> str:
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _second_revision(replay: ReplayServer, config: Path, repo: str) -> str:
    _ok(run_cli("watch", "add", repo, config=config, env=ENV))
    _ok(run_cli("poll", config=config, env=ENV))
    replay.set_head(repo, 2)
    _ok(run_cli("poll", config=config, env=ENV))
    return replay.head_sha(repo)


def _surfaces(replay: ReplayServer, receiver: Receiver, config: Path, database_url: str, repo: str,
              sha: str) -> tuple[str, str, str]:
    """(the feed's entries of the revision, the verified webhook payloads of its events, its page) as text."""
    feed = feedparser.parse(_ok(run_cli("feed", repo, "--format", "atom", config=config, env=ENV)))
    assert not feed.bozo
    entries = " ".join(e.title + " " + (e.get("summary") or "") for e in feed.entries if sha in json.dumps(e))
    payloads = []
    for delivery in [d for d in cli_json("deliveries", "list", config=config, env=ENV) if d["event"]["sha"] == sha]:
        _ok(run_cli("deliveries", "redeliver", delivery["id"], config=config, env=ENV))
        payloads.append(Webhook(SECRET).verify(receiver.accepted[-1].body, receiver.accepted[-1].headers))
    app = App(settings_for(replay.endpoint, database_url))  # type: ignore[arg-type]
    try:
        with serve(app.store) as server, server.client() as client:
            response = client.get(f"/repos/{repo}/revisions/{sha}")
            assert response.status_code == 200
            page = response.text
    finally:
        app.store.engine.dispose()
    return entries, json.dumps(payloads), page


def test_a_gguf_re_upload_reaches_the_feed_a_webhook_and_the_page(replay, receiver, config, database_url) -> None:
    """The EOS change, the embedded template change and the mismatch with tokenizer_config.json's template are each
    in the feed entry, a signed webhook delivery and the revision page, with the file's name."""
    sha = _second_revision(replay, config, GGUF_REPO)
    feed, webhooks, page = _surfaces(replay, receiver, config, database_url, GGUF_REPO, sha)
    for surface, text in (("feed", feed), ("webhook", webhooks), ("page", page.replace("&#39;", "'"))):
        for finding in GGUF_FINDINGS:
            assert finding in text, f"{surface} lacks {finding!r}"


def test_a_dangerous_pickle_reaches_the_feed_a_webhook_and_the_page(replay, receiver, config, database_url) -> None:
    """extra/evil.bin's os.system is in the feed entry, a signed webhook delivery and the revision page."""
    sha = _second_revision(replay, config, PICKLE_REPO)
    feed, webhooks, page = _surfaces(replay, receiver, config, database_url, PICKLE_REPO, sha)
    for surface, text in (("feed", feed), ("webhook", webhooks), ("page", page)):
        assert "extra/evil.bin" in text and PICKLE_FINDING in text, f"{surface} lacks the file or the finding"
