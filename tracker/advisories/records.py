"""OSV records as hubwatch reads them: aliases merged into one advisory, `withdrawn` honoured, PEP 440
ranges evaluated with `packaging`.

Versions are the writer's (`transformers_version` in a config.json): they can be anything. A version PEP
440 cannot parse ("latest", "") is never guessed at; it gives a `Verdict` with status "unknown" and a
reason a person can read. A local label ("4.40.0.dev0+local") parses: the comparison uses the public
version and says so.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

AFFECTED, NOT_AFFECTED, UNKNOWN = "affected", "not_affected", "unknown"
EVENT_KINDS = ("introduced", "fixed", "last_affected", "limit")
# Which id names a merged advisory: GitHub's first, then PyPA's, then the CVE, then anything else.
ID_PREFERENCE = ("GHSA-", "PYSEC-", "CVE-")
ECOSYSTEM = "PyPI"


@dataclass(frozen=True)
class ParsedVersion:
    """A version string read with PEP 440: `version` is None when it cannot be, and `note` says why
    (or what was dropped to compare it, like a local label)."""

    text: str
    version: Version | None
    note: str | None = None

    @property
    def query_text(self) -> str | None:
        """What to ask OSV for: the public version, or None when there is nothing to ask."""
        return None if self.version is None else self.version.public


def parse_version(text: object) -> ParsedVersion:
    """PEP 440 parsing with a readable reason for what cannot be parsed."""
    raw = "" if text is None else str(text)
    stripped = raw.strip()
    if not stripped:
        return ParsedVersion(raw, None, "the version is empty")
    try:
        version = Version(stripped)
    except InvalidVersion:
        return ParsedVersion(raw, None, f"{raw!r} is not a PEP 440 version")
    if version.local:
        public = Version(version.public)
        return ParsedVersion(raw, public, f"local label +{version.local} ignored: compared as {public}")
    return ParsedVersion(raw, version)


@dataclass(frozen=True)
class Verdict:
    """Whether one version of one package is affected by one advisory."""

    status: str  # affected | not_affected | unknown
    reason: str | None = None
    fixed: tuple[str, ...] = ()  # the fixed versions the ranges name, for the reader


@dataclass(frozen=True)
class Floor:
    """The least version of a package that escapes an advisory: `>= version` (a fix) or `> version`
    (only a last affected release is known); `version` None means no release escapes it."""

    version: str | None
    inclusive: bool = True
    reason: str | None = None

    def text(self) -> str:
        if self.version is None:
            return "no fixed release"
        return f"{'>=' if self.inclusive else '>'} {self.version}"

    def key(self) -> tuple[Version, int]:
        """Orders floors from least to most demanding (`> 5.2.0` is stricter than `>= 5.2.0`)."""
        assert self.version is not None
        return (Version(self.version), 0 if self.inclusive else 1)


@dataclass(frozen=True)
class Advisory:
    """One issue as OSV knows it: its records under every id (GHSA, PYSEC, CVE...) merged."""

    key: str
    ids: tuple[str, ...]
    records: tuple[Mapping[str, Any], ...]
    problems: tuple[str, ...] = ()

    @property
    def live(self) -> tuple[Mapping[str, Any], ...]:
        """The records that are not withdrawn."""
        return tuple(r for r in self.records if not r.get("withdrawn"))

    @property
    def withdrawn(self) -> bool:
        """Withdrawn when every record we hold for it is."""
        return bool(self.records) and not self.live

    @property
    def modified(self) -> str:
        """The newest `modified` of its records (an advisory changes when any of its records does)."""
        return max(str(r.get("modified", "")) for r in self.records)

    @property
    def published(self) -> str | None:
        dates = [str(r["published"]) for r in self.records if r.get("published")]
        return min(dates) if dates else None

    @property
    def summary(self) -> str:
        for record in self._by_preference():
            if record.get("summary"):
                return str(record["summary"])
        for record in self._by_preference():
            if record.get("details"):
                return str(record["details"]).strip().splitlines()[0][:160]
        return self.key

    @property
    def text(self) -> str:
        """Summary and details of every record, for rules to read."""
        return "\n".join(f"{r.get('summary', '')}\n{r.get('details', '')}" for r in self.records)

    @property
    def cwe_ids(self) -> frozenset[str]:
        found: set[str] = set()
        for record in self.records:
            specific = record.get("database_specific")
            if isinstance(specific, Mapping) and isinstance(specific.get("cwe_ids"), list):
                found.update(str(c) for c in specific["cwe_ids"])
        return frozenset(found)

    def packages(self) -> frozenset[str]:
        return frozenset(name for r in self.live for name, _ in _affected_entries(r))

    @property
    def substance(self) -> str:
        """A digest of what a re-announcement is about: affected ranges, severity, aliases and withdrawal
        of every record. A record whose `modified` moved with none of these changed (new references,
        reworded details, a `versions` list re-enumerated under the same ranges) keeps its digest."""
        parts = sorted((record_substance(r) for r in self.records), key=lambda d: str(d["id"]))
        return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()

    def _by_preference(self) -> list[Mapping[str, Any]]:
        return sorted(self.records, key=lambda r: _id_rank(str(r.get("id", ""))))

    def evaluate(self, package: str, version: ParsedVersion) -> Verdict:
        """Affected when any live record says so; records that disagree are noted."""
        if self.withdrawn:
            return Verdict(NOT_AFFECTED, "withdrawn")
        verdicts = [evaluate_record(r, package, version) for r in self.live]
        verdicts = [v for v in verdicts if v.reason != "not about this package"] or verdicts
        fixed = tuple(sorted({f for v in verdicts for f in v.fixed}, key=_sort_key))
        reasons = sorted({v.reason for v in verdicts if v.reason})
        statuses = {v.status for v in verdicts}
        if AFFECTED in statuses:
            note = "records disagree; one says affected" if NOT_AFFECTED in statuses else None
            return Verdict(AFFECTED, "; ".join(filter(None, [note, *reasons])) or None, fixed)
        if UNKNOWN in statuses:
            return Verdict(UNKNOWN, "; ".join(reasons) or None, fixed)
        return Verdict(NOT_AFFECTED, "; ".join(reasons) or None, fixed)

    def floor(self, package: str) -> Floor:
        """The most demanding floor over its live records (they describe one issue; trust the strictest)."""
        floors = [record_floor(r, package) for r in self.live]
        floors = [f for f in floors if f is not None]
        if not floors:
            return Floor(None, reason=f"no record of {self.key} names {package}")
        if any(f.version is None for f in floors):
            return next(f for f in floors if f.version is None)
        return max(floors, key=Floor.key)


def record_substance(record: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of one OSV record whose change is news (see Advisory.substance)."""
    affected = []
    for affected_entry in record.get("affected") or ():
        if not isinstance(affected_entry, Mapping):
            continue
        ranges = [{"type": r.get("type"), "events": r.get("events")} for r in affected_entry.get("ranges") or ()
                  if isinstance(r, Mapping)]
        entry: dict[str, Any] = {"package": affected_entry.get("package"), "ranges": ranges}
        if not ranges:  # the versions list is the only statement of what is affected
            entry["versions"] = sorted(str(v) for v in affected_entry.get("versions") or ())
        affected.append(entry)
    specific = record.get("database_specific")
    return {
        "id": record.get("id"),
        "aliases": sorted(str(a) for a in record.get("aliases") or ()),
        "withdrawn": bool(record.get("withdrawn")),
        "severity": record.get("severity") or [],
        "database_severity": specific.get("severity") if isinstance(specific, Mapping) else None,
        "affected": sorted(affected, key=lambda e: json.dumps(e, sort_keys=True, default=str)),
    }


