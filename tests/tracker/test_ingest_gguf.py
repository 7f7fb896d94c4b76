"""GGUF files through the whole pipeline on the replay server: headers read by range once per content id,
changes that say what changed (EOS, template, quantization), hostile headers as notes on a stored revision."""

from __future__ import annotations

import json
import struct

import pytest

from tests.support.cli import run_cli
from tests.support.gguf_files import GgufFile, GgufSpec, gguf_header, real_template, real_vocab, write_gguf_repo
from tests.support.settings import settings_for
from tracker.cli.app import App
from tracker.standins.replay.control import ReplayServer

pytestmark = pytest.mark.postgres

REPO = "hubwatch-tests/gguf-model"
TOKENS = real_vocab()[:3000]
TEMPLATE = real_template()
CONFIG = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "chat_template": TEMPLATE}


def _spec(**kw) -> GgufSpec:
    return GgufSpec(**{"tokens": TOKENS, "templates": {"default": TEMPLATE}, **kw})


def _hostile() -> dict[str, GgufFile]:
    good = gguf_header(_spec(merges=[]))
    key = b"general.description"
    over_cap = b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, len(key)) + key + struct.pack("<IQ", 8, 100 * 2**20)
    unknown_type = bytearray(gguf_header(_spec(merges=[])))
    at = unknown_type.index(b"blk.0.attn_q.weight") + len(b"blk.0.attn_q.weight") + 4 + 16
    unknown_type[at : at + 4] = struct.pack("<I", 77)
    return {
        "bad/magic.gguf": GgufFile(b"GGML" + good[4:], 10**6),
        "bad/version.gguf": GgufFile(good[:4] + struct.pack("<I", 9) + good[8:], 10**6),
        "bad/count.gguf": GgufFile(good[:8] + struct.pack("<Q", 2**60) + good[16:], 10**6),
        "bad/string.gguf": GgufFile(good[:24] + struct.pack("<Q", 2**60) + good[32:], 10**6),
        "bad/truncated.gguf": GgufFile(good[: len(good) // 3], len(good) // 3),
        "bad/quant.gguf": GgufFile(bytes(unknown_type)),
        "bad/over-cap.gguf": GgufFile(over_cap, 200 * 2**20),
    }


COMMITS = [
    {"title": "initial", "files": {"tokenizer_config.json": CONFIG},
     "gguf": {"model-Q4_K_M.gguf": GgufFile(gguf_header(_spec())),
              "model-Q8_0.gguf": GgufFile(gguf_header(_spec(quant="Q8_0", file_type=7)))}},
    {"title": "re-upload Q4_K_M with a new EOS and template",
     "gguf": {"model-Q4_K_M.gguf": GgufFile(gguf_header(_spec(
         eos=103, templates={"default": TEMPLATE.replace("<|eot_id|>", "<|end|>")}, context_length=4096)))}},
    {"title": "hostile files", "gguf": _hostile()},
    {"title": "requantize", "gguf": {"model-Q8_0.gguf": GgufFile(gguf_header(_spec(quant="Q5_K", file_type=17)))}},
]


@pytest.fixture
def served(tmp_path):
    write_gguf_repo(tmp_path / "histories", REPO, COMMITS)
    with ReplayServer(roots=[tmp_path / "histories"]) as server:
        yield server


@pytest.fixture
def gguf_app(served, database_url):
    app = App(settings_for(served.endpoint, database_url))  # type: ignore[arg-type]
    app.store.watches.add_watch(REPO, "main", 900)
    yield app
    app.store.engine.dispose()


def _changes(app: App, sha: str) -> list:
    revision = app.store.history.find_revision(REPO, sha)
    return app.store.history.changes_by_revision([revision.id])[revision.id]


def _poll_to(app: App, server: ReplayServer, n: int):
    server.set_head(REPO, n)
    [outcome] = app.poller.poll()
    assert outcome.status == "ingested", outcome.error
    return outcome


def test_headers_are_read_by_range_and_stored_once(gguf_app, served):
    """The baseline reads each GGUF header once, by Range; an unchanged file is not read again later."""
    _poll_to(gguf_app, served, 1)
    reads = [r for r in served.requests if "/resolve/" in r.path and r.path.endswith(".gguf")]
    assert len(reads) == 2 and all(r.range and r.status == 206 for r in reads)
    files = {f.path: f for f in gguf_app.hub.list_files(REPO, served.head_sha(REPO))}
    scans = gguf_app.store.history.read_file_scans(f.content_id for f in files.values())
    q4 = scans[files["model-Q4_K_M.gguf"].content_id]
    assert (q4.format, q4.note, q4.result["file_type"], q4.result["context_length"]) == ("gguf", None, "Q4_K_M", 8192)
    assert q4.bytes_read < files["model-Q4_K_M.gguf"].lfs_size
    assert gguf_app.store.history.read_blobs([q4.scanned_oid])[q4.scanned_oid] == gguf_header(_spec())
    served.reset_requests()
    _poll_to(gguf_app, served, 2)
    reads = [r.path for r in served.requests if "/resolve/" in r.path and r.path.endswith(".gguf")]
    assert reads == [reads[0]] and reads[0].endswith("model-Q4_K_M.gguf")  # Q8_0 unchanged: not read again


def test_an_eos_and_template_change_read_as_such(gguf_app, served):
    """A re-upload changing EOS, context length and the embedded template says so, with rendered prompts."""
    _poll_to(gguf_app, served, 1)
    _poll_to(gguf_app, served, 2)
    changes = _changes(gguf_app, served.head_sha(REPO))
    eos = next(c for c in changes if c.kind == "tokenizer" and c.detail.get("special_token") == "eos")
    assert eos.severity == "warning" and "EOS token '[SEP]' (102) -> '[MASK]' (103)" in eos.summary
    weights = next(c for c in changes if c.kind == "weights" and c.summary.startswith("model-Q4_K_M.gguf changed"))
    assert "GGUF llama Q4_K_M" in weights.summary and weights.severity == "notice"
    model = next(c for c in changes if c.kind == "weights" and "(GGUF): " in c.summary)
    assert "context length 8,192 -> 4,096" in model.summary and model.severity == "warning"
    template = next(c for c in changes if c.kind == "chat_template" and c.detail.get("change") == "changed")
    assert template.path == "model-Q4_K_M.gguf" and "embedded in GGUF" in template.summary
    assert any(s["differs"] for s in template.detail["samples"])
    mismatch = next(c for c in changes if c.kind == "chat_template" and "differs from the repo's own" in c.summary)
    assert mismatch.severity == "warning" and "<|end|>" in mismatch.detail["diff"]


def test_hostile_headers_are_notes_on_a_stored_revision(gguf_app, served):
    """Bad magic, unknown version, absurd counts and lengths, truncation, an unknown type, a header over the cap:
    the poll succeeds, the revision is stored, each file's change carries its note."""
    _poll_to(gguf_app, served, 1)
    _poll_to(gguf_app, served, 3)
    changes = {c.path: c for c in _changes(gguf_app, served.head_sha(REPO)) if c.kind == "weights"}
    expect = {"bad/magic.gguf": "not a GGUF file", "bad/version.gguf": "unknown GGUF version 9",
              "bad/count.gguf": "absurd count", "bad/string.gguf": "absurd string length",
              "bad/truncated.gguf": "truncated", "bad/quant.gguf": "unknown ggml type 77",
              "bad/over-cap.gguf": "header over the 64 MiB cap"}
    for path, says in expect.items():
        assert says in changes[path].summary, changes[path].summary
        assert changes[path].severity == "warning" and changes[path].security


def test_a_server_ignoring_range_still_reads_the_header(gguf_app, served):
    """With Range ignored (200 and the whole body), the header is read and the stream cut short."""
    _poll_to(gguf_app, served, 1)
    _poll_to(gguf_app, served, 3)
    served.ignore_range()
    _poll_to(gguf_app, served, 4)
    files = {f.path: f for f in gguf_app.hub.list_files(REPO, served.head_sha(REPO))}
    scan = gguf_app.store.history.read_file_scans([files["model-Q8_0.gguf"].content_id])[files["model-Q8_0.gguf"].content_id]
    assert scan.note is None and scan.result["file_type"] == "Q5_K_M"
    change = next(c for c in _changes(gguf_app, served.head_sha(REPO)) if "(GGUF): " in c.summary)
    assert "quantization Q8_0 -> Q5_K_M" in change.summary


def test_show_json_carries_gguf_facts(gguf_app, served, database_url, tmp_path):
    """`show --json` gives each GGUF file its header's facts under `gguf`."""
    _poll_to(gguf_app, served, 1)
    config = tmp_path / "hubwatch.toml"
    config.write_text(f'[hub]\nendpoint = "{served.endpoint}"\n[storage]\nurl = "{database_url}"\n')
    result = run_cli("show", REPO, served.head_sha(REPO), "--json", config=config)
    assert result.returncode == 0, result.stderr
    files = {f["path"]: f for f in json.loads(result.stdout)["files"]}
    facts = files["model-Q4_K_M.gguf"]["gguf"]
    assert facts["architecture"] == "llama" and facts["file_type"] == "Q4_K_M" and facts["context_length"] == 8192
    assert facts["tensors"] == 21 and facts["chat_templates"] == ["default"]
    assert facts["special_tokens"]["eos"] == {"id": 102, "token": "[SEP]"}
    assert 0 < facts["bytes_read"] < 2 * 2**20  # the header (and read-ahead) of a 29 MB file
    assert "gguf" not in files["tokenizer_config.json"]
