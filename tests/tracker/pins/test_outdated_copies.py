"""`hubwatch outdated` names the base change a copy misses: a local model directory (`--local DIR`), and a lock
file's pin of a followed derivative; bad local input (malformed files, nothing to compare, a base not in the
history, a symlink out of the directory) is named, never a crash."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import run_cli, write_config
from tests.support.databases import copy_sqlite
from tests.support.derivative_repos import (
    AWQ,
    BASE,
    GGUF,
    base_file,
    base_template,
    card,
    poll_before_and_after_the_fix,
    write_family,
)
from tests.support.gguf_files import GgufSpec, gguf_header
from tracker.standins.replay.control import BUNDLED_ROOT, ReplayServer

OLD = "0002-upload-folder-using-huggingface-hub"
FIXED = "0003-update-tokenizer-config-json"


@pytest.fixture(scope="module")
def polled_family(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The family written, and the base watched with its family followed, polled before and after its template
    fix, once a module: the family's folder and the database each test copies."""
    folder = tmp_path_factory.mktemp("polled-family")
    write_family(folder / "family")
    return folder / "family", poll_before_and_after_the_fix(folder, [BUNDLED_ROOT, folder / "family"], "--derivatives", "quantized")


@pytest.fixture
def family(polled_family: tuple[Path, Path], tmp_path: Path) -> Iterator[tuple[ReplayServer, Path]]:
    """The base watched with its family followed, polled before and after its template fix (a copy of the
    module's database, a replay of its own with the base at the fix and eom stop)."""
    roots, database = polled_family
    server = ReplayServer(roots=[BUNDLED_ROOT, roots])
    server.set_head(BASE, 4)  # the template fix, then the eom stop
    with server:
        yield server, write_config(tmp_path / "hubwatch.toml", server.endpoint, copy_sqlite(database, tmp_path / "hubwatch.db"))


def copy_dir(root: Path, template_commit: str, readme: bool = True) -> Path:
    """A fine-tune or quantization copied to disk: the base's files of `template_commit`, and a card naming the base."""
    root.mkdir()
    (root / "tokenizer_config.json").write_text(base_file(template_commit, "tokenizer_config.json"))
    (root / "special_tokens_map.json").write_text(base_file(OLD, "special_tokens_map.json"))
    if readme:
        (root / "README.md").write_text(card(BASE, "finetune"))
    return root


def test_a_local_directory_with_the_old_template_names_the_fix_it_misses(family, tmp_path: Path) -> None:
    """Text, --json and markdown say the template is behind the fix; --fail-on warning fails on it."""
    _, config = family
    local = copy_dir(tmp_path / "tuned", OLD)
    text = run_cli("outdated", "--local", str(local), config=config)
    assert text.returncode == 0, text.stderr
    assert f"(base {BASE}, from card)  behind" in text.stdout
    assert "(Update tokenizer_config.json)" in text.stdout and "this copy carries the one from" in text.stdout
    data = json.loads(run_cli("outdated", "--local", str(local), "--json", config=config).stdout)["local"]
    assert (data["base_repo_id"], data["base_from"], data["status"]) == (BASE, "card", "behind")
    assert data["parts"]["chat_template"]["behind"] == 1 and data["parts"]["special_tokens"]["status"] == "carries"
    markdown = run_cli("outdated", "--local", str(local), "--format", "markdown", config=config).stdout
    assert markdown.startswith(f"### `tuned` against `{BASE}`: behind")
    assert run_cli("outdated", "--local", str(local), "--fail-on", "warning", config=config).returncode == 1
    assert run_cli("outdated", "--local", str(local), "--fail-on", "critical", config=config).returncode == 0


def test_a_local_gguf_directory_shows_generation_defaults_not_in_this_format(family, tmp_path: Path) -> None:
    """A directory of GGUF files is compared through the header; generation defaults are `not_in_format`."""
    _, config = family
    local = tmp_path / "quants"
    local.mkdir()
    (local / "model-Q4_K_M.gguf").write_bytes(gguf_header(GgufSpec(templates={"default": base_template(FIXED)})))
    data = json.loads(run_cli("outdated", "--local", str(local), "--base", BASE, "--json", config=config).stdout)["local"]
    assert data["base_from"] == "--base" and data["parts"]["chat_template"]["status"] == "carries"
    assert data["parts"]["generation"]["status"] == "not_in_format"
    text = run_cli("outdated", "--local", str(local), "--base", BASE, config=config).stdout
    assert "generation defaults: not in this format" in text
    tree = run_cli("tree", BASE, config=config).stdout  # the followed GGUF repo, likewise
    assert f"{'generation':15} not in this format" in tree