def _id_rank(vuln_id: str) -> tuple[int, str]:
    for rank, prefix in enumerate(ID_PREFERENCE):
        if vuln_id.startswith(prefix):
            return rank, vuln_id
    return len(ID_PREFERENCE), vuln_id


def merge_aliases(records: Iterable[Mapping[str, Any]]) -> list[Advisory]:
    """Group records that name each other (id or `aliases`, transitively) into one Advisory each.

    A GHSA listing the CVE, and a PYSEC listing the CVE and the GHSA, are one advisory; `related` and
    `upstream` ids are not merged (they name other issues)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    by_id: dict[str, Mapping[str, Any]] = {}
    for record in records:
        vuln_id = str(record.get("id", ""))
        if not vuln_id:
            continue
        by_id[vuln_id] = record
        find(vuln_id)
        for alias in record.get("aliases") or ():
            union(vuln_id, str(alias))
    groups: dict[str, set[str]] = {}
    for vuln_id in list(parent):
        groups.setdefault(find(vuln_id), set()).add(vuln_id)
    advisories = []
    for members in groups.values():
        held = [by_id[i] for i in sorted(members) if i in by_id]
        if not held:
            continue
        ids = tuple(sorted(members, key=_id_rank))
        problems = tuple(p for r in held for p in record_problems(r))
        advisories.append(Advisory(ids[0], ids, tuple(held), problems))
    return sorted(advisories, key=lambda a: _id_rank(a.key))


def record_problems(record: Mapping[str, Any]) -> list[str]:
    """What in a record could not be used, each as a sentence."""
    problems = []
    for name, affected in _affected_entries(record):
        for rng in affected.get("ranges") or ():
            for event in rng.get("events") or ():
                if not isinstance(event, Mapping) or sum(k in event for k in EVENT_KINDS) != 1:
                    problems.append(
                        f"{record.get('id')}: an event of the {name} {rng.get('type')} range is {event!r}, "
                        f"not exactly one of {', '.join(EVENT_KINDS)}: ignored"
                    )
    return problems


# --- evaluating one record ------------------------------------------------------------------------


def _affected_entries(record: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    out = []
    for affected in record.get("affected") or ():
        package = affected.get("package") if isinstance(affected, Mapping) else None
        if not isinstance(package, Mapping) or str(package.get("ecosystem", "")).split(":")[0] != ECOSYSTEM:
            continue
        out.append((canonicalize_name(str(package.get("name", ""))), affected))
    return out


def _sort_key(text: str) -> tuple[int, Any]:
    parsed = parse_version(text)
    return (0, parsed.version) if parsed.version is not None else (1, text)


def _events(rng: Mapping[str, Any]) -> tuple[list[tuple[str, Version | None]], list[str]]:
    """(kind, version) pairs of an ECOSYSTEM range, "0" as None (the beginning), and what was ignored."""
    events, notes = [], []
    for event in rng.get("events") or ():
        if not isinstance(event, Mapping):
            continue
        kinds = [k for k in EVENT_KINDS if k in event]
        if len(kinds) != 1:
            continue  # record_problems reports it
        kind, value = kinds[0], str(event[kinds[0]])
        if kind == "introduced" and value == "0":
            events.append((kind, None))
            continue
        parsed = parse_version(value)
        if parsed.version is None:
            notes.append(f"range event {kind} {value!r} is not a PEP 440 version: ignored")
            continue
        events.append((kind, parsed.version))
    return events, notes


def _in_range(events: list[tuple[str, Version | None]], version: Version) -> bool:
    """OSV's algorithm: walk the events in version order; introduced opens, fixed/last_affected close."""
    order = {"introduced": 0, "fixed": 1, "last_affected": 1, "limit": 1}
    ordered = sorted(events, key=lambda e: (e[1] is not None, e[1] or Version("0"), order[e[0]]))
    affected = False
    limits = [v for k, v in ordered if k == "limit" and v is not None]
    if limits and all(version >= limit for limit in limits):
        return False
    for kind, bound in ordered:
        if kind == "introduced":
            if bound is None or version >= bound:
                affected = True
        elif ((kind == "fixed" and bound is not None and version >= bound)
              or (kind == "last_affected" and bound is not None and version > bound)):
            affected = False
    return affected


