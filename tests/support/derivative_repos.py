"""A base's family for the derivative tests and the benchmark: the bundled Llama 3.1 8B Instruct history as
the base (its real commits: the template fix of 2024-07-23, then the stop on <|eom_id|>), and derivatives
with their own histories built from its real files: a GGUF that catches up with the template fix on
re-upload, an AWQ copy that never does, a fine-tune that re-indented the fixed template, and the bad ones
(gated, a malformed card, a card naming another base)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.gguf_files import GgufFile, GgufSpec, gguf_header, write_gguf_repo
from tests.support.settings import settings_for
from tests.support.synthetic_repos import write_repo
from tracker.cli.app import App
from tracker.standins.replay.control import BUNDLED_ROOT

BASE = "meta-llama/Llama-3.1-8B-Instruct"
BASE_ROOT = BUNDLED_ROOT / BASE / "commits"
GGUF = "bartowski/Llama-3.1-8B-Instruct-GGUF"
AWQ = "hugging-quants/Llama-3.1-8B-Instruct-AWQ-INT4"
FINETUNE = "someone/Llama-3.1-8B-Instruct-tuned"
GATED = "locked/Llama-3.1-8B-Instruct-gated"
MALFORMED = "odd/Llama-3.1-8B-Instruct-odd-card"
ELSEWHERE = "other/Llama-3.1-8B-Instruct-from-elsewhere"


def base_file(commit: str, path: str) -> str:
    """A file of the base's bundled history as that commit wrote it."""
    return (BASE_ROOT / commit / "files" / path).read_text(encoding="utf-8")


def base_template(commit: str) -> str:
    return json.loads(base_file(commit, "tokenizer_config.json"))["chat_template"]


def card(base: Any, relation: str | None = None) -> str:
    """A README.md whose front matter names `base` (any YAML value) and `relation`."""
    lines = ["---", f"base_model: {json.dumps(base)}"]
    if relation:
        lines.append(f"base_model_relation: {relation}")
    return "\n".join([*lines, "---", "# a derivative", ""])


def _set_repo(root: Path, repo_id: str, **meta: Any) -> None:
    path = root / repo_id / "repo.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **meta}, indent=2))


def _gguf(template: str) -> GgufFile:
    return GgufFile(gguf_header(GgufSpec(name="Llama 3.1 8B Instruct", templates={"default": template})))


def write_family(root: Path) -> None:
    """The derivatives, each with its own history, under `root` (the base comes from the bundled root)."""
    old, fixed = base_template("0002-upload-folder-using-huggingface-hub"), base_template("0003-update-tokenizer-config-json")
    write_gguf_repo(root, GGUF, [
        {"title": "Upload quants", "files": {"README.md": card(BASE, "quantized")}, "gguf": {"Llama-Q4_K_M.gguf": _gguf(old)}},
        {"title": "Re-upload with the fixed template", "gguf": {"Llama-Q4_K_M.gguf": _gguf(fixed)}},
    ])
    copied = {p: base_file("0002-upload-folder-using-huggingface-hub", p)
              for p in ("tokenizer_config.json", "generation_config.json", "special_tokens_map.json")}
    write_repo(root, AWQ, [{"title": "AWQ", "files": {**copied, "README.md": card(BASE, "quantized")}}])
    tuned_config = json.loads(base_file("0003-update-tokenizer-config-json", "tokenizer_config.json"))
    tuned_config["chat_template"] = fixed.replace("\n", "\n  ")  # re-indented: the same template, loosely
    write_repo(root, FINETUNE, [{"title": "Fine-tune", "files": {
        "tokenizer_config.json": tuned_config, "generation_config.json": {"temperature": 0.2, "eos_token_id": 128009},
        "README.md": card(BASE, "finetune")}}])
    write_repo(root, GATED, [{"title": "gated", "files": {**copied, "generation_config.json": {"temperature": 0.7},
                                                           "README.md": card(BASE, "quantized")}}])
    _set_repo(root, GATED, gated="manual")
    write_repo(root, MALFORMED, [{"title": "odd", "files": {**copied, "README.md": card([BASE, 42], "quantized")}}])
    write_repo(root, ELSEWHERE, [{"title": "other", "files": {**copied, "README.md": card(BASE, "finetune")}}])
    for downloads, repo_id in enumerate((ELSEWHERE, MALFORMED, GATED, FINETUNE, AWQ, GGUF)):
        _set_repo(root, repo_id, downloads=1000 * (downloads + 1))


