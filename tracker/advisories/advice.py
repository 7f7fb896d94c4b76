"""Loader advice for one revision: "to load this safely you need transformers >= X (torch >= Y)".

The floor of a package is the strictest fix among the advisories this revision can trigger while being
loaded (rules.py: verdict "repo", and the features they need present in the revision; scope.py: about
this model, its tokenizer or a file it holds). Runtime-only advisories (ReDoS and the like) and
unclassified ones are listed apart and never raise the floor. An advisory with no fixed release does not
set a floor; it is named as unfixed.

Beside it, each package's floor overall: the strictest fix among every advisory some repo can trigger
while loading, whatever the model. The advisories counted there but not here are listed with the reason
(`not_counted`), so a reader sees both floors and why they differ.
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
from tracker.advisories.scope import ScopeTable, relevance, scope_of

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
    relevance: str = ""  # why it concerns this revision, or why not (scope.py)
    assumed: bool = False  # counted only because the revision's model is unknown (never announced)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "ids": list(self.ids), "floor": self.floor, "rule": self.rule,
                "trigger": self.trigger, "summary": self.summary, "relevance": self.relevance, "assumed": self.assumed}


@dataclass(frozen=True)
class PackageAdvice:
    package: str
    floor: str | None  # ">= 5.10.0" or None when no advisory with a fix applies
    because: tuple[Because, ...] = ()
    unfixed: tuple[Because, ...] = ()
    notes: tuple[str, ...] = ()  # requirements that pin or allow less than the floor
    package_floor: str | None = None  # the floor for any model: every advisory a repo can trigger
    package_unfixed: tuple[str, ...] = ()  # advisory keys no release fixes, for any model
    not_counted: tuple[Because, ...] = ()  # in the package floor, not in this revision's, with the reason

    def to_dict(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "floor": self.floor,
            "because": [b.to_dict() for b in self.because],
            "unfixed": [b.to_dict() for b in self.unfixed],
            "notes": list(self.notes),
            "package_floor": self.package_floor,
            "package_unfixed": list(self.package_unfixed),
            "not_counted": [b.to_dict() for b in self.not_counted],
        }


@dataclass(frozen=True)
class LoaderAdvice:
    packages: tuple[PackageAdvice, ...] = ()
    runtime_only: tuple[str, ...] = ()  # advisory keys judged runtime-only
    unclassified: tuple[str, ...] = ()  # advisory keys no rule matched
    not_relevant: tuple[str, ...] = ()  # repo-triggerable, but not by this revision (features, model)
    notes: tuple[str, ...] = ()  # e.g. "advice from cached advisories: OSV was unavailable"
    sentence: str = ""
    package_sentence: str = ""  # the floors for any model, and how many advisories here do not count

    def to_dict(self) -> dict[str, Any]:
        return {
            "sentence": self.sentence,
            "packages": [p.to_dict() for p in self.packages],
            "runtime_only": list(self.runtime_only),
            "unclassified": list(self.unclassified),
            "not_relevant": list(self.not_relevant),
            "notes": list(self.notes),
            "package_sentence": self.package_sentence,
        }


def advice_packages(facts: RepoFacts) -> tuple[str, ...]:
    named = facts.packages()
    return ADVICE_PACKAGES + tuple(p for p in OPTIONAL_ADVICE_PACKAGES if p in named)


def loader_advice(
    index: AdvisoryIndex,
    facts: RepoFacts,
    rules: Sequence[Rule] | None = None,
    notes: Iterable[str] = (),
    scopes: ScopeTable | None = None,
) -> LoaderAdvice:
    """The advice for a revision with these facts, from every advisory in `index`."""
    packages: list[PackageAdvice] = []
    runtime, unclassified, not_relevant = set(), set(), set()
    for package in advice_packages(facts):
        because, unfixed, floors = [], [], []
        overall, overall_unfixed, not_counted = [], [], []
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
            floor = advisory.floor(package)
            scope = scope_of(advisory, package, judgement.rule, scopes)
            concerns = relevance(scope, facts, judgement.requires)
            item = _because(advisory, floor, judgement.rule or "", judgement.trigger or "", concerns.reason,
                            concerns.assumed)
            if floor.version is None:
                overall_unfixed.append(advisory.key)
            else:
                overall.append(floor)
            if not concerns.relevant:
                not_relevant.add(advisory.key)
                not_counted.append(item)
                continue
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
                package_floor=(overall_best.text() if (overall_best := strictest(overall)) else None),
                package_unfixed=tuple(sorted(overall_unfixed)),
                not_counted=tuple(sorted(not_counted, key=lambda b: b.key)),
            )
        )
    return LoaderAdvice(
        packages=tuple(packages),
        runtime_only=tuple(sorted(runtime)),
        unclassified=tuple(sorted(unclassified)),
        not_relevant=tuple(sorted(not_relevant - runtime - unclassified)),
        notes=tuple(notes),
        sentence=advice_sentence(packages),
        package_sentence=package_sentence(packages),
    )


def _because(advisory: Advisory, floor: Floor, rule: str, trigger: str, why: str, assumed: bool) -> Because:
    return Because(advisory.key, advisory.ids, floor.text(), rule, trigger, advisory.summary, why, assumed)


def package_sentence(packages: Sequence[PackageAdvice]) -> str:
    """ "for any model: transformers >= 5.10.0, no release fixes PYSEC-2025-211; 5 of them do not concern
    this revision", or "" when every repo-triggerable advisory concerns it."""
    if not any(p.not_counted for p in packages):
        return ""
    parts = []
    for p in packages:
        if not p.package_floor and not p.package_unfixed:
            continue
        text = f"{p.package} {p.package_floor or '(no fixed release sets a floor)'}"
        if p.package_unfixed:
            text += f", no release fixes {', '.join(p.package_unfixed)}"
        parts.append(text)
    count = sum(len(p.not_counted) for p in packages)
    return f"for any model: {'; '.join(parts)}; {count} of these advisories do not concern this revision"


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