def evaluate_record(record: Mapping[str, Any], package: str, version: ParsedVersion) -> Verdict:
    """Whether `version` of `package` is affected by one OSV record (ECOSYSTEM ranges and `versions`)."""
    name = canonicalize_name(package)
    entries = [a for n, a in _affected_entries(record) if n == name]
    if not entries:
        return Verdict(NOT_AFFECTED, "not about this package")
    if version.version is None:
        return Verdict(UNKNOWN, f"cannot evaluate: {version.note}")
    notes = [version.note] if version.note else []
    fixed: list[str] = []
    affected = False
    for entry in entries:
        listed = {str(v) for v in entry.get("versions") or ()}
        if version.text.strip() in listed or str(version.version) in listed:
            affected = True
        for rng in entry.get("ranges") or ():
            if rng.get("type") not in ("ECOSYSTEM", "SEMVER"):
                continue
            events, ignored = _events(rng)
            notes.extend(ignored)
            fixed.extend(str(v) for k, v in events if k == "fixed" and v is not None)
            if events and _in_range(events, version.version):
                affected = True
    status = AFFECTED if affected else NOT_AFFECTED
    return Verdict(status, "; ".join(dict.fromkeys(notes)) or None, tuple(fixed))


def record_floor(record: Mapping[str, Any], package: str) -> Floor | None:
    """The least version escaping this record's ranges for `package`, or None when it names no range.

    A range still open after its last event (introduced with no fix, or a malformed event) has no
    floor: Floor(None) with the reason."""
    name = canonicalize_name(package)
    entries = [a for n, a in _affected_entries(record) if n == name]
    if not entries:
        return None
    floors: list[Floor] = []
    for entry in entries:
        ranges = [r for r in entry.get("ranges") or () if r.get("type") in ("ECOSYSTEM", "SEMVER")]
        for rng in ranges:
            events, _ = _events(rng)
            if not events:
                continue
            closing = [(k, v) for k, v in events if k in ("fixed", "last_affected") and v is not None]
            opening = [v for k, v in events if k == "introduced"]
            top_open = max((v or Version("0") for v in opening), default=Version("0"))
            if not closing or max(v for _, v in closing) < top_open:
                return Floor(None, reason=f"{record.get('id')}: no fixed release of {package} is known")
            kind, bound = max(closing, key=lambda e: (e[1], e[0] == "last_affected"))
            floors.append(Floor(str(bound), inclusive=kind == "fixed"))
        if not ranges and entry.get("versions"):
            listed = [parse_version(v).version for v in entry["versions"]]
            known = [v for v in listed if v is not None]
            if known:
                floors.append(Floor(str(max(known)), inclusive=False, reason="from the listed versions"))
    if not floors:
        return None
    return max(floors, key=Floor.key)


def strictest(floors: Sequence[Floor]) -> Floor | None:
    """The most demanding of several floors; one without a fixed release wins."""
    if not floors:
        return None
    if any(f.version is None for f in floors):
        return next(f for f in floors if f.version is None)
    return max(floors, key=Floor.key)


@dataclass
class AdvisoryIndex:
    """Every advisory held, merged, with a lookup from any of its ids."""

    advisories: list[Advisory] = field(default_factory=list)
    by_id: dict[str, Advisory] = field(default_factory=dict)

    @classmethod
    def build(cls, records: Iterable[Mapping[str, Any]]) -> AdvisoryIndex:
        advisories = merge_aliases(records)
        return cls(advisories, {i: a for a in advisories for i in a.ids})

    def for_package(self, package: str) -> list[Advisory]:
        name = canonicalize_name(package)
        return [a for a in self.advisories if name in a.packages()]
