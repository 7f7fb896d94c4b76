"""Loader advice for one revision: "to load this safely you need transformers >= X (torch >= Y)".

The floor of a package is the strictest fix among the advisories a repo like this one can trigger while
being loaded (rules.py: verdict "repo", and the features they need present in the revision). Runtime-only
advisories (ReDoS and the like) and unclassified ones are listed apart and never raise the floor. An
advisory with no fixed release does not set a floor; it is named as unfixed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from tracker.advisories.facts import RepoFacts
from tracker.advisories.records import (
    Advisory,
    AdvisoryIndex,
    Floor,
    parse_version,
    strictest,
)
from tracker.advisories.rules import REPO, RUNTIME, Rule, judge

# Packages the loader advice always speaks about; others only when the revision names them.
ADVICE_PACKAGES = ("transformers", "torch")
OPTIONAL_ADVICE_PACKAGES = ("diffusers", "sentence-transformers")


@dataclass(frozen=True)
class Because:
    """One advisory behind a package's floor."""

    key: str
    ids: tuple[str, ...]
    floor: str  # ">= 4.36.0", "> 5.2.0" or "no fixed release"
    rule: str
    trigger: str
    summary: str

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "ids": list(self.ids), "floor": self.floor, "rule": self.rule,
                "trigger": self.trigger, "summary": self.summary}


@dataclass(frozen=True)
class PackageAdvice:
    package: str
    floor: str | None  # ">= 5.10.0" or None when no advisory with a fix applies
    because: tuple[Because, ...] = ()
    unfixed: tuple[Because, ...] = ()
    notes: tuple[str, ...] = ()  # requirements that pin or allow less than the floor

    def to_dict(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "floor": self.floor,
            "because": [b.to_dict() for b in self.because],
            "unfixed": [b.to_dict() for b in self.unfixed],
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class LoaderAdvice:
    packages: tuple[PackageAdvice, ...] = ()
    runtime_only: tuple[str, ...] = ()  # advisory keys judged runtime-only
    unclassified: tuple[str, ...] = ()  # advisory keys no rule matched
    not_relevant: tuple[str, ...] = ()  # repo-triggerable, but needing features this revision lacks
    notes: tuple[str, ...] = ()  # e.g. "advice from cached advisories: OSV was unavailable"
    sentence: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "sentence": self.sentence,
            "packages": [p.to_dict() for p in self.packages],
            "runtime_only": list(self.runtime_only),
            "unclassified": list(self.unclassified),
            "not_relevant": list(self.not_relevant),
            "notes": list(self.notes),
        }


def advice_packages(facts: RepoFacts) -> tuple[str, ...]:
    named = facts.packages()
    return ADVICE_PACKAGES + tuple(p for p in OPTIONAL_ADVICE_PACKAGES if p in named)


def loader_advice(
    index: AdvisoryIndex,
    facts: RepoFacts,
    rules: Sequence[Rule] | None = None,
    notes: Iterable[str] = (),
) -> LoaderAdvice:
    """The advice for a revision with these facts, from every advisory in `index`."""
    packages: list[PackageAdvice] = []
    runtime, unclassified, not_relevant = set(), set(), set()
    for package in advice_packages(facts):
        because, unfixed, floors = [], [], []
        for advisory in index.for_package(package):
            if advisory.withdrawn:
                continue
            judgement = judge(advisory, package, rules)
            if judgement.verdict == RUNTIME:
                runtime.add(advisory.key)
                continue
            if judgement.verdict != REPO:
                unclassified.add(advisory.key)
                continue
            if not judgement.relevant(facts.features):
                not_relevant.add(advisory.key)
                continue
            floor = advisory.floor(package)
            item = _because(advisory, floor, judgement.rule or "", judgement.trigger or "")
            if floor.version is None:
                unfixed.append(item)
            else:
                because.append(item)
                floors.append(floor)
        best = strictest(floors)
        packages.append(
            PackageAdvice(
                package=package,
                floor=best.text() if best else None,
                because=tuple(sorted(because, key=lambda b: b.key)),
                unfixed=tuple(sorted(unfixed, key=lambda b: b.key)),
                notes=tuple(_requirement_notes(facts, package, best)),
            )
        )
    return LoaderAdvice(
        packages=tuple(packages),
        runtime_only=tuple(sorted(runtime)),
        unclassified=tuple(sorted(unclassified)),
        not_relevant=tuple(sorted(not_relevant - runtime - unclassified)),
        notes=tuple(notes),
        sentence=advice_sentence(packages),
    )


def _because(advisory: Advisory, floor: Floor, rule: str, trigger: str) -> Because:
    return Because(advisory.key, advisory.ids, floor.text(), rule, trigger, advisory.summary)


def advice_sentence(packages: Sequence[PackageAdvice]) -> str:
    """ "to load this safely you need transformers >= 5.10.0 (torch >= 2.10.0)", plus what no release fixes."""
    floors = [f"{p.package} {p.floor}" for p in packages if p.floor]
    if floors:
        head = f"to load this safely you need {floors[0]}"
        if len(floors) > 1:
            head += f" ({', '.join(floors[1:])})"
    else:
        head = "no known advisory a repo can trigger while loading applies"
    unfixed = [f"{p.package}: {', '.join(b.key for b in p.unfixed)}" for p in packages if p.unfixed]
    if unfixed:
        head += "; no release fixes " + "; ".join(unfixed)
    return head


def _requirement_notes(facts: RepoFacts, package: str, floor: Floor | None) -> list[str]:
    """Requirements of the repo that pin, or only allow, versions below the floor."""
    if floor is None or floor.version is None:
        return []
    name = canonicalize_name(package)
    bound = Version(floor.version)
    out = []
    for req in facts.requirements:
        if req.name != name or req.kind not in ("pin", "range"):
            continue
        where = f"{req.path}:{req.line}"
        if req.kind == "pin":
            pinned = parse_version(req.specifier.lstrip("=")).version
            if pinned is not None and (pinned < bound or (pinned == bound and not floor.inclusive)):
                out.append(f"{where} pins {req.text}, below the floor {floor.text()}")
            continue
        try:
            allowed = SpecifierSet(req.specifier)
        except InvalidSpecifier:
            continue
        if not allowed.contains(bound, prereleases=True) and floor.inclusive:
            out.append(f"{where} allows {package}{req.specifier}, which excludes the floor {floor.text()}")
    return out