CYCLE_BASE = "loop/Model-B"
CYCLE_DERIVED = "loop/Model-A"
CYCLE_QUANT = "loop/Model-B-AWQ"
GHOST_NAMED = "ghosts/Llama-3.1-8B-Instruct-merge"
MISSING_BASE = "nobody/does-not-exist"


def write_bad_family(root: Path) -> None:
    """The bad input the first pass must name while checking the rest: a cycle (B's card names A as its base,
    A's names B) beside a good quantization of B, and a Llama derivative whose card's base_model is a list
    naming, beside the base, a repo the Hub does not have."""
    copied = {p: base_file("0002-upload-folder-using-huggingface-hub", p)
              for p in ("tokenizer_config.json", "generation_config.json", "special_tokens_map.json")}
    write_repo(root, CYCLE_BASE, [{"title": "B", "files": {**copied, "README.md": card(CYCLE_DERIVED, "finetune")}}])
    write_repo(root, CYCLE_DERIVED, [{"title": "A", "files": {**copied, "README.md": card(CYCLE_BASE, "finetune")}}])
    write_repo(root, CYCLE_QUANT, [{"title": "B quantized", "files": {**copied, "README.md": card(CYCLE_BASE, "quantized")}}])
    write_repo(root, GHOST_NAMED, [{"title": "merge", "files": {**copied, "README.md": card([BASE, MISSING_BASE], "quantized")}}])
    for downloads, repo_id in enumerate((CYCLE_DERIVED, CYCLE_QUANT, GHOST_NAMED)):
        _set_repo(root, repo_id, downloads=500 + downloads)


REUPLOADED = "fixer/Llama-3.1-8B-Instruct-AWQ-reuploaded"


def write_reuploads(root: Path) -> None:
    """A quantization whose publisher keeps re-uploading, for the derivatives' own histories: the base's old
    template first, then two commits (a card touch-up, then the base's fixed template in tokenizer_config.json)."""
    old = {p: base_file("0002-upload-folder-using-huggingface-hub", p)
           for p in ("tokenizer_config.json", "generation_config.json", "special_tokens_map.json", "config.json")}
    fixed = base_file("0003-update-tokenizer-config-json", "tokenizer_config.json")
    write_repo(root, REUPLOADED, [
        {"title": "AWQ INT4", "files": {**old, "README.md": card(BASE, "quantized")}},
        {"title": "Card: how to serve it", "files": {"README.md": card(BASE, "quantized") + "Serve it with vLLM.\n"}},
        {"title": "Re-upload with the fixed chat template", "files": {"tokenizer_config.json": fixed}},
    ])
    _set_repo(root, REUPLOADED, downloads=500)


@contextmanager
def following_app(endpoint: str, database_url: str) -> Iterator[App]:
    """An App on the replay at `endpoint` with BASE watched and its quantized and finetune derivatives followed."""
    app = App(settings_for(endpoint, database_url))  # type: ignore[arg-type]
    app.store.watches.add_watch(BASE, "main", 900)
    app.store.derivatives.follow(BASE, ("quantized", "finetune"), 100)
    try:
        yield app
    finally:
        app.store.engine.dispose()


def poll_before_and_after_the_fix(folder: Path, roots: list[Path], *watch_add: str) -> Path:
    """A SQLite database under `folder` in which `hubwatch watch add BASE WATCH_ADD...` was run and polled with the
    base at its second commit, then polled again at its fourth (the template fix, then the eom stop), each through
    the `hubwatch` command; tests copy it (copy_sqlite) and serve `roots` with the base at its fourth commit."""
    from tests.support.cli import run_cli, write_config
    from tracker.standins.replay.control import ReplayServer

    database = folder / "polled.db"
    server = ReplayServer(roots=roots)
    server.set_head(BASE, 2)
    with server:
        config = write_config(folder / "hubwatch.toml", server.endpoint, database)
        added = run_cli("watch", "add", BASE, *watch_add, config=config)
        assert added.returncode == 0, added.stderr
        first = run_cli("poll", config=config)
        assert first.returncode == 0, first.stderr
        server.set_head(BASE, 4)
        polled = run_cli("poll", config=config)
        assert polled.returncode == 0, polled.stderr
    return database
