"""What `outdated --scan` and `lock --scan` make of a scanned tree: its pins as `Pin`s to check, and the
scan's own findings (branch pins, unpinned uses, skipped files) in JSON and markdown."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracker.pins.cache import BadEntry, Pin
    from tracker.pins.code_scan import CodeScan
    from tracker.pins.code_write import Move
    from tracker.pins.outdated import ModelReport

DEFAULT_BRANCH = "main"  # a pin in code names a commit, not the branch it came from: compared with main


def scan_pins(scan: CodeScan) -> tuple[list[Pin], list[BadEntry]]:
    """One pin per (repo, sha) the tree pins (checked once however many files name it), and the scan's
    problems as entries that cannot be used. A repo pinned at two shas is two pins."""
    from tracker.pins.cache import BadEntry, Pin

    pins: dict[tuple[str, str], Pin] = {}
    for found in scan.pins:
        key = (found.repo_id, found.sha or "")
        pins.setdefault(key, Pin(found.repo_id, DEFAULT_BRANCH, found.sha or "", found.location))
    return list(pins.values()), [BadEntry(location, message) for location, message in scan.problems]


def scan_json(scan: CodeScan, reports: list[ModelReport], bad: list[BadEntry],
              moved: tuple[list[Move], list[tuple[str, str]]] | None) -> dict[str, Any]:
    """`outdated --scan --json`: the models with the places that pin them, then what the scan found besides."""
    where: dict[tuple[str, str], list[dict[str, object]]] = {}
    for pin in scan.pins:
        where.setdefault((pin.repo_id, pin.sha or ""), []).append(pin.to_dict())
    models = [{**r.to_dict(), "locations": where.get((r.pin.repo_id, r.pin.sha), [])} for r in reports]
    data: dict[str, Any] = {
        "models": models,
        "branch_pins": [p.to_dict() for p in scan.branch_pins],
        "unpinned": [p.to_dict() for p in scan.unpinned],
        "bad_entries": [b.__dict__ for b in bad],
        "skipped_files": [{"path": path, "reason": why} for path, why in scan.skipped],
        "files_read": scan.files_read,
    }
    if moved is not None:
        done, left = moved
        data["moved"] = [{**m.pin.to_dict(), "new_sha": m.new_sha} for m in done]
        data["not_moved"] = [{"location": location, "reason": why} for location, why in left]
    return data


def scan_markdown_extra(scan: CodeScan) -> list[str]:
    """The markdown report's lines after the models: branch pins, unpinned uses, skipped files."""
    lines: list[str] = []
    groups = (
        ("Following a branch or tag, not a commit", [f"`{p.repo_id}` follows `{p.branch}` at `{p.location}`" for p in scan.branch_pins]),
        ("Unpinned (no revision)", [f"`{p.repo_id}` at `{p.location}`" for p in scan.unpinned]),
        ("Files skipped", [f"`{path}`: {why}" for path, why in scan.skipped]),
    )
    for title, items in groups:
        if items:
            lines += [f"### {title}", ""] + [f"- {item.replace(chr(10), ' ')}" for item in items[:50]]
            lines += [f"- and {len(items) - 50} more"] if len(items) > 50 else []
            lines.append("")
    return lines
