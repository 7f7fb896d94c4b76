"""Where transformers 5.x reads a snapshot's chat templates from, and the special tokens it passes them.

- tokenizer (`AutoTokenizer`): `chat_template.jinja` ("default") and `additional_chat_templates/<name>.jinja`
  (direct children only); when any of those files exists they replace the `chat_template` of
  tokenizer_config.json wholesale (a string, a list of {"name", "template"}, or a mapping). An
  additional `default.jinja` wins over `chat_template.jinja`.
- processor (`AutoProcessor`, only for repos that have one): the `chat_template` key of
  processor_config.json, else the legacy chat_template.json (which transformers refuses to combine with
  additional templates), else the additional files with `chat_template.jinja` winning "default".

`resolve` gives each loader's view (its templates, the stored ones it ignores, what it could not read);
`effective_templates` merges the two views; `special_tokens` reads the tokens `apply_chat_template` passes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from tracker.revision.snapshot import Snapshot

TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
CHAT_TEMPLATE_JINJA = "chat_template.jinja"
ADDITIONAL_DIR = "additional_chat_templates/"
CHAT_TEMPLATE_JSON = "chat_template.json"
PROCESSOR_CONFIG = "processor_config.json"
# A repo with one of these loads an AutoProcessor, whose templates are resolved on their own.
PROCESSOR_FILES = (PROCESSOR_CONFIG, "preprocessor_config.json", "video_preprocessor_config.json", CHAT_TEMPLATE_JSON)
SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
LOADERS = ("tokenizer", "processor")


@dataclass(frozen=True)
class Location:
    """Where a template's text is stored: a whole file (`key` empty) or a key of a JSON file."""

    path: str
    key: str = ""
    form: str = "file"  # "file", "string", "list" or "dict"

    def __str__(self) -> str:
        return f"{self.path}: {self.key}" if self.key else self.path


@dataclass(frozen=True)
class TemplateSource:
    """One effective chat template: its text, where it is stored, and which loaders use it."""

    name: str
    text: str
    locations: tuple[Location, ...]
    loaders: tuple[str, ...]

    @property
    def where(self) -> str:
        return ", ".join(str(loc) for loc in self.locations)

    def to_dict(self) -> dict[str, Any]:
        return {
            "locations": [str(loc) for loc in self.locations],
            "loaders": list(self.loaders),
            "sha256": hashlib.sha256(self.text.encode()).hexdigest(),
        }

    def merged(self, other: TemplateSource) -> TemplateSource:
        """This template, also at `other`'s locations and used by `other`'s loaders (the same text)."""
        extra = tuple(loc for loc in other.locations if loc not in self.locations)
        return replace(self, locations=self.locations + extra, loaders=self.loaders + other.loaders)


@dataclass
class LoaderView:
    """What one loader sees: its templates by name, the stored ones it ignores, and what it could not read."""

    templates: dict[str, TemplateSource] = field(default_factory=dict)
    shadowed: list[TemplateSource] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # path -> reason


@dataclass
class Resolution:
    """The templates of one snapshot, per loader (`views["processor"]` only for repos with a processor)."""

    views: dict[str, LoaderView]
    forms: frozenset[str]  # how every stored template is stored, effective or not


_Entry = tuple[str, Location, str]  # (name, location, text)


def _named(path: str, value: Any) -> tuple[list[_Entry], str | None]:
    """The templates under a JSON `chat_template` value: a string, a list of {name, template}, a mapping."""
    if value is None:
        return [], None
    if isinstance(value, str):
        return [("default", Location(path, "chat_template", "string"), value)], None
    if isinstance(value, list):
        entries: list[_Entry] = []
        for i, item in enumerate(value):
            if not (isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("template"), str)):
                return [], f"{path}: chat_template[{i}] is not a {{name, template}} pair of strings"
            entries.append((item["name"], Location(path, f"chat_template[name={item['name']}]", "list"), item["template"]))
        return entries, None
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return [(k, Location(path, f"chat_template[{k}]", "dict"), v) for k, v in value.items()], None
    return [], f"{path}: chat_template is not a string, a list of {{name, template}} or a mapping of names to templates"


def _json_templates(snapshot: Snapshot, path: str) -> tuple[list[_Entry], str | None]:
    if path not in snapshot.files:
        return [], None
    data, reason = snapshot.read_json(path)
    if reason is not None:
        return [], reason
    if not isinstance(data, dict):
        return [], f"{path} is not a JSON object"
    return _named(path, data.get("chat_template"))


