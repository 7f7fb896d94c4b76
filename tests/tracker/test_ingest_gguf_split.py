"""A GGUF split (`-00001-of-0000N.gguf`) through the pipeline on the replay server: its parts read as one model
in the differs and in `show --json`, a re-upload of every part is one change, a missing part is named."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import run_cli
from tests.support.gguf_files import GgufFile, GgufSpec, real_template, real_vocab, split_headers, write_gguf_repo
from tests.support.settings import settings_for
from tracker.cli.app import App
from tracker.standins.replay.control import ReplayServer

pytestmark = pytest.mark.postgres

REPO = "hubwatch-tests/gguf-split"
STEM = "model-Q4_K_M"
TEMPLATE = real_template()
CONFIG = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "chat_template": TEMPLATE}
NAME = f"{STEM}-*-of-00003.gguf"
PARTS = [f"{STEM}-0000{i}-of-00003.gguf" for i in (1, 2, 3)]


def _parts(**kw) -> dict[str, GgufFile]:
    spec = GgufSpec(tokens=real_vocab()[:3000], templates={"default": TEMPLATE}, split_max_tensors=8, **kw)
    headers = split_headers(spec, STEM)
    assert sorted(headers) == PARTS
    return {name: GgufFile(head, len(head) + 50_000_000) for name, head in headers.items()}


COMMITS = [
    {"title": "initial", "files": {"tokenizer_config.json": CONFIG}, "gguf": _parts()},
    {"title": "re-upload: requantized, new EOS", "gguf": _parts(quant="Q5_K", file_type=17, eos=103)},
    {"title": "lose a part", "delete": [PARTS[1]]},
]


@pytest.fixture
def served(tmp_path):
    write_gguf_repo(tmp_path / "histories", REPO, COMMITS)
    with ReplayServer(roots=[tmp_path / "histories"]) as server:
        yield server


@pytest.fixture
def split_app(served, database_url):
    app = App(settings_for(served.endpoint, database_url))  # type: ignore[arg-type]
    app.store.watches.add_watch(REPO, "main", 900)
    yield app
    app.store.engine.dispose()


def _changes_at(app: App, server: ReplayServer, n: int) -> list:
    server.set_head(REPO, n)
    [outcome] = app.poller.poll()
    assert outcome.status == "ingested", outcome.error
    revision = app.store.history.find_revision(REPO, server.head_sha(REPO))
    return app.store.history.changes_by_revision([revision.id])[revision.id]


def test_a_re_uploaded_split_is_one_change_per_finding(split_app, served):
    """Every part re-uploaded: one weights change for the split (its three parts in the detail), one quantization
    change and one EOS change for the model, none per part."""
    _changes_at(split_app, served, 1)
    changes = _changes_at(split_app, served, 2)
    assert not [c for c in changes if c.path in PARTS]
    [files] = [c for c in changes if c.kind == "weights" and c.detail.get("status")]
    assert files.path == NAME and files.summary.startswith(f"{NAME} changed (split GGUF, ")
    assert "3 of 3 parts present, 3 changed" in files.summary and "GGUF llama Q5_K_M" in files.summary
    assert [p["path"] for p in files.detail["parts"]] == PARTS and files.detail["split"]["missing"] == []
    [model] = [c for c in changes if c.kind == "weights" and not c.detail.get("status")]
    assert model.path == NAME and "quantization Q4_K_M -> Q5_K_M" in model.summary
    [eos] = [c for c in changes if c.detail.get("special_token") == "eos"]
    assert eos.path == NAME and eos.severity == "warning"


def test_a_missing_part_is_named(split_app, served):
    """A commit that deletes part 2 is a warning on the split that names the missing file; the model's tensors
    from that part read as removed."""
    for n in (1, 2):
        _changes_at(split_app, served, n)
    changes = _changes_at(split_app, served, 3)
    [change] = [c for c in changes if c.kind == "weights" and c.detail.get("status")]
    assert change.path == NAME and change.severity == "warning" and change.security
    assert f"missing part: {PARTS[1]}" in change.summary and "2 of 3 parts present, 1 removed" in change.summary
    assert change.detail["split"] == {"name": NAME, "parts": 3, "paths": [PARTS[0], PARTS[2]], "missing": [PARTS[1]]}
    [model] = [c for c in changes if c.kind == "weights" and not c.detail.get("status")]
    assert model.path == NAME and "8 tensors removed" in model.summary


def test_show_json_groups_the_parts_as_one_model(split_app, served, database_url, tmp_path):
    """`show --json`: each part keeps its `gguf` facts (with `split`); `gguf_models` holds the split once, its
    tensors and parameters summed over the parts, and names a missing part."""
    for n in (1, 2, 3):
        _changes_at(split_app, served, n)
    config = tmp_path / "hubwatch.toml"
    config.write_text(f'[hub]\nendpoint = "{served.endpoint}"\n[storage]\nurl = "{database_url}"\n')
    shown = {}
    for n in (2, 3):
        served.set_head(REPO, n)
        result = run_cli("show", REPO, served.head_sha(REPO), "--json", config=config)
        assert result.returncode == 0, result.stderr
        shown[n] = json.loads(result.stdout)
    parts = {f["path"]: f["gguf"] for f in shown[2]["files"] if "gguf" in f}
    assert sorted(parts) == PARTS and parts[PARTS[1]]["split"]["no"] == 1
    [model] = shown[2]["gguf_models"]
    assert (model["model"], model["paths"], model["missing"]) == (NAME, PARTS, [])
    assert model["tensors"] == sum(p["tensors"] for p in parts.values())
    assert model["parameters"] == sum(p["parameters"] for p in parts.values()) and model["architecture"] == "llama"
    [after] = shown[3]["gguf_models"]
    assert after["missing"] == [PARTS[1]] and after["tensors"] < model["tensors"]
