"""Dependency facts of one revision, read from its Snapshot: pure, no I/O beyond the bundled table.

- writer versions: `transformers_version` (config.json, generation_config.json, in any folder and nested
  configs), the `__version__` of config_sentence_transformers.json, `_diffusers_version` (model_index.json
  and diffusers component configs);
- `library_name` and `tags` of the model card's front matter;
- requirements.txt, line by line (parsed by tracker/revision/requirements.py): exact pins become dependencies;
  ranges, URLs, VCS and pip options are kept as text with the reason they give no version to check;
- the imports of every .py file (ast), mapped to PyPI names (`data/import_names.json`); code that does
  not parse gives a reason instead;
- repo features the advisory rules look at (pickle weights, chat templates, custom code...);
- what model it is, for advisories scoped to a model (scope.py): the `model_type` of every config.json
  (and of its sub-configs), `architectures`, the classes `auto_map` names, tokenizer classes, the file list.

Nothing here raises on bad input: what cannot be read becomes a `Problem` and the rest is kept.
"""

from __future__ import annotations

import ast
import json
import posixpath
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from tracker.advisories.records import parse_version
from tracker.differs.files import front_matter
from tracker.formats.gguf import is_gguf
from tracker.revision.classify import (
    REQUIREMENTS_NAMES,
    is_chat_template_file,
    is_pickle,
    is_safetensors,
)
from tracker.revision.requirements import RequirementLine, parse_requirements
from tracker.revision.snapshot import Snapshot

IMPORT_TABLE = Path(__file__).parent / "data" / "import_names.json"
TRANSFORMERS_FILES = frozenset({"config.json", "generation_config.json"})
DIFFUSERS_FILES = frozenset({"model_index.json", "config.json", "scheduler_config.json"})
SENTENCE_TRANSFORMERS_FILE = "config_sentence_transformers.json"
SENTENCE_TRANSFORMERS_NAMES = {"sentence_transformers": "sentence-transformers", "transformers": "transformers",
                               "pytorch": "torch", "torch": "torch"}
MODEL_CARD = "README.md"
MAX_IMPORTS = 500


@dataclass(frozen=True)
class Problem:
    """Something of the revision that could not be read, and why (shown to a person as is)."""

    path: str
    reason: str


@dataclass(frozen=True)
class Dependency:
    """A package version the repo names: `version` as written, `sources` where (path:key or path:line)."""

    package: str
    version: str
    sources: tuple[str, ...]
    role: str = "writer"  # writer: the version that wrote the files; pin: requirements.txt

    @property
    def query_version(self) -> str | None:
        return parse_version(self.version).query_text

    @property
    def note(self) -> str | None:
        return parse_version(self.version).note


@dataclass(frozen=True)
class ImportFact:
    """A module a .py file of the repo imports, with the PyPI distribution it comes from."""

    path: str
    line: int
    module: str
    package: str
    mapping: str  # table | assumed
    optional: bool = False  # inside try/except ImportError
    dynamic: bool = False  # importlib.import_module("...") / __import__("...")


