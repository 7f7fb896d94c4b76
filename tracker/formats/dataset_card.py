"""A dataset card's YAML front matter, read without trusting it: the licence, the `configs` (each config's
`data_files` per split, or its `data_dir`) and `dataset_info` (features per config, and each split's
`num_examples`), the facts a dataset revision is compared by.

The YAML is hostile until proven otherwise: the front matter is read up to `MAX_YAML_BYTES`, composed by
PyYAML's safe loader with at most `MAX_ALIASES` aliases and `MAX_NODES` nodes, then copied into plain values
with every alias expanded under `MAX_EXPANDED` nodes and `MAX_DEPTH` levels (an anchor that expands a
billion times, or refers to itself, stops there). A card past a limit is unreadable, with the reason; its
revision keeps everything else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from tracker.formats.hf_features import card_feature_types

MAX_YAML_BYTES = 2 * 2**20
MAX_ALIASES = 256
MAX_NODES = 500_000
MAX_EXPANDED = 500_000
MAX_DEPTH = 64
DEFAULT_CONFIG = "default"
DEFAULT_SPLIT = "train"
FRONT_MATTER = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)


class CardError(ValueError):
    """The card's YAML is not read: over a limit, not YAML, or not a mapping."""


@dataclass
class CardFacts:
    """What a dataset card declares. `configs`: {config: {"data_files": {split: [patterns]}, "data_dir",
    "default"}} as `configs:` says (empty when the card has none: the files decide); `info`: {config:
    {"features": {column: type} | None, "splits": {split: num_examples | None}}} from `dataset_info`."""

    licence: str | None = None
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    info: dict[str, dict[str, Any]] = field(default_factory=dict)
    gated_prompt: bool = False
    notes: list[str] = field(default_factory=list)
    verdict: str = "ok"  # ok | unreadable | none (no front matter)

    def to_dict(self) -> dict[str, Any]:
        return {"licence": self.licence, "configs": self.configs, "info": self.info,
                "gated_prompt": self.gated_prompt, "notes": self.notes, "verdict": self.verdict}


class _CountingLoader(yaml.SafeLoader):
    """The safe loader, refusing a document of more than MAX_NODES nodes or MAX_ALIASES aliases."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.nodes = self.aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise CardError(f"more than {MAX_ALIASES} YAML aliases")
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise CardError(f"more than {MAX_NODES:,} YAML nodes")
        return super().compose_node(parent, index)


def front_matter(text: str) -> str | None:
    """The YAML between the card's opening `---` and the next `---` line; None when the card has none."""
    if len(text) > MAX_YAML_BYTES * 4:  # a card this long is only searched at its start
        text = text[: MAX_YAML_BYTES + 64]
    found = FRONT_MATTER.match(text)
    return found.group(1) if found else None


