"""Pinned model (and dataset) revisions found in a source tree: Python read with `ast` (never imported or run), YAML
deployment files read as YAML (`tracker.pins.yaml_scan`), and `--revision` / `revision:` beside a model id
in shell scripts, TOML and Dockerfiles.

A tree someone else laid out is hostile input: the walk never follows a symlinked directory (no loops, no
way out of the tree), skips `.git`, `node_modules` and virtual environments, reads only regular files of
the kinds above up to `MAX_FILE_BYTES` (a symlinked file only when it resolves inside the tree), and stops
after `MAX_ENTRIES` directory entries. A file that cannot be read, is binary or does not parse is named
in `skipped` and the rest is scanned; a pin that cannot be checked (a malformed repo id, a short or
uppercase sha, a revision that is no branch name) is named in `problems`.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

from storage.kinds import repo_key, short_dataset_name
from tracker.errors import BadInput
from tracker.formats.local_files import clipped, decode_utf8, read_regular_file
from tracker.pins.pin_forms import FLAG_GROUPS, PACKAGED_BUILDERS, CodePin, CodeScan, looks_like_repo
from tracker.pins.yaml_scan import YAML_SUFFIXES, scan_yaml

__all__ = ["MAX_FILE_BYTES", "CodePin", "CodeScan", "scan_tree"]

MAX_FILE_BYTES = 1024 * 1024  # source files larger than this are generated or data: named, not read
MAX_ENTRIES = 1_000_000  # directory entries visited before the walk stops (and says so)
PRUNED_DIRS = frozenset({
    ".git", ".hg", ".svn", "node_modules", ".venv", "venv", "env", ".env", ".tox", ".nox", "__pycache__",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", "site-packages", "dist-packages", ".eggs", "build", "dist",
})
PYTHON_SUFFIXES = frozenset({".py", ".pyi"})
TEXT_SUFFIXES = frozenset({".sh", ".bash", ".zsh", ".yaml", ".yml", ".toml", ".dockerfile", ".containerfile"})
TEXT_NAMES = ("dockerfile", "containerfile")  # Dockerfile, Dockerfile.gpu, prod.Dockerfile (by suffix above)

# Calls that load a model by repo id: the function or method name, and the keyword naming the repo.
MODEL_CALLS = frozenset({"from_pretrained", "snapshot_download", "hf_hub_download", "pipeline", "get_hf_file_metadata",
                         "hf_hub_url", "list_repo_files", "model_info", "SentenceTransformer", "LLM"})
REPO_KEYWORDS = ("repo_id", "pretrained_model_name_or_path", "model", "model_name_or_path", "model_id")
# Calls that load a dataset by repo id (`load_dataset("org/name", revision=...)`): pinned under the dataset's key,
# `datasets/org/name`; so are the Hub calls above given `repo_type="dataset"`. Spaces are not followed.
DATASET_CALLS = frozenset({"load_dataset", "load_dataset_builder"})
DATASET_KEYWORDS = ("path", "repo_id")
NOT_FOLLOWED_REPO_TYPES = frozenset({"space"})
_QUICK = re.compile("|".join(sorted(MODEL_CALLS | DATASET_CALLS)))  # a .py file naming none of them is not parsed
# `hf download ORG/NAME --repo-type dataset` (and huggingface-cli's): the mention on that line is a dataset.
DATASET_FLAG_RE = re.compile(r"--repo[-_]type(?:[ \t]*=[ \t]*|[ \t]+)[\"']?dataset\b")

def _alternatives(flags: frozenset[str]) -> str:
    """A regex alternation of `flags`, longest first (`--model-id` before `--model`), each ending at a word's end."""
    return "|".join(re.escape(f) + r"(?![\w-])" for f in sorted(flags, key=len, reverse=True))


