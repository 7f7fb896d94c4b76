"""`outdated --format sarif`: the pins that are behind, affected or unsafe as SARIF 2.1.0 code-scanning results, each
located on the line of code, the lock entry or the deployment file where the pin stands.

One result per (pin site, finding): a pin behind its branch (`HW001`), a security change since it (`HW002`, a
pickle that turned dangerous, a template that reaches out of its sandbox), an advisory announced since it
(`HW003`), a repo that cannot be fetched any more (`HW004`), a pinned commit the branch no longer holds (`HW005`),
a followed derivative behind its base (`HW006`). Each carries the fix (the revision to move to) where there is one,
and a fingerprint of (rule, repo, file, pinned sha): stable while the pin stays, so code scanning keeps one alert
open, and gone once the pin moves, so the alert closes. What the input held that could not be read (a malformed
lock entry, a short sha) is a tool notification, not a result.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from storage.kinds import SEVERITY_RANK
from tracker.errors import BadInput
from tracker.formats.local_files import read_regular_file
from tracker.pins.code_scan import MAX_FILE_BYTES
from tracker.pins.lockfile import MAX_LOCK_BYTES

if TYPE_CHECKING:
    from tracker.pins.cache import BadEntry
    from tracker.pins.code_scan import CodeScan
    from tracker.pins.outdated import ModelReport

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
INFORMATION_URI = "https://github.com/hubwatch/hubwatch"
FINGERPRINT = "hubwatchPin/v1"
SRCROOT = "%SRCROOT%"
LEVELS = {"critical": "error", "warning": "warning", "notice": "note", "info": "note"}
UNAVAILABLE = ("gone", "gated", "unavailable", "disabled", "moved", "branch_missing")


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    short: str
    help: str


RULES = (
    Rule("HW001", "pin-behind", "A pinned model revision is behind its branch",
         "The branch the pin follows has moved on since the pinned commit. Review what changed (hubwatch outdated, "
         "the model's feed) and move the pin to the branch head: `hubwatch outdated --scan . --write`, or "
         "`hubwatch lock --update REPO` for a lock file."),
    Rule("HW002", "pin-unsafe", "A security change happened upstream since the pinned revision",
         "A commit after the pinned one changed something hubwatch treats as a security finding: a weight file whose "
         "pickle imports callables, custom code, a chat template that reaches out of its sandbox, a rewritten "
         "history. Read the finding before moving the pin; the pinned revision itself is not made worse by it."),
    Rule("HW003", "pin-affected", "An advisory was announced for the model since the pinned revision",
         "An OSV advisory (or one of hubwatch's own records) names this model's loaders or revisions since the pin. "
         "Check whether the pinned revision is affected and move to a fixed one."),
    Rule("HW004", "repo-unavailable", "The pinned model's repo cannot be fetched",
         "The repo is gone (deleted, or private to this token), gated, disabled or renamed: a fresh install cannot "
         "download the pinned revision. Mirror the files you run, ask for access, or move to another repo."),
    Rule("HW005", "pin-not-in-history", "The pinned commit is no longer on its branch",
         "The branch's history was rewritten (force-pushed or squashed) and no longer holds the pinned commit; the "
         "files may still be downloadable by sha, but nothing upstream follows them. Move to a commit on the branch."),
    Rule("HW006", "derivative-behind-base", "A derivative's pinned copy misses a change of its base",
         "The pinned model is a quantization or fine-tune of a base model whose chat template, special tokens, stop "
         "set or vocabulary changed after the copy was made; the copy still serves the old behaviour."),
)
RULE_INDEX = {rule.id: i for i, rule in enumerate(RULES)}


@dataclass(frozen=True)
class PinSite:
    """Where a pin stands: a path (relative to the scanned root, or the lock file's path), its 1-based line, and the
    columns of the pinned sha on that line (1-based, end exclusive) when known; `path` None for a pin that stands in
    no file (the local HF cache), named by `entry`."""

    path: str | None
    line: int | None
    start_column: int | None = None
    end_column: int | None = None
    entry: str = ""


def scan_sites(scan: CodeScan) -> tuple[dict[tuple[str, str], list[PinSite]], str]:
    """Where each sha pin of a scan stands, with the sha's columns read back from its file (for the fix), and the
    scanned root's URI (the sites' paths are relative to it)."""
    root = scan.root if scan.root.is_dir() else scan.root.parent
    texts: dict[str, str] = {}
    sites: dict[tuple[str, str], list[PinSite]] = {}
    for pin in scan.pins:
        if pin.sha is None:
            continue
        if pin.path not in texts:
            try:
                data = read_regular_file(root / pin.path, MAX_FILE_BYTES, within=root, what="source file")
                texts[pin.path] = data.decode("utf-8", "replace")
            except BadInput:  # changed since the scan read it: the line without columns
                texts[pin.path] = ""
        columns = sha_columns(texts[pin.path], pin.line, pin.sha) or (None, None)
        sites.setdefault((pin.repo_id, pin.sha), []).append(PinSite(pin.path, pin.line, *columns, entry=pin.location))
    return sites, root.resolve().as_uri()


def lock_sites(lock_file: Path, reports: Sequence[ModelReport]) -> tuple[dict[tuple[str, str], list[PinSite]], str]:
    """Each lock entry on its `revision` line; paths relative to the working directory (where a CI job runs), or
    absolute for a lock file outside it."""
    cwd = Path.cwd().resolve()
    try:
        text = read_regular_file(lock_file, MAX_LOCK_BYTES, what="lock file").decode("utf-8", "replace")
    except BadInput:
        text = ""
    where = lock_file.resolve()
    path = where.relative_to(cwd).as_posix() if where.is_relative_to(cwd) else where.as_posix()
    return {(r.pin.repo_id, r.pin.sha): [sha_site(path, text, r.pin.sha, r.pin.entry)] for r in reports}, cwd.as_uri()


def sha_columns(text: str, line: int, sha: str) -> tuple[int, int] | None:
    """The 1-based columns (end exclusive) of `sha` on `line` of `text`, or None when the line does not hold it."""
    lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return None
    at = lines[line - 1].find(sha)
    return (at + 1, at + 1 + len(sha)) if at >= 0 else None


def sha_site(path: str, text: str, sha: str, entry: str) -> PinSite:
    """The first line of `text` holding `sha` (a lock file's `revision = "..."`), or the file's top."""
    for number, content in enumerate(text.splitlines(), start=1):
        if (at := content.find(sha)) >= 0:
            return PinSite(path, number, at + 1, at + 1 + len(sha), entry)
    return PinSite(path, 1, entry=entry)


def render_sarif(reports: Sequence[ModelReport], sites: dict[tuple[str, str], list[PinSite]], bad: Sequence[BadEntry],
                 version: str, root_uri: str | None = None, hub_url: str = "https://huggingface.co") -> dict[str, Any]:
    """The SARIF log: one run of hubwatch with the six rules, a result per (site, finding), the unreadable entries
    as notifications. `sites` maps (repo id, pinned sha) to where that pin stands; `root_uri` is the scanned root's
    file URI (paths are relative to it)."""
    results = []
    for report in reports:
        for site in sites.get((report.pin.repo_id, report.pin.sha)) or [PinSite(None, None, entry=report.pin.entry)]:
            results += [_result(report, site, rule_id, level, message, hub_url)
                        for rule_id, level, message in _findings(report)]
    run: dict[str, Any] = {
        "tool": {"driver": {"name": "hubwatch", "version": version, "informationUri": INFORMATION_URI,
                            "rules": [_rule(rule) for rule in RULES]}},
        "results": results,
        "invocations": [{"executionSuccessful": not bad, "toolExecutionNotifications": [
            {"level": "error", "message": {"text": f"{b.entry}: {b.message}"}} for b in bad]}],
    }
    if root_uri is not None:
        run["originalUriBaseIds"] = {SRCROOT: {"uri": root_uri if root_uri.endswith("/") else root_uri + "/"}}
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def _rule(rule: Rule) -> dict[str, Any]:
    return {"id": rule.id, "name": rule.name, "shortDescription": {"text": rule.short},
            "fullDescription": {"text": rule.help}, "help": {"text": rule.help, "markdown": rule.help},
            "defaultConfiguration": {"level": "warning"}}


def _findings(report: ModelReport) -> list[tuple[str, str, str]]:
    """(rule id, level, message) of each finding about one pin."""
    pin, out = report.pin, []
    at = f"{pin.repo_id} pinned at {pin.sha[:12]}"
    if report.status in UNAVAILABLE:
        level = "warning" if report.status in ("gated", "moved") else "error"
        what = "; what to do: ".join(filter(None, [report.message, report.advice])) or "it cannot be fetched"
        out.append(("HW004", level, f"{at}: the repo is {report.status.replace('_', ' ')}: {what}"))
    elif report.status in ("rewritten", "not_in_history"):
        out.append(("HW005", "warning", f"{at}: {report.message or 'the commit is no longer on ' + pin.branch}"))
    security = [c for c in report.changes if c.security]
    advisories = [c for c in report.changes if c.kind == "advisories"]
    rest = [c for c in report.changes if not c.security and c.kind != "advisories"]
    if report.status == "behind" or (report.status in ("moved", "gated") and report.commits_behind):
        worst = max((c.severity for c in rest), key=SEVERITY_RANK.__getitem__, default="notice")
        counts = ", ".join(f"{kind} {sum(n.values())}" for kind, n in report.summary().items())
        out.append(("HW001", LEVELS[worst], f"{at} is {report.commits_behind} commit(s) behind {pin.branch} "
                                            f"({(report.head_sha or '')[:12]})" + (f"; changed since: {counts}" if counts else "")))
    if security:
        out.append(("HW002", "error", f"{at}: {len(security)} security change(s) since: " + _listed(security)))
    if advisories:
        worst = max((c.severity for c in advisories), key=SEVERITY_RANK.__getitem__)
        out.append(("HW003", LEVELS[worst], f"{at}: {len(advisories)} advisory(ies) since: " + _listed(advisories)))
    if report.lineage is not None and (report.lineage.behind or report.lineage.records):
        records = report.lineage.records
        osv = f" (hubwatch OSV record(s) {', '.join(records[:5])}{' and more' if len(records) > 5 else ''})" if records else ""
        out.append(("HW006", "warning", f"{at}: its copy misses a change of its base {report.lineage.base_repo_id}{osv}"))
    return out


def _listed(changes: Sequence[Any]) -> str:
    shown = "; ".join(f"[{c.severity}] {c.summary}" for c in changes[:3])
    return shown + (f"; and {len(changes) - 3} more" if len(changes) > 3 else "")


def _result(report: ModelReport, site: PinSite, rule_id: str, level: str, message: str, hub_url: str) -> dict[str, Any]:
    pin = report.pin
    result: dict[str, Any] = {
        "ruleId": rule_id, "ruleIndex": RULE_INDEX[rule_id], "level": level, "message": {"text": message[:2000]},
        "partialFingerprints": {FINGERPRINT: _fingerprint(rule_id, pin.repo_id, site.path or site.entry, pin.sha)},
        "properties": {"repo_id": pin.repo_id, "branch": pin.branch, "pinned_sha": pin.sha,
                       "head_sha": report.head_sha, "status": report.status,
                       "url": f"{hub_url.rstrip('/')}/{pin.repo_id}/commit/{pin.sha}"},
    }
    if rule_id == "HW006" and report.lineage is not None and report.lineage.records:
        result["properties"]["osv_ids"] = list(report.lineage.records)
    if site.path is None:
        result["locations"] = [{"logicalLocations": [{"name": site.entry or pin.entry, "kind": "module"}]}]
        return result
    region: dict[str, Any] = {"startLine": site.line or 1}
    if site.start_column is not None and site.end_column is not None:
        region |= {"startColumn": site.start_column, "endColumn": site.end_column}
    artifact = {"uri": site.path, "uriBaseId": SRCROOT}
    result["locations"] = [{"physicalLocation": {"artifactLocation": artifact, "region": region}}]
    if rule_id == "HW001" and report.head_sha and "startColumn" in region:
        result["fixes"] = [{"description": {"text": f"Move the pin to {pin.branch}'s head {report.head_sha[:12]}"},
                            "artifactChanges": [{"artifactLocation": artifact, "replacements": [
                                {"deletedRegion": region, "insertedContent": {"text": report.head_sha}}]}]}]
    return result


def _fingerprint(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()