@dataclass(frozen=True)
class RepoFacts:
    dependencies: tuple[Dependency, ...] = ()
    library_name: str | None = None
    tags: tuple[str, ...] = ()
    requirements: tuple[RequirementLine, ...] = ()
    imports: tuple[ImportFact, ...] = ()
    features: frozenset[str] = frozenset()
    problems: tuple[Problem, ...] = ()
    # What model this is (facts stored before these fields existed read back with model_facts False).
    model_types: tuple[str, ...] = ()  # root config.json first, then sub-configs and other folders
    architectures: tuple[str, ...] = ()
    auto_map: tuple[str, ...] = ()  # class references, as written ("org/repo--modeling_x.XModel")
    tokenizer_classes: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    model_facts: bool = False

    @property
    def model_known(self) -> bool:
        """Whether the revision says what model it is (a model_type, an architecture or an auto_map)."""
        return self.model_facts and bool(self.model_types or self.architectures or self.auto_map)

    def packages(self) -> frozenset[str]:
        """Every package the revision names: writer versions, requirements, imports."""
        names = {d.package for d in self.dependencies} | {i.package for i in self.imports}
        names |= {r.name for r in self.requirements if r.name}
        return frozenset(names)

    def versions(self) -> list[tuple[str, str]]:
        """Distinct (package, version to query) pairs; versions PEP 440 cannot parse are left out."""
        pairs = {(d.package, v) for d in self.dependencies if (v := d.query_version) is not None}
        return sorted(pairs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dependencies": [asdict(d) | {"sources": list(d.sources)} for d in self.dependencies],
            "library_name": self.library_name,
            "tags": list(self.tags),
            "requirements": [asdict(r) for r in self.requirements],
            "imports": [asdict(i) for i in self.imports],
            "features": sorted(self.features),
            "problems": [asdict(p) for p in self.problems],
            "model_types": list(self.model_types),
            "architectures": list(self.architectures),
            "auto_map": list(self.auto_map),
            "tokenizer_classes": list(self.tokenizer_classes),
            "files": list(self.files),
            "model_facts": self.model_facts,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RepoFacts:
        return cls(
            dependencies=tuple(
                Dependency(d["package"], d["version"], tuple(d["sources"]), d.get("role", "writer"))
                for d in data.get("dependencies", [])
            ),
            library_name=data.get("library_name"),
            tags=tuple(data.get("tags", [])),
            requirements=tuple(RequirementLine(**r) for r in data.get("requirements", [])),
            imports=tuple(ImportFact(**i) for i in data.get("imports", [])),
            features=frozenset(data.get("features", [])),
            problems=tuple(Problem(**p) for p in data.get("problems", [])),
            model_types=tuple(data.get("model_types", [])),
            architectures=tuple(data.get("architectures", [])),
            auto_map=tuple(data.get("auto_map", [])),
            tokenizer_classes=tuple(data.get("tokenizer_classes", [])),
            files=tuple(data.get("files", [])),
            model_facts=bool(data.get("model_facts", False)),
        )


def extract_facts(snapshot: Snapshot) -> RepoFacts:
    """Everything above, for one snapshot (worked out once per Snapshot object: the ingest asks for a revision's
    facts again when it is the next revision's parent)."""
    return snapshot.derived("advisory_facts", _extract_facts)


def _extract_facts(snapshot: Snapshot) -> RepoFacts:
    problems: list[Problem] = []
    found: dict[tuple[str, str, str], list[str]] = {}

    def add(package: str, version: Any, source: str, role: str = "writer") -> None:
        text = "" if version is None else str(version)
        found.setdefault((canonicalize_name(package), text, role), []).append(source)
        parsed = parse_version(text)
        if parsed.version is None:
            note = "the version is null" if version is None else parsed.note
            problems.append(Problem(source.split(":")[0], f"{source}: {note}; not checked against OSV"))

    _writer_versions(snapshot, add, problems)
    requirements = _requirements(snapshot, problems)
    for req in requirements:
        if req.kind == "pin" and req.name:
            add(req.name, req.specifier.lstrip("=").strip(), f"{req.path}:{req.line}", role="pin")
    library_name, tags = _model_card(snapshot, problems)
    imports = _imports(snapshot, problems)
    dependencies = tuple(
        Dependency(package, version, tuple(dict.fromkeys(sources)), role)
        for (package, version, role), sources in sorted(found.items())
    )
    return RepoFacts(
        dependencies=dependencies,
        library_name=library_name,
        tags=tags,
        requirements=tuple(requirements),
        imports=tuple(imports),
        features=features_of(snapshot),
        problems=tuple(dict.fromkeys(problems)),
        **model_of(snapshot),
    )


# --- writer versions --------------------------------------------------------------------------------


def _json_files(snapshot: Snapshot, names: Iterable[str]) -> list[str]:
    wanted = set(names)
    return sorted(p for p in snapshot.files if posixpath.basename(p) in wanted)


def _read(snapshot: Snapshot, path: str, problems: list[Problem]) -> Any:
    doc, error = snapshot.read_json(path)
    if error is not None:
        problems.append(Problem(path, f"{path} not read: {error}"))
        return None
    return doc


def _writer_versions(snapshot: Snapshot, add: Any, problems: list[Problem]) -> None:
    read: dict[str, Any] = {}
    for path in _json_files(snapshot, TRANSFORMERS_FILES | DIFFUSERS_FILES | {SENTENCE_TRANSFORMERS_FILE}):
        read[path] = _read(snapshot, path, problems)
    for path, doc in read.items():
        base = posixpath.basename(path)
        if base in TRANSFORMERS_FILES:
            for key_path, value in _find_key(doc, "transformers_version"):
                add("transformers", value, f"{path}:{key_path}")
        if base in DIFFUSERS_FILES and isinstance(doc, dict) and "_diffusers_version" in doc:
            add("diffusers", doc["_diffusers_version"], f"{path}:_diffusers_version")
        if base == SENTENCE_TRANSFORMERS_FILE and isinstance(doc, dict):
            versions = doc.get("__version__")
            if isinstance(versions, dict):
                for key, value in versions.items():
                    package = SENTENCE_TRANSFORMERS_NAMES.get(str(key), str(key))
                    add(package, value, f"{path}:__version__.{key}")
            elif versions is not None:
                problems.append(Problem(path, f"{path}: __version__ is {type(versions).__name__}, not an object"))


def _find_key(doc: Any, key: str, prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted path, value) of every `key` in nested objects (composite configs carry their own)."""
    if not isinstance(doc, dict):
        return []
    out = [(f"{prefix}{key}", doc[key])] if key in doc else []
    for name, value in doc.items():
        if isinstance(value, dict):
            out.extend(_find_key(value, key, f"{prefix}{name}."))
    return out


# --- requirements.txt -------------------------------------------------------------------------------


def _requirements(snapshot: Snapshot, problems: list[Problem]) -> list[RequirementLine]:
    out: list[RequirementLine] = []
    for path in sorted(p for p in snapshot.files if posixpath.basename(p) in REQUIREMENTS_NAMES):
        text = snapshot.text(path)
        if text is None:
            problems.append(Problem(path, f"{path} not read: {snapshot.unavailable.get(path, 'not downloaded')}"))
            continue
        out.extend(parse_requirements(path, text))
    return out


# --- model card -------------------------------------------------------------------------------------


def _model_card(snapshot: Snapshot, problems: list[Problem]) -> tuple[str | None, tuple[str, ...]]:
    if MODEL_CARD not in snapshot.files:
        return None, ()
    text = snapshot.text(MODEL_CARD)
    if text is None:
        problems.append(Problem(MODEL_CARD, f"{MODEL_CARD} not read: {snapshot.unavailable.get(MODEL_CARD, 'not downloaded')}"))
        return None, ()
    meta, error = front_matter(text)
    if error:
        problems.append(Problem(MODEL_CARD, f"{MODEL_CARD}: {error}"))
    library = meta.get("library_name")
    tags = meta.get("tags")
    tag_list = [str(t) for t in tags] if isinstance(tags, list) else ([str(tags)] if isinstance(tags, str) else [])
    return (str(library) if library is not None else None), tuple(tag_list)


# --- imports of custom code -------------------------------------------------------------------------


@lru_cache(maxsize=1)
def import_table() -> dict[str, str]:
    return dict(json.loads(IMPORT_TABLE.read_text(encoding="utf-8"))["names"])


def _imports(snapshot: Snapshot, problems: list[Problem]) -> list[ImportFact]:
    code = sorted(p for p in snapshot.files if p.endswith(".py"))
    local = {posixpath.splitext(posixpath.basename(p))[0] for p in code}
    local |= {part for p in code for part in posixpath.dirname(p).split("/") if part}
    out: list[ImportFact] = []
    for path in code:
        text = snapshot.text(path)
        if text is None:
            problems.append(Problem(path, f"{path}: imports unknown, {snapshot.unavailable.get(path, 'not downloaded')}"))
            continue
        facts, error = imports_of(path, text, local)
        if error:
            problems.append(Problem(path, error))
        out.extend(facts)
    return out[:MAX_IMPORTS]


def imports_of(path: str, text: str, local: Iterable[str] = ()) -> tuple[list[ImportFact], str | None]:
    """The third-party imports of one Python file, or why they are unknown (the code does not parse)."""
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError) as err:
        where = f"line {err.lineno}: " if isinstance(err, SyntaxError) and err.lineno else ""
        message = err.msg if isinstance(err, SyntaxError) else str(err)
        return [], f"{path} does not parse as Python ({where}{message}); its imports are unknown"
    local_names = set(local)
    optional_lines = _optional_lines(tree)
    seen: dict[str, ImportFact] = {}
    for node in ast.walk(tree):
        for module, dynamic in _imported(node):
            top = module.split(".")[0]
            if not top or top in sys.stdlib_module_names or top in local_names or module in seen:
                continue
            package, mapping = _package_for(module)
            line = getattr(node, "lineno", 0)
            seen[module] = ImportFact(path, line, module, package, mapping, line in optional_lines, dynamic)
    return sorted(seen.values(), key=lambda f: (f.line, f.module)), None


def _imported(node: ast.AST) -> list[tuple[str, bool]]:
    if isinstance(node, ast.Import):
        return [(alias.name, False) for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        return [] if node.level or not node.module else [(node.module, False)]
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
            return [(node.args[0].value, True)]
    return []


def _optional_lines(tree: ast.AST) -> set[int]:
    """Lines inside a `try:` whose handlers catch ImportError (or everything)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        caught = [ast.unparse(h.type) if h.type else "" for h in node.handlers]
        if any(c == "" or "ImportError" in c or "ModuleNotFoundError" in c or "Exception" in c for c in caught):
            for stmt in node.body:
                lines.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return lines


def _package_for(module: str) -> tuple[str, str]:
    table = import_table()
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        if name in table:
            return table[name], "table"
    return canonicalize_name(parts[0]), "assumed"


# --- what model it is --------------------------------------------------------------------------------

MODEL_FILES = ("config.json", "tokenizer_config.json", "processor_config.json", "preprocessor_config.json")


MODEL_KEYS = ("model_type", "architectures", "tokenizer_class", "auto_map")


def _nested(doc: Any, keys: tuple[str, ...], out: dict[str, list[Any]] | None = None) -> dict[str, list[Any]]:
    """Every value of each of `keys` in nested objects, the top level first, in one walk of the document."""
    out = out if out is not None else {key: [] for key in keys}
    if not isinstance(doc, dict):
        return out
    for key in keys:
        if key in doc:
            out[key].append(doc[key])
    for value in doc.values():
        if isinstance(value, dict):
            _nested(value, keys, out)
    return out


def _strings(values: Iterable[Any]) -> list[str]:
    out: list[str] = []
    for value in values:
        items = value if isinstance(value, list | tuple) else [value]
        out.extend(str(v) for v in items if isinstance(v, str) and v)
    return out


def model_of(snapshot: Snapshot) -> dict[str, Any]:
    """The model facts of a snapshot: model types, architectures, auto_map targets, tokenizer classes,
    files (unreadable files are the Problems `_writer_versions` and friends already record)."""
    wanted = sorted((p for p in snapshot.files if posixpath.basename(p) in MODEL_FILES),
                    key=lambda p: (p.count("/"), p != "config.json", p))
    model_types: list[str] = []
    architectures: list[str] = []
    auto_map: list[str] = []
    tokenizers: list[str] = []
    for path in wanted:
        doc, _ = snapshot.read_json(path)
        if not isinstance(doc, dict):
            continue
        found = _nested(doc, MODEL_KEYS)
        model_types += _strings(found["model_type"])
        architectures += _strings(found["architectures"])
        tokenizers += _strings(found["tokenizer_class"])
        for mapping in found["auto_map"]:
            if isinstance(mapping, dict):
                auto_map += _strings(mapping.values())
            elif isinstance(mapping, list):  # old tokenizer_config.json: ["module.Slow", "module.Fast"]
                auto_map += _strings(mapping)
    return {
        "model_types": tuple(dict.fromkeys(model_types)),
        "architectures": tuple(dict.fromkeys(architectures)),
        "auto_map": tuple(dict.fromkeys(auto_map)),
        "tokenizer_classes": tuple(dict.fromkeys(tokenizers)),
        "files": tuple(sorted(snapshot.files)),
        "model_facts": True,
    }


# --- features the rules look at ---------------------------------------------------------------------


def features_of(snapshot: Snapshot) -> frozenset[str]:
    files = list(snapshot.files)
    found: set[str] = set()
    if any(posixpath.basename(p) == "config.json" for p in files):
        found.add("config")
    if any(is_pickle(p) for p in files):
        found.add("pickle_weights")
    if any(p.endswith(".pt2") for p in files):
        found.add("pt2_archive")
    if any(is_safetensors(p) for p in files):
        found.add("safetensors")
    if any(is_gguf(p) for p in files):
        found.add("gguf")
    if any(p.endswith(".py") for p in files):
        found.add("custom_code")
    if any(posixpath.basename(p) in REQUIREMENTS_NAMES for p in files):
        found.add("requirements")
    if any(is_chat_template_file(p) for p in files) or _json_has(
        snapshot, ("tokenizer_config.json", "processor_config.json"), "chat_template"
    ):
        found.add("chat_template")
    if _json_has(snapshot, ("config.json", "tokenizer_config.json"), "auto_map"):
        found.add("auto_map")
    return frozenset(found)


def _json_has(snapshot: Snapshot, paths: Iterable[str], key: str) -> bool:
    for path in paths:
        if path in snapshot.files:
            doc, _ = snapshot.read_json(path)
            if isinstance(doc, dict) and key in doc:
                return True
    return False


# --- diffing facts ------------------------------------------------------------------------------------


def diff_facts(old: RepoFacts | None, new: RepoFacts) -> list[dict[str, Any]]:
    """What changed in the facts between a parent revision and this one, each with a readable summary."""
    if old is None:
        return []
    out: list[dict[str, Any]] = []

    def versions(facts: RepoFacts) -> dict[tuple[str, str], set[str]]:
        grouped: dict[tuple[str, str], set[str]] = {}
        for d in facts.dependencies:
            grouped.setdefault((d.package, d.role), set()).add(d.version)
        return grouped

    before, after = versions(old), versions(new)
    for key in sorted(before.keys() | after.keys()):
        was, now = sorted(before.get(key, set())), sorted(after.get(key, set()))
        if was != now:
            package, role = key
            label = "pinned" if role == "pin" else "written by"
            summary = f"{package} ({label}): {', '.join(was) or '(none)'} -> {', '.join(now) or '(none)'}"
            out.append({"what": "dependency", "package": package, "role": role, "old": was, "new": now,
                        "summary": summary})
    for label, was_list, now_list in (
        ("model types", old.model_types, new.model_types),
        ("architectures", old.architectures, new.architectures),
        ("tokenizer classes", old.tokenizer_classes, new.tokenizer_classes),
    ):
        if old.model_facts and was_list != now_list:
            summary = f"{label}: {', '.join(was_list) or '(none)'} -> {', '.join(now_list) or '(none)'}"
            out.append({"what": label.replace(" ", "_"), "old": list(was_list), "new": list(now_list), "summary": summary})
    if old.library_name != new.library_name:
        out.append({"what": "library_name", "old": old.library_name, "new": new.library_name,
                    "summary": f"library_name: {old.library_name} -> {new.library_name}"})
    for label, was_set, now_set in (
        ("tags", set(old.tags), set(new.tags)),
        ("imports", {i.package for i in old.imports}, {i.package for i in new.imports}),
        ("requirements", {r.text for r in old.requirements}, {r.text for r in new.requirements}),
        ("features", set(old.features), set(new.features)),
    ):
        added, removed = sorted(now_set - was_set), sorted(was_set - now_set)
        if added or removed:
            parts = [f"+{a}" for a in added] + [f"-{r}" for r in removed]
            out.append({"what": label, "added": added, "removed": removed, "summary": f"{label}: {', '.join(parts)}"})
    return out
