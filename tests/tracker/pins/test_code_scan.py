"""Pins found in a source tree (tracker.pins.code_scan): the forms read, and hostile trees."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tracker.pins.code_scan import scan_tree
from tracker.pins.code_write import Move, write_moves

SHA_A = "0123456789abcdef0123456789abcdef01234567"
SHA_B = "89abcdef0123456789abcdef0123456789abcdef"


def tree(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    root = tmp_path / "src"
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return root


@pytest.mark.parametrize(("name", "text", "repo", "line"), [
    ("a.py", f'from transformers import AutoModel\nm = AutoModel.from_pretrained("org/model", revision="{SHA_A}")\n', "org/model", 2),
    ("b.py", f'AutoModelForCausalLM.from_pretrained(\n    "org/model",\n    revision=\'{SHA_A}\',\n)\n', "org/model", 3),
    ("c.py", f'snapshot_download(repo_id="org/model", revision="{SHA_A}")\n', "org/model", 1),
    ("d.py", f'hf_hub_download("org/model", "config.json", revision="{SHA_A}")\n', "org/model", 1),
    ("e.py", f'pipeline("text-generation", model="org/model", revision="{SHA_A}")\n', "org/model", 1),
    ("f.py", f'pipeline("text-generation", "org/model", revision="{SHA_A}")\n', "org/model", 1),
    ("g.py", f'LLM(model="org/model", revision="{SHA_A}")\n', "org/model", 1),
    ("serve.sh", f"vllm serve org/model --revision {SHA_A} --port 8000\n", "org/model", 1),
    ("tgi.sh", f"text-generation-launcher --model-id org/model \\\n  --revision={SHA_A}\n", "org/model", 2),
    ("Dockerfile", f"RUN huggingface-cli download org/model --revision {SHA_A}\n", "org/model", 1),
    ("sglang.sh", f"python3 -m sglang.launch_server --model-path org/model \\\n  --revision {SHA_A} --tp 4\n", "org/model", 2),
    ("kserve.sh", f"python -m huggingfaceserver --model_name=m --model_id=org/model --model_revision={SHA_A}\n", "org/model", 1),
    ("compose.yaml", f'services:\n  tgi:\n    command: ["--model-id", "org/model", "--revision", "{SHA_A}"]\n', "org/model", 3),
    ("compose2.yml", f"services:\n  vllm:\n    command: --model org/model --revision {SHA_A}\n", "org/model", 3),
    ("values.yaml", f"model:\n  model_id: org/model\n  revision: {SHA_A}\n", "org/model", 3),
    ("models.toml", f'[serving]\nmodel_id = "org/model"\nrevision = "{SHA_A}"\n', "org/model", 3),
])
def test_each_pin_form_is_found_with_its_line(tmp_path: Path, name: str, text: str, repo: str, line: int) -> None:
    """Each pin form of Python calls, serving command lines, compose files, YAML and TOML gives its repo, sha and line."""
    scan = scan_tree(tree(tmp_path, {name: text}))
    assert [(p.repo_id, p.sha, p.line) for p in scan.pins] == [(repo, SHA_A, line)], (scan.problems, scan.unpinned)
    [pin] = scan.pins
    assert text[pin.start:pin.end] == SHA_A  # the exact characters --write replaces


@pytest.mark.parametrize(("text", "why"), [
    ('from_pretrained("org/model", revision="abc1234")\n', "is a short sha"),
    (f'from_pretrained("org/model", revision="{SHA_A.upper()}")\n', "is an uppercase sha"),
    (f'from_pretrained("org//model", revision="{SHA_A}")\n', "'org//model' is not a Hub repo id"),
    (f'from_pretrained("-org/model!", revision="{SHA_A}")\n', "is not a Hub repo id"),
    ('from_pretrained("org/model", revision="bad..ref")\n', "is neither a commit sha nor a branch name"),
])
def test_pins_that_cannot_be_checked_are_named(tmp_path: Path, text: str, why: str) -> None:
    """A short or uppercase sha, a malformed repo id or an impossible ref is a problem naming file and line."""
    scan = scan_tree(tree(tmp_path, {"m.py": text}))
    assert scan.pins == [] and len(scan.problems) == 1
    location, message = scan.problems[0]
    assert location == "m.py:1" and why in message


def test_branch_pins_unpinned_uses_and_what_is_not_a_model(tmp_path: Path) -> None:
    """A branch or tag revision is a branch pin; no revision is unpinned; a dataset is pinned under its key
    (`datasets/org/name`), a space, local paths and variables are not pins."""
    root = tree(tmp_path, {"m.py": (
        'AutoTokenizer.from_pretrained("org/a", revision="v1.0")\n'
        'AutoModel.from_pretrained("org/b")\n'
        'snapshot_download("org/data", repo_type="dataset", revision="main")\n'
        'AutoModel.from_pretrained("./checkpoints/run1")\n'
        'AutoModel.from_pretrained(name, revision=rev)\n'
        'load_dataset("org/data", revision="main")\n'
        'snapshot_download("org/demo", repo_type="space", revision="main")\n'
    ), "run.sh": "vllm serve org/c --port 8000\n"})
    scan = scan_tree(root)
    assert [(p.repo_id, p.branch, p.line) for p in scan.branch_pins] == [
        ("org/a", "v1.0", 1), ("datasets/org/data", "main", 3), ("datasets/org/data", "main", 6)]
    assert sorted((p.repo_id, p.location) for p in scan.unpinned) == [("org/b", "m.py:2"), ("org/c", "run.sh:1")]
    assert scan.pins == [] and scan.problems == []


def test_unparsable_binary_large_and_undecodable_files_are_named_and_skipped(tmp_path: Path) -> None:
    """A .py that does not parse, a binary, a file over the cap and one not UTF-8 are named; the good file is still read."""
    root = tree(tmp_path, {
        "broken.py": "def f(:\n    from_pretrained('org/x')\n",
        "blob.sh": b"\x7fELF\x00\x00revision",
        "huge.yaml": "x: 1\n" * 300_000,
        "latin.toml": "name = \"caf\xe9\"\n".encode("latin-1"),
        "good.py": f'from_pretrained("org/model", revision="{SHA_A}")\n',
    })
    scan = scan_tree(root)
    reasons = dict(scan.skipped)
    assert "does not parse as Python" in reasons["broken.py"]
    assert reasons["blob.sh"] == "binary, not text"
    assert "larger than" in reasons["huge.yaml"] and "not UTF-8" in reasons["latin.toml"]
    assert [p.repo_id for p in scan.pins] == ["org/model"]


def test_symlink_loops_and_links_out_of_the_tree_are_never_followed(tmp_path: Path) -> None:
    """A directory symlink loop is not walked, a file symlink out of the tree is refused by name, one inside is read."""
    outside = tmp_path / "secret.py"
    outside.write_text(f'from_pretrained("org/secret", revision="{SHA_B}")\n')
    root = tree(tmp_path, {"pkg/good.py": f'from_pretrained("org/model", revision="{SHA_A}")\n'})
    (root / "pkg" / "loop").symlink_to(root, target_is_directory=True)
    (root / "out.py").symlink_to(outside)
    (root / "again.py").symlink_to(root / "pkg" / "good.py")
    (root / "self.py").symlink_to(root / "self.py")
    scan = scan_tree(root)
    assert sorted(p.location for p in scan.pins) == ["again.py:1", "pkg/good.py:1"]
    reasons = dict(scan.skipped)
    assert "a symlink out of" in reasons["out.py"] and "org/secret" not in str(scan.pins)
    assert "symlink loop" in reasons["self.py"]


def test_a_tree_of_10000_files_is_scanned_skipping_vendored_folders(tmp_path: Path) -> None:
    """10,000 files (most not source, vendored folders pruned) are scanned in bounded time and the pins found:
    only the Python files are read. (The 100,000-file tree, and its speed, is benchmarks/bench_code_scan.py's.)"""
    root = tmp_path / "big"
    for d in range(10):
        folder = root / f"d{d}"
        folder.mkdir(parents=True)
        for f in range(1000):
            (folder / f"f{f}.{'py' if f % 10 == 0 else 'txt'}").write_bytes(b"x = 1\n")
    for vendored in ("node_modules", ".git", ".venv"):
        (root / vendored).mkdir()
        (root / vendored / "m.py").write_text(f'from_pretrained("org/vendored", revision="{SHA_B}")\n')
    (root / "d7" / "model.py").write_text(f'from_pretrained("org/model", revision="{SHA_A}")\n')
    started = time.monotonic()
    scan = scan_tree(root)
    elapsed = time.monotonic() - started
    assert [p.repo_id for p in scan.pins] == ["org/model"] and scan.files_read == 1_001
    assert elapsed < 30, elapsed  # a bound, not a benchmark: benchmarks/bench_code_scan.py prints the figure


def test_write_moves_exactly_the_literal_and_keeps_the_mode(tmp_path: Path) -> None:
    """--write replaces the revision's characters only, keeps a script's execute bit, and refuses a file changed since."""
    text = f"# pinned\nvllm serve org/model --revision {SHA_A} --port 8000  # keep\n"
    root = tree(tmp_path, {"serve.sh": text, "m.py": f'from_pretrained("org/model", revision="{SHA_A}")\n'})
    os.chmod(root / "serve.sh", 0o755)
    scan = scan_tree(root)
    (root / "m.py").write_text("changed\n")
    done, left = write_moves(root, [Move(p, SHA_B) for p in scan.pins])
    assert [m.pin.path for m in done] == ["serve.sh"] and left == [("m.py:1", "the file changed since it was scanned: scan again")]
    assert (root / "serve.sh").read_text() == text.replace(SHA_A, SHA_B)
    assert os.stat(root / "serve.sh").st_mode & 0o777 == 0o755


def test_missing_scan_path_is_an_error(tmp_path: Path) -> None:
    """A path that does not exist is a BadInput naming it."""
    from tracker.errors import BadInput

    with pytest.raises(BadInput, match="nothing to scan"):
        scan_tree(tmp_path / "nowhere")