def _template_files(snapshot: Snapshot) -> tuple[list[str], list[_Entry], dict[str, str]]:
    """The .jinja files transformers lists (additional ones first, sorted), their readable entries, errors."""
    additional = sorted(
        p for p in snapshot.files if p.startswith(ADDITIONAL_DIR) and p.endswith(".jinja") and "/" not in p[len(ADDITIONAL_DIR):]
    )
    paths = additional + ([CHAT_TEMPLATE_JINJA] if CHAT_TEMPLATE_JINJA in snapshot.files else [])
    entries: list[_Entry] = []
    errors: dict[str, str] = {}
    for path in paths:
        text = snapshot.text(path)
        if text is None:
            errors[path] = f"{path}: {snapshot.unavailable.get(path, 'not downloaded')}"
            continue
        name = "default" if path == CHAT_TEMPLATE_JINJA else path[len(ADDITIONAL_DIR):].removesuffix(".jinja")
        entries.append((name, Location(path), text))
    return paths, entries, errors


def _view(loader: str, effective: Iterable[_Entry], ignored: Iterable[_Entry], errors: dict[str, str]) -> LoaderView:
    view = LoaderView(errors=errors)
    for name, location, text in effective:  # later entries win, as in transformers' dict building
        view.templates[name] = TemplateSource(name, text, (location,), (loader,))
    view.shadowed = [TemplateSource(name, text, (location,), (loader,)) for name, location, text in ignored]
    return view


def resolve(snapshot: Snapshot) -> Resolution:
    """Every template of a snapshot as transformers 5.x's tokenizer and processor loaders resolve them."""
    paths, files, file_errors = _template_files(snapshot)
    tokenizer_config, config_error = _json_templates(snapshot, TOKENIZER_CONFIG)
    jinja_first = sorted(files, key=lambda e: e[1].path != CHAT_TEMPLATE_JINJA)  # chat_template.jinja, then additional
    if paths:
        views = {"tokenizer": _view("tokenizer", jinja_first, tokenizer_config, file_errors)}
    else:
        views = {"tokenizer": _view("tokenizer", tokenizer_config, [], {TOKENIZER_CONFIG: config_error} if config_error else {})}
    stored = files + tokenizer_config
    if any(p in snapshot.files for p in PROCESSOR_FILES):
        processor_config, processor_error = _json_templates(snapshot, PROCESSOR_CONFIG)
        legacy, legacy_error = _json_templates(snapshot, CHAT_TEMPLATE_JSON)
        has_additional = any(p != CHAT_TEMPLATE_JINJA for p in paths)
        if processor_error or processor_config:
            errors = {PROCESSOR_CONFIG: processor_error} if processor_error else {}
            views["processor"] = _view("processor", processor_config, legacy + files, errors)
        elif CHAT_TEMPLATE_JSON in snapshot.files and (legacy_error or has_additional):
            reason = legacy_error or "transformers refuses chat_template.json together with additional_chat_templates/*.jinja"
            views["processor"] = _view("processor", [], files, {CHAT_TEMPLATE_JSON: reason})
        elif CHAT_TEMPLATE_JSON in snapshot.files:
            views["processor"] = _view("processor", legacy, files, {})
        else:
            views["processor"] = _view("processor", files, [], file_errors)
        stored += processor_config + legacy
    return Resolution(views, frozenset(location.form for _, location, _ in stored))


def effective_templates(snapshot: Snapshot) -> dict[str, TemplateSource]:
    """Name -> template, "default" for the main one. A processor template whose text differs from the
    tokenizer's of the same name is listed as "<name> (processor)"."""
    views = resolve(snapshot).views
    merged = dict(views["tokenizer"].templates)
    for name, source in views["processor"].templates.items() if "processor" in views else ():
        mine = merged.get(name)
        if mine is None:
            merged[name] = source
        elif mine.text == source.text:
            merged[name] = mine.merged(source)
        else:
            merged[f"{name} (processor)"] = source
    return merged


def special_tokens(snapshot: Snapshot) -> dict[str, str]:
    """The special tokens `apply_chat_template` passes: tokenizer_config.json, overridden by
    special_tokens_map.json unless the config carries `added_tokens_decoder` (transformers' legacy path)."""
    config = snapshot.read_json(TOKENIZER_CONFIG)[0] if TOKENIZER_CONFIG in snapshot.files else None
    config = config if isinstance(config, dict) else {}
    sources = [config]
    if "added_tokens_decoder" not in config and SPECIAL_TOKENS_MAP in snapshot.files:
        mapping = snapshot.read_json(SPECIAL_TOKENS_MAP)[0]
        sources.append(mapping if isinstance(mapping, dict) else {})
    tokens: dict[str, str] = {}
    for source in sources:
        for key in SPECIAL_TOKEN_KEYS:
            value = source.get(key)
            value = value.get("content") if isinstance(value, dict) else value
            if isinstance(value, str):
                tokens[key] = value
    return tokens

