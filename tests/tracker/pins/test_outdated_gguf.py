"""`hubwatch outdated --gguf PATH`: a local GGUF carrying the old Llama 3.1 template, against the watched base's
stored history, names the template fix it misses; the base comes from the header's general.base_model keys or
--base; a file that is not a regular GGUF is refused in one line."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import run_cli, write_config
from tests.support.databases import copy_sqlite
from tests.support.derivative_repos import BASE, base_template, poll_before_and_after_the_fix
from tests.support.gguf_files import GgufSpec, file_size, gguf_header
from tracker.standins.replay.control import BUNDLED_ROOT, ReplayServer

OLD = "0002-upload-folder-using-huggingface-hub"
FIXED = "0003-update-tokenizer-config-json"


@pytest.fixture(scope="module")
def polled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The base watched before its template fix and polled after it, once a module: each test copies the database."""
    return poll_before_and_after_the_fix(tmp_path_factory.mktemp("polled"), [BUNDLED_ROOT])


@pytest.fixture
def config(polled: Path, tmp_path: Path) -> Iterator[Path]:
    """A config over a copy of the polled database and a replay with the base at its fix and eom stop."""
    server = ReplayServer(roots=[BUNDLED_ROOT])
    server.set_head(BASE, 4)  # the template fix, then the eom stop
    with server:
        yield write_config(tmp_path / "hubwatch.toml", server.endpoint, copy_sqlite(polled, tmp_path / "hubwatch.db"))


def write_gguf_file(path: Path, template: str, base: str | None) -> Path:
    from gguf import GGUFValueType

    extra = {}
    if base is not None:
        extra = {"general.base_model.count": (1, GGUFValueType.UINT32),
                 "general.base_model.0.name": ("Llama 3.1 8B Instruct", GGUFValueType.STRING),
                 "general.base_model.0.organization": ("Meta Llama", GGUFValueType.STRING),
                 "general.base_model.0.repo_url": (f"https://huggingface.co/{base}", GGUFValueType.STRING)}
    spec = GgufSpec(name="Llama 3.1 8B Instruct", templates={"default": template}, extra=extra)
    header = gguf_header(spec)
    path.write_bytes(header)
    os.truncate(path, file_size(header, spec))  # the tensor data (zeros) after the header, as a whole file has
    return path


def test_an_old_template_names_the_fix_it_misses(config: Path, tmp_path: Path) -> None:
    """The base named in the header; text, --json and markdown all say the template is one change behind."""
    path = write_gguf_file(tmp_path / "Llama-Q4_K_M.gguf", base_template(OLD), BASE)
    text = run_cli("outdated", "--gguf", str(path), config=config)
    assert text.returncode == 0 and "note:" not in text.stderr, text.stderr
    assert f"(base {BASE}, from metadata)  behind" in text.stdout
    assert f"the base {BASE} changed its chat template at " in text.stdout and "(Update tokenizer_config.json)" in text.stdout
    data = json.loads(run_cli("outdated", "--gguf", str(path), "--json", config=config).stdout)["gguf"]
    assert (data["base_repo_id"], data["base_from"], data["status"]) == (BASE, "metadata", "behind")
    template = data["parts"]["chat_template"]
    assert template["status"] == "behind" and template["behind"] == 1 and len(template["missing"]) == 1
    assert f"this file carries the one from {template['matched_sha'][:12]}" in text.stdout
    markdown = run_cli("outdated", "--gguf", str(path), "--format", "markdown", config=config).stdout
    assert markdown.startswith(f"### `Llama-Q4_K_M.gguf` against `{BASE}`: behind") and "- chat template: the base" in markdown


def test_the_fixed_template_carries_the_newest_and_base_from_the_option(config: Path, tmp_path: Path) -> None:
    path = write_gguf_file(tmp_path / "fixed.gguf", base_template(FIXED), None)
    data = json.loads(run_cli("outdated", "--gguf", str(path), "--base", BASE, "--json", config=config).stdout)["gguf"]
    assert (data["base_from"], data["parts"]["chat_template"]["status"]) == ("--base", "carries")
    unknown = run_cli("outdated", "--gguf", str(path), config=config)
    assert unknown.returncode == 1 and "could not tell which base" in unknown.stdout


def test_a_template_of_its_own_is_diverged(config: Path, tmp_path: Path) -> None:
    path = write_gguf_file(tmp_path / "own.gguf", "{{ messages }}", BASE)
    data = json.loads(run_cli("outdated", "--gguf", str(path), "--json", config=config).stdout)["gguf"]
    assert data["parts"]["chat_template"]["status"] == "diverged" and data["status"] == "diverged"


def test_a_fifo_or_a_non_gguf_is_refused(config: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    refused = run_cli("outdated", "--gguf", str(fifo), config=config, timeout=60)
    assert refused.returncode == 1 and "named pipe (FIFO), not a regular file" in refused.stderr
    text = tmp_path / "notes.gguf"
    text.write_text("not a gguf")
    bad = run_cli("outdated", "--gguf", str(text), config=config)
    assert bad.returncode == 1 and "not a GGUF header hubwatch can read" in bad.stderr
    both = run_cli("outdated", "--gguf", str(text), "--lock", str(text), config=config)
    assert both.returncode == 2