def test_bad_local_input_is_named(family, tmp_path: Path) -> None:
    """Malformed JSON is a note and the rest is read; a symlink out of the directory is refused; an empty
    directory, a base hubwatch has no history of, and a file for a directory each get a clear answer."""
    _, config = family
    local = copy_dir(tmp_path / "odd", FIXED)
    (local / "generation_config.json").write_text("{not json")
    secret = tmp_path / "secret.json"
    secret.write_text("{}")
    (local / "config.json").symlink_to(secret)
    result = run_cli("outdated", "--local", str(local), "--json", config=config)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)["local"]
    assert data["parts"]["chat_template"]["status"] == "carries"
    notes = "\n".join(data["notes"])
    assert "generation_config.json: not a JSON object" in notes
    assert f"refused the local file {local / 'config.json'}: a symlink out of" in notes
    assert "note: generation_config.json: not a JSON object" in run_cli("outdated", "--local", str(local), config=config).stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = run_cli("outdated", "--local", str(empty), "--base", BASE, config=config)
    assert nothing.returncode == 1 and "no parts" in nothing.stdout and "no behaviour part found" in nothing.stdout
    unknown = run_cli("outdated", "--local", str(copy_dir(tmp_path / "nocard", OLD, readme=False)), config=config)
    assert unknown.returncode == 1 and "could not tell which base" in unknown.stdout
    stranger = run_cli("outdated", "--local", str(local), "--base", "nobody/unwatched", config=config)
    assert stranger.returncode == 0  # the card names the base; --base is only a fallback
    orphan = copy_dir(tmp_path / "orphan", OLD, readme=False)
    missing = run_cli("outdated", "--local", str(orphan), "--base", "nobody/unwatched", config=config)
    assert missing.returncode == 1 and "hubwatch has no history of nobody/unwatched" in missing.stdout
    not_dir = run_cli("outdated", "--local", str(secret), config=config)
    assert not_dir.returncode == 1 and "is not a directory" in not_dir.stderr


def test_a_lock_pin_of_a_followed_derivative_names_the_base_change_it_misses(family, tmp_path: Path) -> None:
    """The AWQ copy pinned at its checked head: its stored parts say the template is behind the base's fix;
    --fail-on warning counts that as a finding."""
    server, config = family
    lock = tmp_path / "hubwatch.lock"
    lock.write_text(f'version = 1\n\n[[model]]\nrepo = "{AWQ}"\nbranch = "main"\nrevision = "{server.head_sha(AWQ)}"\n')
    data = json.loads(run_cli("outdated", "--lock", str(lock), "--json", config=config).stdout)
    [model] = data["models"]
    lineage = model["base_lineage"]
    assert (model["status"], lineage["base_repo_id"], lineage["status"]) == ("up_to_date", BASE, "behind")
    assert lineage["parts"]["chat_template"]["behind"] == 1 and lineage["base_from"] == f"derivative of {BASE} (quantized)"
    text = run_cli("outdated", "--lock", str(lock), config=config)
    assert text.returncode == 0 and "the pinned copy carries the one from" in text.stdout
    assert run_cli("outdated", "--lock", str(lock), "--fail-on", "warning", config=config).returncode == 1
    markdown = run_cli("outdated", "--lock", str(lock), "--format", "markdown", config=config).stdout
    assert "**Against its base**" in markdown and "chat template: the base" in markdown
    # hubwatch's OSV records of the copy still carrying what the base changed (the template fix, the eom stop): named
    # in the JSON, on SARIF's HW006, and in the BOM's VEX as exploitable with no fix yet
    records = lineage["osv_records"]
    assert len(records) >= 2 and len(set(records)) == len(records)
    sarif = json.loads(run_cli("outdated", "--lock", str(lock), "--format", "sarif", config=config).stdout)
    [hw006] = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "HW006"]
    assert hw006["properties"]["osv_ids"] == records and records[0] in hw006["message"]["text"]
    vex = json.loads(run_cli("bom", "--lock", str(lock), "--vex", config=config).stdout)
    analysed = {v["id"]: v["analysis"] for v in vex["vulnerabilities"] if v["id"] in records}
    assert set(analysed) == set(records)
    assert all(a["state"] == "exploitable" and a["response"] == ["can_not_fix"] for a in analysed.values())


def test_a_lock_pin_older_than_the_derivatives_history_is_read_from_the_hub(family, tmp_path: Path) -> None:
    """A derivative pinned before its first check (older than its stored history), with no recorded files and no
    cached snapshot: the pinned commit's files are read from the Hub and compared; when the Hub cannot give them,
    the copy is `not_compared`, and the reason is named."""
    server, config = family
    server.set_head(GGUF, 1)
    first = server.head_sha(GGUF)
    server.set_head(GGUF, 2)
    lock = tmp_path / "hubwatch.lock"
    lock.write_text(f'version = 1\n\n[[model]]\nrepo = "{GGUF}"\nbranch = "main"\nrevision = "{first}"\n')
    empty_cache = tmp_path / "no-cache"
    empty_cache.mkdir()
    no_cache = ("--cache-dir", str(empty_cache))
    server.inject(403, path=f"/tree/{first}", times=5)
    result = run_cli("outdated", "--lock", str(lock), *no_cache, "--json", config=config)
    [model] = json.loads(result.stdout)["models"]
    # The derivative's history starts at the head its family pass first saw: an older pin is named as such.
    assert model["status"] == "not_in_history" and model["base_lineage"]["status"] == "not_compared"
    lines = model["base_lineage"]["lines"]
    assert f"the files of {GGUF}@{first[:12]} are not known here" in lines[0]
    assert any(line.startswith(f"note: the files of {GGUF}@{first[:12]} could not be read from the Hub") for line in lines)
    server.clear_faults()
    result = run_cli("outdated", "--lock", str(lock), *no_cache, "--json", config=config)
    lineage = json.loads(result.stdout)["models"][0]["base_lineage"]
    assert lineage["status"] == "behind" and lineage["parts"]["chat_template"]["behind"] == 1
    assert lineage["parts"]["generation"]["status"] == "not_in_format"