def load_yaml(text: str) -> Any:
    """The YAML document as plain values (aliases expanded), within the limits; CardError past one."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_YAML_BYTES:
        raise CardError(f"the YAML front matter is over {MAX_YAML_BYTES // 2**20} MiB")
    loader = _CountingLoader(text)
    try:
        value = loader.get_single_data()
    except yaml.YAMLError as err:
        raise CardError(f"not YAML: {str(err).splitlines()[0][:200]}") from err
    finally:
        loader.dispose()
    return _expanded(value, [0], 0)


def _expanded(value: Any, count: list[int], depth: int) -> Any:
    """A copy of `value` with every shared node copied (what a reader of it sees), under the limits."""
    count[0] += 1
    if count[0] > MAX_EXPANDED:
        raise CardError(f"the YAML expands to more than {MAX_EXPANDED:,} values (aliases)")
    if depth > MAX_DEPTH:
        raise CardError(f"the YAML nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        return {_key(k): _expanded(v, count, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_expanded(v, count, depth + 1) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)  # dates, bytes: as text


def _key(key: Any) -> str:
    return key if isinstance(key, str) else str(key)


def read_card(text: str | bytes | None) -> CardFacts:
    """A README.md's facts. A card without front matter is `none`; one whose YAML breaks a limit is
    `unreadable` with the reason in `notes`; what it declares in a shape not understood is a note."""
    if text is None:
        return CardFacts(verdict="none", notes=["no README.md"])
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    yaml_text = front_matter(text)
    if yaml_text is None:
        return CardFacts(verdict="none", notes=["the card has no YAML front matter"])
    try:
        doc = load_yaml(yaml_text)
    except CardError as err:
        return CardFacts(verdict="unreadable", notes=[f"card YAML not read: {err}"])
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        return CardFacts(verdict="unreadable", notes=[f"card YAML is a {type(doc).__name__}, not a mapping"])
    facts = CardFacts(licence=_licence(doc), gated_prompt=any(k.startswith("extra_gated") for k in doc))
    facts.configs = _configs(doc.get("configs"), facts.notes)
    facts.info = _info(doc.get("dataset_info"), facts.notes)
    return facts


def _licence(doc: dict[str, Any]) -> str | None:
    value = doc.get("license")
    if isinstance(value, list):
        value = ", ".join(str(v) for v in value)
    if value is None:
        return None
    text = str(value)
    if text == "other" and isinstance(doc.get("license_name"), str):
        text = f"other ({doc['license_name']})"
    return text[:200]


def _configs(value: Any, notes: list[str]) -> dict[str, dict[str, Any]]:
    """`configs:` as {config: {"data_files": {split: [patterns]}, "data_dir": str | None, "default": bool}}."""
    if value is None:
        return {}
    if not isinstance(value, list):
        notes.append("configs is not a list: ignored")
        return {}
    out: dict[str, dict[str, Any]] = {}
    for item in value:
        if not isinstance(item, dict):
            notes.append("a config that is not a mapping: ignored")
            continue
        name = str(item.get("config_name", DEFAULT_CONFIG))
        data_dir = item.get("data_dir")
        out[name] = {"data_files": _data_files(item.get("data_files"), name, notes),
                     "data_dir": str(data_dir).strip("/") if data_dir else None, "default": item.get("default") is True}
    return out


def _data_files(value: Any, config: str, notes: list[str]) -> dict[str, list[str]]:
    """A config's data_files as {split: [patterns]}: a pattern or list of them is the train split; a list of
    {split, path} or a {split: path} mapping names each split."""
    if value is None:
        return {}
    if isinstance(value, str):
        return {DEFAULT_SPLIT: [value]}
    if isinstance(value, dict):
        return {str(split): _patterns(paths) for split, paths in value.items()}
    if isinstance(value, list):
        if all(isinstance(v, str) for v in value):
            return {DEFAULT_SPLIT: [str(v) for v in value]}
        out: dict[str, list[str]] = {}
        for entry in value:
            if isinstance(entry, dict) and "path" in entry:
                out.setdefault(str(entry.get("split", DEFAULT_SPLIT)), []).extend(_patterns(entry["path"]))
            else:
                notes.append(f"config {config}: a data_files entry without a path: ignored")
        return out
    notes.append(f"config {config}: data_files of an unknown shape: ignored")
    return {}


def _patterns(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)]


def _info(value: Any, notes: list[str]) -> dict[str, dict[str, Any]]:
    """`dataset_info` (one mapping, or a list with config_name) as {config: {"features", "splits"}}."""
    if value is None:
        return {}
    items = value if isinstance(value, list) else [value]
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        if not isinstance(item, dict):
            notes.append("a dataset_info entry that is not a mapping: ignored")
            continue
        name = str(item.get("config_name", DEFAULT_CONFIG))
        features, note = card_feature_types(item.get("features")) if "features" in item else (None, None)
        if note:
            notes.append(f"config {name}: {note}")
        splits: dict[str, int | None] = {}
        for split in item.get("splits") or []:
            if isinstance(split, dict) and "name" in split:
                count = split.get("num_examples")
                splits[str(split["name"])] = count if isinstance(count, int) and not isinstance(count, bool) else None
        out[name] = {"features": features, "splits": splits}
    return out
