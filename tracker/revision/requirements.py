"""Reading requirements.txt: its logical lines (comments, blank lines and continuations gone), each
classified as pip would take it (pin, range, URL, option...), and the small questions the code differ
asks of a line (which package it names, whether it adds a package source). Pure: text in, records out.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

SOURCE_OPTIONS = ("-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--trusted-host")
_INCLUDE_OPTIONS = ("-r", "--requirement", "-c", "--constraint")
_EDITABLE_OPTIONS = ("-e", "--editable")
_EGG = re.compile(r"[#&]egg=([A-Za-z0-9][A-Za-z0-9._-]*)")
_LEADING_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class RequirementLine:
    """One line of a requirements file. `kind`: pin | range | any | url | editable | source | include |
    option | invalid; `reason` says why it gives no single version to check (None for a pin)."""

    path: str
    line: int
    text: str
    kind: str
    name: str | None = None
    specifier: str = ""
    reason: str | None = None


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first physical line number, text) of each requirement line: a trailing backslash continues a
    line, `#` starts a comment, runs of whitespace become one space; options and URLs kept as text."""
    lines, pending, start = [], "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        if not pending:
            start = number
        stripped = raw.rstrip()
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        joined = pending + stripped
        pending = ""
        joined = re.split(r"(?:^|\s)#", joined, maxsplit=1)[0].strip()
        if joined:
            lines.append((start, re.sub(r"\s+", " ", joined)))
    if pending.strip():
        lines.append((start, pending.strip()))
    return lines


def requirement_lines(text: str) -> list[str]:
    """The text of each logical line (see `logical_lines`)."""
    return [line for _, line in logical_lines(text)]


def parse_requirements(path: str, text: str) -> list[RequirementLine]:
    """Each logical line of a requirements file, classified; comments and blank lines dropped."""
    return [classify(path, number, line) for number, line in logical_lines(text)]


def _option(line: str) -> str:
    return line.split(" ", 1)[0].split("=", 1)[0]


def classify(path: str, number: int, line: str) -> RequirementLine:
    """What one logical line asks pip for, and why it gives no single version to check (if it does not)."""
    def row(kind: str, reason: str | None, name: str | None = None, specifier: str = "") -> RequirementLine:
        return RequirementLine(path, number, line, kind, name, specifier, reason)

    head = _option(line)
    if head in SOURCE_OPTIONS:
        return row("source", "adds a package source: pip may take packages from it instead of PyPI")
    if head in _INCLUDE_OPTIONS:
        return row("include", "includes another requirements file, not followed: its pins are unknown")
    if head in _EDITABLE_OPTIONS:
        egg = _EGG.search(line)
        return row("editable", "an editable install from a path or URL: no version to check",
                   canonicalize_name(egg.group(1)) if egg else None)
    if line.startswith("-"):
        return row("option", "a pip option, not a requirement")
    if "://" in line.split(" @ ", 1)[0] or line.startswith(("git+", "hg+", "svn+", "bzr+")):
        egg = _EGG.search(line)
        name = canonicalize_name(egg.group(1)) if egg else None
        kind_of = "a VCS checkout" if "+" in line.split("://", 1)[0] else "a URL"
        return row("url", f"installs whatever {kind_of} serves: no version to check", name)
    return _classify_requirement(line, row)


def _classify_requirement(line: str, row: Callable[..., RequirementLine]) -> RequirementLine:
    """A line that is neither an option nor a bare URL: a PEP 508 requirement, or invalid."""
    requirement_text, _, options = line.partition(" --")
    try:
        req = Requirement(requirement_text)
    except InvalidRequirement as err:
        return row("invalid", f"not a valid requirement: {str(err).splitlines()[0]}")
    name = canonicalize_name(req.name)
    extra = f" (per-requirement options --{options} kept as text)" if options else ""
    if req.url:
        return row("url", f"installs {name} from {req.url}: no version to check{extra}", name)
    specs = list(req.specifier)
    marker = f"; {req.marker}" if req.marker else ""
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        notes = ([f"only when {req.marker}"] if req.marker else []) + ([extra.strip(" ()")] if extra else [])
        return row("pin", "; ".join(notes) or None, name, f"=={specs[0].version}")
    if not specs:
        return row("any", f"any version of {name} allowed: no single version to check{marker}", name)
    return row("range", f"{req.specifier} is not a single version: checked against the advice floor{marker}",
               name, str(req.specifier))


def leading_name(line: str) -> str | None:
    """The package name a plain requirement line starts with (lower case, `_` as `-`), the key the code
    differ pairs an old and a new line by; None for options, URLs and VCS lines."""
    if line.startswith(("-", "git+")) or "://" in line:
        return None
    match = _LEADING_NAME.match(line)
    return match.group(0).lower().replace("_", "-") if match else None


def is_package_source(line: str) -> bool:
    """True for lines that add where packages come from: index options, URLs, VCS references."""
    return _option(line) in SOURCE_OPTIONS or "://" in line or line.startswith("git+")