# Text forms: a model mention (`--model org/name`, `--model-id`, `vllm serve org/name`, `model: org/name`,
# `model_id = "org/name"`, `huggingface-cli download org/name`) and a revision (`--revision sha`,
# `revision: sha`, `revision = "sha"`, `"--revision", "sha"` in a compose list).
_SEP = r"""["']?[ \t]*(?:[=:,][ \t]*|[ \t]+)["']?"""  # within a line: `model:` above a block names nothing
_MODEL_FLAGS, _REVISION_FLAGS = FLAG_GROUPS[0]  # the serving runtimes' spellings, shared with the YAML reader
MODEL_TEXT_RE = re.compile(
    r"(?:(?<![\w-])(?:" + _alternatives(_MODEL_FLAGS) + r")"
    r"|(?<![\w-])(?:model|model_id|model_name|repo_id|model_name_or_path)"
    r"|\bvllm\s+serve|\b(?:huggingface-cli|hf)\s+download)" + _SEP + r"(?P<value>[^\s\"',\]\}#]+)"
)
REVISION_TEXT_RE = re.compile(
    r"(?:(?<![\w-])(?:" + _alternatives(_REVISION_FLAGS) + r")|(?<![\w-])revision)" + _SEP + r"(?P<value>[^\s\"',\]\}#]+)"
)
PAIR_LINES = 3  # a revision belongs to the nearest model mention at most this many lines away


def scan_tree(root: Path) -> CodeScan:
    """Every pin of the source files under `root` (a directory, or one file). Raises BadInput when `root`
    is neither."""
    if not root.exists():
        raise BadInput(f"nothing to scan at {root}")
    scan = CodeScan(root)
    if root.is_file():
        _scan_file(scan, root, root.name, root.parent)
        return scan
    visited = 0
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in PRUNED_DIRS and not _is_venv(Path(folder, d)))
        visited += len(dirs) + len(files)
        for name in sorted(files):
            if _wanted(name):
                path = Path(folder, name)
                _scan_file(scan, path, path.relative_to(root).as_posix(), root)
        if visited > MAX_ENTRIES:
            scan.skipped.append((str(root), f"stopped after {MAX_ENTRIES:,} entries: scan a smaller folder"))
            break
    return scan


def _wanted(name: str) -> bool:
    lower = name.lower()
    suffix = os.path.splitext(lower)[1]
    return suffix in PYTHON_SUFFIXES or suffix in TEXT_SUFFIXES or lower.startswith(TEXT_NAMES)


def _is_venv(path: Path) -> bool:
    return (path / "pyvenv.cfg").is_file()


def _scan_file(scan: CodeScan, path: Path, shown: str, root: Path) -> None:
    try:
        data = read_regular_file(path, MAX_FILE_BYTES, within=root, what="source file")
        if b"\0" in data[:8192]:
            scan.skipped.append((shown, "binary, not text"))
            return
        text = decode_utf8(data, path, "source file")
    except BadInput as err:  # RefusedFile too: a symlink out of the tree or in a loop, a FIFO, too large
        scan.skipped.append((shown, str(err)))
        return
    scan.files_read += 1
    suffix = os.path.splitext(path.name.lower())[1]
    if suffix in PYTHON_SUFFIXES:
        _scan_python(scan, text, shown)
    elif suffix in YAML_SUFFIXES:
        scan_yaml(scan, text, shown)
    else:
        _scan_text(scan, text, shown)


# -- Python --------------------------------------------------------------------------------------


def _scan_python(scan: CodeScan, text: str, shown: str) -> None:
    if not _QUICK.search(text):
        return
    try:
        tree = ast.parse(text, filename=shown)
    except (SyntaxError, ValueError) as err:
        scan.skipped.append((shown, f"does not parse as Python: {clipped(str(err), 120)}"))
        return
    except (RecursionError, MemoryError):
        scan.skipped.append((shown, "does not parse as Python: nested too deep"))
        return
    starts = _line_starts(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node.func) in MODEL_CALLS | DATASET_CALLS:
            pin = _python_pin(node, shown, text, starts)
            if pin is not None:
                scan.add(pin)


