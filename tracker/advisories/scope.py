"""Which models an advisory concerns: many name the model class, tokenizer or file they are about
(Perceiver, MobileViTV2, MarianTokenizer, a Trainer checkpoint). The scope table is data
(`data/rules.json`, "scopes"); an advisory's scope is derived from its text and matched against a
revision's model facts (config `model_type`, sub-configs' model types, `architectures`, `auto_map`
targets, tokenizer classes, files present).

Nothing is dropped silently: an advisory whose text names no model, names a model the table does not
know, or whose records (aliases) disagree on scope concerns every model, and says why.
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from tracker.advisories.facts import RepoFacts
from tracker.advisories.records import Advisory
from tracker.advisories.rules import RULES_FILE


@dataclass(frozen=True)
class ScopeEntry:
    """One line of the scope table: the advisories whose text matches concern these models or files."""

    id: str
    about: str  # for a person: "Perceiver models"
    packages: frozenset[str]
    text: tuple[re.Pattern[str], ...]  # all must match
    names: frozenset[str]  # the names this entry covers, lower-case (for unknown-name detection)
    model_types: frozenset[str]
    architectures: tuple[str, ...]  # fnmatch patterns on architectures and auto_map class names
    tokenizer_classes: tuple[str, ...]  # fnmatch patterns
    files: tuple[str, ...]  # fnmatch patterns on paths (or base names)
    features: frozenset[str]
    fallback: bool  # used only when no specific entry matches
    rules: frozenset[str]  # empty: advisories judged by any rule

    def matches(self, text: str, package: str, rule: str | None) -> bool:
        if self.packages and canonicalize_name(package) not in self.packages:
            return False
        if self.rules and rule not in self.rules:
            return False
        return bool(self.text) and all(p.search(text) for p in self.text)


@dataclass(frozen=True)
class ScopeTable:
    entries: tuple[ScopeEntry, ...]
    mentions: tuple[re.Pattern[str], ...]  # how a text names a model: group "name"
    ignore: frozenset[str] = frozenset()  # mentioned names that are no model ("PreTrained")


@dataclass(frozen=True)
class Scope:
    """What an advisory concerns. `entries` empty: every model, and `reason` says why."""

    entries: tuple[ScopeEntry, ...] = ()
    reason: str = ""

    @property
    def general(self) -> bool:
        return not self.entries

    def about(self) -> str:
        return "; ".join(e.about for e in self.entries) or "every model"

    def to_dict(self) -> dict[str, Any]:
        return {"scopes": [e.id for e in self.entries], "about": self.about(), "reason": self.reason}


@dataclass(frozen=True)
class Relevance:
    """Whether an advisory concerns one revision, and why (always said, relevant or not)."""

    relevant: bool
    reason: str
    scoped: bool = False  # decided by a scope entry (the advisory names models or files)
    assumed: bool = False  # counted only because the revision's model is unknown: advice, never an event


def _entry(raw: dict[str, Any]) -> ScopeEntry:
    names = {str(n).lower() for n in raw.get("names", [])}
    return ScopeEntry(
        id=str(raw["id"]),
        about=str(raw["about"]),
        packages=frozenset(canonicalize_name(p) for p in raw.get("packages", [])),
        text=tuple(re.compile(p, re.IGNORECASE) for p in raw.get("text", [])),
        names=frozenset(names),
        model_types=frozenset(str(m) for m in raw.get("model_types", [])),
        architectures=tuple(str(a) for a in raw.get("architectures", [])),
        tokenizer_classes=tuple(str(t) for t in raw.get("tokenizer_classes", [])),
        files=tuple(str(f) for f in raw.get("files", [])),
        features=frozenset(str(f) for f in raw.get("features", [])),
        fallback=bool(raw.get("fallback", False)),
        rules=frozenset(str(r) for r in raw.get("rules", [])),
    )


def load_scopes(path: Path | str = RULES_FILE) -> ScopeTable:
    """The scope table of a rules file (the bundled one by default)."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    raw = doc.get("scopes", {})
    entries = tuple(_entry(e) for e in raw.get("entries", []))
    ids = [e.id for e in entries]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: scope ids must be unique")
    for entry in entries:
        if not (entry.model_types or entry.architectures or entry.tokenizer_classes or entry.files or entry.features):
            raise ValueError(f"{path}: scope {entry.id} names no model type, architecture, tokenizer, file or feature")
    mentions = tuple(re.compile(p) for p in raw.get("mentions", []))
    return ScopeTable(entries, mentions, frozenset(str(n).lower() for n in raw.get("ignore", [])))


@lru_cache(maxsize=1)
def default_scopes() -> ScopeTable:
    return load_scopes()


NO_SCOPES = ScopeTable((), ())  # every advisory concerns every model (how hubwatch judged before scopes)


def _record_text(record: Any) -> str:
    return f"{record.get('summary') or ''}\n{record.get('details') or ''}".strip()