def test_a_lock_pin_in_the_derivatives_own_history_is_read_from_it(tmp_path: Path, database_url: str) -> None:
    """The GGUF repo's first upload, stored by its family pass, then its re-upload ingested: a pin of the first
    upload is compared from the stored revision (a Hub read of its files would fail here), and the pin is behind
    its own head by the re-upload."""
    write_family(tmp_path / "family")
    server = ReplayServer(roots=[BUNDLED_ROOT, tmp_path / "family"])
    server.set_head(BASE, 2)
    server.set_head(GGUF, 1)
    with server:
        config = write_config(tmp_path / "hubwatch.toml", server.endpoint, database_url)
        assert run_cli("watch", "add", BASE, "--derivatives", "quantized", config=config).returncode == 0
        assert run_cli("poll", config=config).returncode == 0
        first = server.head_sha(GGUF)
        server.set_head(BASE, 4)
        server.set_head(GGUF, 2)
        assert run_cli("poll", config=config).returncode == 0
        lock = tmp_path / "hubwatch.lock"
        lock.write_text(f'version = 1\n\n[[model]]\nrepo = "{GGUF}"\nbranch = "main"\nrevision = "{first}"\n')
        empty_cache = tmp_path / "no-cache"
        empty_cache.mkdir()
        server.inject(403, path=f"/tree/{first}", times=5)
        result = run_cli("outdated", "--lock", str(lock), "--cache-dir", str(empty_cache), "--json", config=config)
        [model] = json.loads(result.stdout)["models"]
        assert (model["status"], model["commits_behind"]) == ("behind", 1)
        lineage = model["base_lineage"]
        assert lineage["status"] == "behind" and lineage["parts"]["chat_template"]["behind"] == 1
        assert not any("could not be read from the Hub" in line for line in lineage["lines"])


def cache_snapshot(cache: Path, repo_id: str, sha: str, files: dict[str, bytes]) -> Path:
    """An HF cache entry laid out as huggingface_hub lays it: refs/main, snapshot files as symlinks into blobs/."""
    folder = cache / ("models--" + repo_id.replace("/", "--"))
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(sha)
    (folder / "blobs").mkdir()
    snapshot = folder / "snapshots" / sha
    snapshot.mkdir(parents=True)
    for i, (name, data) in enumerate(files.items()):
        (folder / "blobs" / f"blob{i}").write_bytes(data)
        (snapshot / name).symlink_to(Path("../../blobs") / f"blob{i}")
    return snapshot


def test_an_hf_cache_pin_of_a_derivative_is_read_from_the_cached_snapshot(family, tmp_path: Path) -> None:
    """The GGUF repo cached at its first upload (old template), behind its head: the cached header's parts are
    compared (generation defaults not in this format); a cached file linking out of the repo folder is refused."""
    server, config = family
    server.set_head(GGUF, 1)
    first = server.head_sha(GGUF)
    server.set_head(GGUF, 2)
    cache = tmp_path / "hub-cache"
    header = gguf_header(GgufSpec(name="Llama 3.1 8B Instruct", templates={"default": base_template(OLD)}))
    snapshot = cache_snapshot(cache, GGUF, first, {"Llama-Q4_K_M.gguf": header})
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    (snapshot / "config.json").symlink_to(outside)
    result = run_cli("outdated", "--cache-dir", str(cache), "--json", config=config)
    data = json.loads(result.stdout)
    [model] = data["models"]
    lineage = model["base_lineage"]
    # The pin is older than the history the family pass stored for the derivative (its head when first seen).
    assert (model["status"], model["pinned_sha"], lineage["status"]) == ("not_in_history", first, "behind")
    assert lineage["parts"]["chat_template"]["behind"] == 1 and lineage["parts"]["generation"]["status"] == "not_in_format"
    assert any("a symlink out of" in line for line in lineage["lines"])
    text = run_cli("outdated", "--cache-dir", str(cache), config=config).stdout
    assert f"derivative of {BASE} (quantized): behind" in text and "generation defaults: not in this format" in text