def _call_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _python_pin(call: ast.Call, shown: str, text: str, starts: list[int]) -> CodePin | None:
    """The pin of one call, or None when it names no repo by a literal (a variable, a local path, a space). A dataset
    (`load_dataset`, or `repo_type="dataset"`) is pinned under its key `datasets/org/name`."""
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    repo_type = keywords.get("repo_type")
    if isinstance(repo_type, ast.Constant) and repo_type.value in NOT_FOLLOWED_REPO_TYPES:
        return None
    dataset = _call_name(call.func) in DATASET_CALLS or (isinstance(repo_type, ast.Constant) and repo_type.value == "dataset")
    names = DATASET_KEYWORDS if _call_name(call.func) in DATASET_CALLS else REPO_KEYWORDS
    positional = call.args[1:] if _call_name(call.func) == "pipeline" else call.args  # pipeline(task, model)
    repo_node = next((keywords[k] for k in names if k in keywords), positional[0] if positional else None)
    repo = repo_node.value if isinstance(repo_node, ast.Constant) and isinstance(repo_node.value, str) else None
    if repo is None or not (looks_like_repo(repo) or _short_dataset(call, repo, keywords)):
        return None
    if dataset:
        repo = repo_key(repo, "dataset")
    revision_node = keywords.get("revision")
    if revision_node is None or (isinstance(revision_node, ast.Constant) and revision_node.value is None):
        return CodePin(shown, call.lineno, repo)
    if not (isinstance(revision_node, ast.Constant) and isinstance(revision_node.value, str)):
        return None  # a revision computed at run time: not ours to read
    revision = revision_node.value
    start, end = _literal_span(text, starts, revision_node, revision)
    return CodePin(shown, revision_node.lineno, repo, revision, start=start, end=end)


def _short_dataset(call: ast.Call, repo: str, keywords: dict[str, ast.expr]) -> bool:
    """A `load_dataset("wikitext", ..., revision=...)`: a dataset's canonical short name (no org), pinned under
    `datasets/wikitext` for `outdated` to resolve through the Hub (which redirects it to the org name)."""
    return (_call_name(call.func) in DATASET_CALLS and "revision" in keywords and repo not in PACKAGED_BUILDERS
            and short_dataset_name(repo) is not None and "/" not in repo)


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for match in re.finditer("\n", text):
        starts.append(match.end())
    return starts


def _literal_span(text: str, starts: list[int], node: ast.expr, value: str) -> tuple[int | None, int | None]:
    """The characters of `value` inside the string literal `node`, when the literal spells it verbatim
    (no escapes, no implicit concatenation); else (None, None) and `--write` leaves it."""
    if node.end_lineno != node.lineno or node.end_col_offset is None:
        return None, None
    line = text[starts[node.lineno - 1]:].split("\n", 1)[0]
    raw = line.encode("utf-8")
    before = len(raw[: node.col_offset].decode("utf-8", "replace"))
    literal = raw[node.col_offset: node.end_col_offset].decode("utf-8", "replace")
    inner = literal.lstrip("rRbBuU")
    if inner[:1] not in "\"'" or inner.count(value) != 1 or inner[1:-1] != value:
        return None, None
    offset = starts[node.lineno - 1] + before + (len(literal) - len(inner)) + 1
    return offset, offset + len(value)


# -- shell, TOML, Dockerfiles ---------------------------------------------------------------


def _scan_text(scan: CodeScan, text: str, shown: str) -> None:
    starts = _line_starts(text)
    models = [(m, _line_of(starts, m.start("value"))) for m in MODEL_TEXT_RE.finditer(text) if looks_like_repo(_clean(m["value"]))]
    revisions = [(m, _line_of(starts, m.start("value"))) for m in REVISION_TEXT_RE.finditer(text)]
    paired: set[int] = set()
    for rev, rev_line in revisions:
        near = [(abs(rev_line - line) + (0 if m.start() < rev.start() else 0.5), i) for i, (m, line) in enumerate(models)
                if i not in paired and abs(rev_line - line) <= PAIR_LINES]
        if not near:
            continue
        _, index = min(near)
        paired.add(index)
        model = models[index][0]
        value = rev["value"]
        scan.add(CodePin(shown, rev_line, _mentioned(text, starts, model, models[index][1]), value,
                         start=rev.start("value"), end=rev.end("value")))
    for index, (model, line) in enumerate(models):
        if index not in paired:
            scan.add(CodePin(shown, line, _mentioned(text, starts, model, line)))


def _mentioned(text: str, starts: list[int], match: re.Match[str], line: int) -> str:
    """The repo a text mention names: a dataset's key when its line says `--repo-type dataset`."""
    value = _clean(match["value"])
    end = starts[line] if line < len(starts) else len(text)
    if DATASET_FLAG_RE.search(text[starts[line - 1]:end]):
        return repo_key(value, "dataset")
    return value


def _clean(value: str) -> str:
    return value.rstrip(";)")


def _line_of(starts: list[int], offset: int) -> int:
    low, high = 0, len(starts) - 1
    while low < high:
        mid = (low + high + 1) // 2
        if starts[mid] <= offset:
            low = mid
        else:
            high = mid - 1
    return low + 1
