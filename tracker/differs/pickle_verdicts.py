"""What a pickle scan's verdict means for a weight file that was added or changed: the words of its Change,
its severity and whether it is security-relevant (tracker/formats/pickle_rules.py gives the verdicts).

- dangerous: `critical`, naming each dangerous callable and where it occurs (zip member, byte offset);
- unknown: `warning`, naming the callables no rule knows (or what could not be read), for review;
- safe: `notice`, "pickle format, imports only tensor rebuilds" (not a security change); a pickle of training
  arguments (pickle_rules.TRAINING_ARGUMENTS) says so instead;
- unreadable, or no scan: `warning`, "pickle format, could not be checked", with the scan's note.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracker.formats import FileScan
from tracker.formats.pickle_rules import DANGEROUS, SAFE, TRAINING_ARGUMENTS, UNKNOWN, UNREADABLE
from tracker.revision.changes import Severity

SHOWN = 3  # callables named in a summary; the detail lists them all
SAFE_TEXT = "pickle format, imports only tensor rebuilds"
TRAINING_TEXT = f"pickle format, {TRAINING_ARGUMENTS}"


@dataclass(frozen=True)
class PickleVerdict:
    text: str
    severity: Severity
    security: bool
    detail: dict[str, Any] = field(default_factory=dict)


def pickle_verdict(scan: FileScan | None) -> PickleVerdict:
    """The Change's words, severity and flag for a pickle-bearing file with this scan (None: not scanned)."""
    if scan is None or scan.format != "pickle" or not scan.result:
        note = scan.note if scan is not None and scan.note else "not scanned"
        return PickleVerdict(f"pickle format, could not be checked ({note})", Severity.WARNING, True,
                             {"verdict": UNREADABLE, "note": note})
    result = scan.result
    verdict = str(result.get("verdict", UNREADABLE))
    detail = {"verdict": verdict, "rules_version": result.get("rules_version"), "note": scan.note}
    if verdict == UNREADABLE:
        return PickleVerdict(f"pickle format, could not be checked ({scan.note or 'nothing readable'})",
                             Severity.WARNING, True, detail)
    if verdict == SAFE:
        named = any(i.get("class") == TRAINING_ARGUMENTS for i in result.get("imports", []))
        return PickleVerdict(TRAINING_TEXT if named else SAFE_TEXT, Severity.NOTICE, False,
                             detail | ({"class": TRAINING_ARGUMENTS} if named else {}))
    wanted = DANGEROUS if verdict == DANGEROUS else UNKNOWN
    found = [f"{i['module']}.{i['name']}" for i in result.get("imports", []) if i.get("verdict") == wanted]
    places = where(result, found)
    detail |= {"callables": found, "occurrences": places}
    named = ", ".join(_named(c, places) for c in found[:SHOWN]) + (f" and {len(found) - SHOWN} more" if len(found) > SHOWN else "")
    if verdict == DANGEROUS:
        return PickleVerdict(f"pickle imports {_callables(found, 'dangerous ')}: {named}; runs code when loaded",
                             Severity.CRITICAL, True, detail)
    if found:
        text = f"pickle imports {_callables(found)} no rule knows: {named}; review before loading"
    else:
        text = f"pickle format, could not be fully checked ({scan.note or 'not all of it was read'})"
    return PickleVerdict(text, Severity.WARNING, True, detail)


def where(result: dict[str, Any], callables: list[str]) -> list[dict[str, Any]]:
    """The occurrences (zip member, byte offset, opcode) of these callables in a scan's result."""
    wanted = set(callables)
    return [
        {k: o.get(k) for k in ("callable", "member", "offset", "opcode")}
        for o in result.get("occurrences", [])
        if o.get("callable") in wanted
    ]


def _callables(found: list[str], kind: str = "") -> str:
    return f"a {kind}callable" if len(found) == 1 else f"{len(found)} {kind}callables"


def _named(dotted: str, places: list[dict[str, Any]]) -> str:
    """`os.system (archive/data.pkl, byte 57)`: the callable and its first occurrence."""
    first = next((p for p in places if p["callable"] == dotted), None)
    if first is None:
        return dotted
    at = [str(first["member"])] if first.get("member") else []
    at += [f"byte {first['offset']}"] if first.get("offset") is not None else []
    return f"{dotted} ({', '.join(at)})" if at else dotted
