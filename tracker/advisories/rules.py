"""Which advisories a model repo can trigger while being loaded, and which only bite code calling the
library: the rules are data (`data/rules.json`), tried in order, the first match deciding."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from tracker.advisories.records import Advisory

RULES_FILE = Path(__file__).parent / "data" / "rules.json"
REPO, RUNTIME, UNCLASSIFIED = "repo", "runtime", "unclassified"


@dataclass(frozen=True)
class Rule:
    id: str
    verdict: str  # repo | runtime
    trigger: str
    description: str
    packages: frozenset[str]  # empty: any package
    cwe_ids: frozenset[str]
    text: tuple[re.Pattern[str], ...]  # all must match
    requires: tuple[str, ...]  # repo features, any of; empty: always relevant

    def matches(self, advisory: Advisory, package: str) -> bool:
        if self.packages and canonicalize_name(package) not in self.packages:
            return False
        if self.cwe_ids & advisory.cwe_ids:
            return True
        text = advisory.text
        return bool(self.text) and all(p.search(text) for p in self.text)


@dataclass(frozen=True)
class Judgement:
    """How one advisory is judged for one package: `verdict` repo | runtime | unclassified."""

    verdict: str
    rule: str | None = None
    trigger: str | None = None
    requires: tuple[str, ...] = ()

    def relevant(self, features: Iterable[str]) -> bool:
        """Whether a revision with these features can trigger it while being loaded."""
        if self.verdict != REPO:
            return False
        return not self.requires or bool(set(self.requires) & set(features))

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "rule": self.rule, "trigger": self.trigger, "requires": list(self.requires)}


def _rule(raw: dict[str, Any]) -> Rule:
    verdict = str(raw["verdict"])
    if verdict not in (REPO, RUNTIME):
        raise ValueError(f"rule {raw.get('id')}: verdict must be {REPO!r} or {RUNTIME!r}, not {verdict!r}")
    return Rule(
        id=str(raw["id"]),
        verdict=verdict,
        trigger=str(raw["trigger"]),
        description=str(raw["description"]),
        packages=frozenset(canonicalize_name(p) for p in raw.get("packages", [])),
        cwe_ids=frozenset(str(c) for c in raw.get("cwe_ids", [])),
        text=tuple(re.compile(p, re.IGNORECASE) for p in raw.get("text", [])),
        requires=tuple(str(r) for r in raw.get("requires", [])),
    )


def load_rules(path: Path | str = RULES_FILE) -> tuple[Rule, ...]:
    """The rule table from a JSON file (the bundled one by default)."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    rules = tuple(_rule(r) for r in doc["rules"])
    ids = [r.id for r in rules]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: rule ids must be unique")
    return rules


@lru_cache(maxsize=1)
def default_rules() -> tuple[Rule, ...]:
    return load_rules()


_JUDGED: dict[tuple[Any, ...], Judgement] = {}  # a re-check judges the same advisories for every repo


def judge(advisory: Advisory, package: str, rules: Iterable[Rule] | None = None) -> Judgement:
    """The first rule matching the advisory for this package decides; no match: unclassified."""
    table = default_rules() if rules is None else tuple(rules)
    key = (table, advisory.ids, advisory.modified, advisory.text, package)
    try:
        return _JUDGED[key]
    except (KeyError, TypeError):
        pass
    judgement = Judgement(UNCLASSIFIED)
    for rule in table:
        if rule.matches(advisory, package):
            judgement = Judgement(rule.verdict, rule.id, rule.trigger, rule.requires)
            break
    if len(_JUDGED) > 10_000:
        _JUDGED.clear()
    try:
        _JUDGED[key] = judgement
    except TypeError:  # a rule table of unhashable rules is judged every time
        pass
    return judgement