def _record_scope(record: Any, package: str, table: ScopeTable, rule: str | None) -> Scope:
    text = _record_text(record)
    rid = record.get("id")
    if not text:
        return Scope(reason=f"{rid} has no summary or details to scope it by: it concerns every model")
    specific = tuple(e for e in table.entries if not e.fallback and e.matches(text, package, rule))
    known = {n for e in specific for n in e.names} | table.ignore
    unknown = sorted({m.group("name") for p in table.mentions for m in p.finditer(text)
                      if m.group("name").lower() not in known})
    if unknown:
        return Scope(reason=f"{rid} names {', '.join(unknown)}, which hubwatch's scope table does not know: "
                            "it concerns every model")
    if specific:
        return Scope(specific, f"{rid} names {'; '.join(e.about for e in specific)}")
    fallback = next((e for e in table.entries if e.fallback and e.matches(text, package, rule)), None)
    if fallback is not None:
        return Scope((fallback,), f"{rid} names no model; it concerns {fallback.about}")
    return Scope(reason=f"{rid} names no model, tokenizer or file: it concerns every model")


_SCOPED: dict[tuple[Any, ...], Scope] = {}


def scope_of(advisory: Advisory, package: str, rule: str | None = None, table: ScopeTable | None = None) -> Scope:
    """The scope of an advisory for one package (judged by `rule`): its records' scopes, which must agree."""
    table = default_scopes() if table is None else table
    key = (id(table), advisory.ids, advisory.modified, advisory.text, package, rule)
    cached = _SCOPED.get(key)
    if cached is not None:
        return cached
    records = list(advisory.live or advisory.records)
    scopes = [_record_scope(r, package, table, rule) for r in records]
    ids = {tuple(e.id for e in s.entries) for s in scopes}
    if not scopes:
        scope = Scope(reason=f"{advisory.key} has no record: it concerns every model")
    elif len(ids) > 1:
        said = "; ".join(f"{r.get('id')}: {s.about()}" for r, s in zip(records, scopes, strict=True))
        scope = Scope(reason=f"its records disagree on scope ({said}): it concerns every model")
    else:
        scope = scopes[0]
    if len(_SCOPED) > 10_000:
        _SCOPED.clear()
    _SCOPED[key] = scope
    return scope


# --- matching a scope against a revision -------------------------------------------------------------


def _any(patterns: Iterable[str], names: Iterable[str]) -> str | None:
    for name in names:
        short = name.rsplit(".", 1)[-1].split("--")[-1]
        for pattern in patterns:
            if fnmatch.fnmatchcase(short, pattern) or fnmatch.fnmatchcase(name, pattern):
                return name
    return None


def _file(patterns: Iterable[str], files: Iterable[str]) -> str | None:
    for path in files:
        for pattern in patterns:
            if fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(posixpath.basename(path), pattern):
                return path
    return None


def entry_concerns(entry: ScopeEntry, facts: RepoFacts) -> str | None:
    """What of the revision the entry concerns ("model_type perceiver"), or None."""
    model_types = [m for m in facts.model_types if m in entry.model_types]
    if model_types:
        return f"model_type {model_types[0]}"
    if (arch := _any(entry.architectures, facts.architectures)) is not None:
        return f"architecture {arch}"
    if (target := _any(entry.architectures, facts.auto_map)) is not None:
        return f"auto_map class {target}"
    if (tok := _any(entry.tokenizer_classes, facts.tokenizer_classes)) is not None:
        return f"tokenizer class {tok}"
    if (path := _file(entry.files, facts.files)) is not None:
        return f"file {path}"
    if entry.features & facts.features:
        return f"{', '.join(sorted(entry.features & facts.features))} present"
    return None


def describe_model(facts: RepoFacts) -> str:
    """The revision's model, as a scope reason speaks of it."""
    parts = []
    if facts.model_types:
        parts.append(f"model_type {', '.join(facts.model_types)}")
    if facts.tokenizer_classes:
        parts.append(f"tokenizer {', '.join(facts.tokenizer_classes)}")
    return "; ".join(parts) or "no model_type"


def relevance(scope: Scope, facts: RepoFacts, requires: Sequence[str] = ()) -> Relevance:
    """Whether an advisory with this scope (and rule requirements) concerns a revision with these facts."""
    if requires and not set(requires) & set(facts.features):
        return Relevance(False, f"needs {' or '.join(requires)}, which this revision lacks")
    if scope.general:
        return Relevance(True, scope.reason)
    if not facts.model_facts:  # facts stored before model facts were read
        return Relevance(True, f"about {scope.about()}; this revision's model facts were not read, so it counts",
                         assumed=True)
    for entry in scope.entries:
        what = entry_concerns(entry, facts)
        if what is not None:
            return Relevance(True, f"about {entry.about}: this revision has {what}", scoped=True)
    if not facts.model_known and any(e.model_types or e.architectures or e.tokenizer_classes for e in scope.entries):
        return Relevance(True, f"about {scope.about()}; this revision's model type is unknown, so it counts",
                         scoped=True, assumed=True)
    if any(e.model_types or e.architectures or e.tokenizer_classes for e in scope.entries):
        lacks = f"this revision has {describe_model(facts)}"
    else:
        lacks = f"this revision holds no {' or '.join(f for e in scope.entries for f in (*e.files, *sorted(e.features)))}"
    return Relevance(False, f"not relevant to this model: about {scope.about()}; {lacks}", scoped=True)
