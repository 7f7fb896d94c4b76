"""The verifier's lints: every rule of estimator.lint_rules with its severity, what it checks, its evidence and fix."""

from __future__ import annotations

from estimator.lint_rules import RULES, SEVERITIES
from refdocs.markdown import cell, code, table


def render() -> str:
    """One row per lint, the loudest first (then by id), and a section per lint naming what it checks."""
    rules = sorted(RULES.values(), key=lambda r: (-SEVERITIES.index(r.severity), r.id))
    rows = [(f"[{code(r.id)}](#{r.id})", code(r.severity), cell(r.title)) for r in rules]
    out = [table(("Lint", "Severity", "Finding"), rows), ""]
    for r in rules:
        out += [f"### {r.id} {{ #{r.id} }}", "", f"**{r.severity}**: {r.title}.", "",
                f"- **Checks**: {r.checks}", f"- **Evidence**: {r.evidence}", f"- **Fix**: {r.fix}", ""]
    return "\n".join(out)
